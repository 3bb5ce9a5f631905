#!/usr/bin/env bash
# Fetches the images that Debian's python3-skimage and python3-sklearn ship
# into DIR and checks their md5 sums: colour photographs in JPEG and PNG
# (the tests of the image readers, RGB image folders and resizing), a
# truncated JPEG (a bad-data test) and lfw_subset.npy (200 grey 25x25
# photographs from Labeled Faces in the Wild, 100 faces then 100 other
# patches). The files come from the installed packages when they are there,
# otherwise from the package files themselves (apt-get download, unpacked
# with dpkg-deb: nothing is installed).
#
# It then writes, with scripts/mkdata, the example data sets derived from
# them: DIR/faces (lfw_subset.npy as a folder of JPEGs per class, the image
# folder of models/faces.cue) and DIR/digits.npz (SKDATA/digits.csv as a
# compressed NumPy archive, models/digits.cue).
# Usage: scripts/fetch-image-data.sh DIR SKDATA
set -euo pipefail
dir=${1:-data/images}
skdata=${2:-data/sklearn}
mkdir -p "$dir"
check() {
	(cd "$dir" && md5sum --status -c - <<SUMS
1c6116212e35016fa7c3b67c81ec1335  china.jpg
5896f0d20066ea484089d086cd8e5a8d  flower.jpg
9ceb864b0352b4747a8c8d465f9b3e35  lfw_subset.npy
8c1d04cc5d8627152c7dd8378fe35166  truncated.jpg
511130d2072cc744a1fa5015bc23557a  rocket.jpg
bfc42613c8edb720cf7d1343693787a4  hubble_deep_field.jpg
f24210802e8d0690e0c1c2302f907cc4  coffee.png
0f1b4a59504988622035d850dc0555ac  chelsea.png
SUMS
	)
}
if ! check 2>/dev/null; then
	skimage=/usr/lib/python3/dist-packages/skimage/data
	sklearn=/usr/lib/python3/dist-packages/sklearn/datasets/images
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	fetch() { # unpack Debian package $1 into $tmp/root
		echo "fetching Debian's $1 package (unpacked, not installed)..."
		if ! (cd "$tmp" && apt-get download "$1" >/dev/null 2>&1); then
			sudo=""
			[ "$(id -u)" = 0 ] || sudo=sudo
			$sudo apt-get update -qq
			(cd "$tmp" && apt-get download "$1" >/dev/null)
		fi
		dpkg-deb -x "$tmp"/"$1"_*.deb "$tmp/root"
	}
	if [ ! -f "$skimage/lfw_subset.npy" ]; then
		fetch python3-skimage
		skimage="$tmp/root$skimage"
	fi
	if [ ! -f "$sklearn/china.jpg" ]; then
		fetch python3-sklearn
		sklearn="$tmp/root$sklearn"
	fi
	for f in china.jpg flower.jpg; do
		cp "$sklearn/$f" "$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f"
	done
	for f in lfw_subset.npy truncated.jpg rocket.jpg hubble_deep_field.jpg coffee.png chelsea.png; do
		cp "$skimage/$f" "$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f"
	done
	check || { echo "the image files' md5 sums do not match those of python3-skimage 0.19.3 and python3-sklearn 1.2.1" >&2; exit 1; }
fi
echo "scikit-image and scikit-learn images in $dir (md5 sums match)"
go=${GO:-go}
if [ ! -d "$dir/faces" ] || [ "$dir/lfw_subset.npy" -nt "$dir/faces" ]; then
	$go run ./scripts/mkdata faces "$dir/lfw_subset.npy" "$dir/faces"
	echo "wrote $dir/faces: lfw_subset.npy as JPEG files in face/ and nonface/"
fi
if [ ! -f "$dir/digits.npz" ] || [ "$skdata/digits.csv" -nt "$dir/digits.npz" ]; then
	$go run ./scripts/mkdata digits-npz "$skdata/digits.csv" "$dir/digits.npz"
	echo "wrote $dir/digits.npz: $skdata/digits.csv as arrays x (uint8) and y (int64)"
fi
