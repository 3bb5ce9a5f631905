#!/usr/bin/env bash
# zoo-cpu-bundle.sh builds here (Go, no GPU) what session.sh's part 7 runs on
# the GPU machine's host CPU: the CPU programs of torchvision's classifiers
# that `make zoo` imported into ZOO_DIR (BENCH_ZOO_MODELS, default all seven
# of bench-zoo's), xz-compressed, with bench/zoo's bench.sh and
# torch_bench.py, and session.sh. session-bundle.sh calls it for its CPU
# folder; alone it rebuilds that part in a minute.
# Usage: bench/gpu/zoo-cpu-bundle.sh ZOO_DIR [DIR]  (DIR default .gpu/cpu)
# There: CPU_BUNDLE=DIR bash DIR/session.sh DIR OUT 7
set -euo pipefail
cd "$(dirname "$0")/../.."
zoo=$1 cout=${2:-.gpu/cpu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
rm -rf "$cout/zoo" && mkdir -p "$cout/zoo"
cp bench/zoo/bench.sh bench/zoo/torch_bench.py "$cout/zoo/"
cp bench/gpu/session.sh "$cout/"
for m in ${BENCH_ZOO_MODELS:-resnet18 resnet50 mobilenet_v2 efficientnet_b0 densenet121 squeezenet1_0 regnet_y_400mf}; do
	[ -s "$zoo/$m.d/$m.cue" ] || { echo "zoo-cpu-bundle: no $zoo/$m.d/$m.cue (make zoo ZOO_MODELS=$m)" >&2; continue; }
	"$tmp/mlbuild" compile "$zoo/$m.d/$m.cue" --target linux/amd64 -o "$tmp/zoo-$m" --cache-dir "$tmp/cache" --force >/dev/null
	xz -6 -T0 -c "$tmp/zoo-$m" >"$cout/zoo/$m.xz"
done
git rev-parse --short HEAD >"$cout/zoo/VERSION"
du -sh "$cout/zoo"
