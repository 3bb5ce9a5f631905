#!/usr/bin/env bash
# zoo-bundle.sh builds here (Go, no GPU) what bench/gpu/zoo.sh runs on a GPU
# machine: the CUDA program of every torchvision classifier that `make zoo`
# imported (compiled from the spec that import wrote, weights not embedded),
# mlbuild itself (gzipped, for the import there), the export script and the
# photographs it crops. Usage: bench/gpu/zoo-bundle.sh ZOO_DIR [DIR]
# (ZOO_DIR as `make zoo` left it; DIR defaults to .gpu/zoo).
set -euo pipefail
cd "$(dirname "$0")/../.."
zoo=$1 dir=${2:-.gpu/zoo}
rm -rf "$dir" && mkdir -p "$dir/cuda" "$dir/specs" "$dir/photos"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
gzip -c "$tmp/mlbuild" >"$dir/mlbuild.gz"
for cue in "$zoo"/*.d/*.cue; do
	m=$(basename "$cue" .cue)
	if "$tmp/mlbuild" compile "$cue" --backend cuda --target linux/amd64 -o "$tmp/$m" --cache-dir "$tmp/cache" --force >"$tmp/$m.log" 2>&1; then
		gzip -c "$tmp/$m" >"$dir/cuda/$m.gz"
		cp "$cue" "$dir/specs/"
	else
		echo "$m: CUDA compile failed: $(tail -n1 "$tmp/$m.log")" >&2
	fi
done
cp bench/zoo/export.py bench/gpu/zoo.sh "$dir/"
cp data/images/{chelsea.png,china.jpg,coffee.png,flower.jpg,hubble_deep_field.jpg,rocket.jpg} "$dir/photos/"
du -sh "$dir"
