#!/usr/bin/env bash
# Fetches Fashion-MNIST from Debian's package dataset-fashion-mnist into DIR:
# installs the package when it is missing (apt-get, through sudo when not
# root), gunzips its four IDX files into DIR (raw files are memory-mapped by
# rt/idx, gzip ones would be decompressed into memory on every run) and
# checks their md5 sums. Usage: scripts/fetch-fashion.sh DIR
set -euo pipefail
dir=${1:-data/fashion}
src=/usr/share/datasets/fashion-mnist
mkdir -p "$dir"
check() {
	(cd "$dir" && md5sum --status -c - <<SUMS
f4a8712d7a061bf5bd6d2ca38dc4d50a  train-images-idx3-ubyte
9018921c3c673c538a1fc5bad174d6f9  train-labels-idx1-ubyte
8181f5470baa50b63fa0f6fddb340f0a  t10k-images-idx3-ubyte
15d484375f8d13e6eb1aabb0c3f46965  t10k-labels-idx1-ubyte
SUMS
	)
}
if check 2>/dev/null; then
	echo "Fashion-MNIST already in $dir (md5 sums match)"
	exit 0
fi
if [ ! -f "$src/train-images-idx3-ubyte.gz" ]; then
	if ! command -v apt-get >/dev/null; then
		echo "fetch-fashion: $src is missing and apt-get is not available:" >&2
		echo "  install Debian's package dataset-fashion-mnist, or put the four Fashion-MNIST IDX files in $dir" >&2
		exit 1
	fi
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "installing Debian's dataset-fashion-mnist with apt-get..."
	if ! $sudo apt-get install -y -qq dataset-fashion-mnist >/dev/null; then
		$sudo apt-get update -qq
		$sudo apt-get install -y -qq dataset-fashion-mnist >/dev/null
	fi
fi
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	gunzip -c "$src/$f.gz" >"$dir/$f.tmp"
	mv "$dir/$f.tmp" "$dir/$f"
done
if ! check; then
	echo "fetch-fashion: the md5 sums of the files in $dir do not match Fashion-MNIST's" >&2
	exit 1
fi
echo "Fashion-MNIST in $dir (md5 sums match)"
