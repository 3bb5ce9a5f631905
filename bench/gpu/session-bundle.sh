#!/usr/bin/env bash
# session-bundle.sh builds here (Go, no GPU) the one folder a short lease of
# a GPU machine runs with bench/gpu/session.sh, compressed to fit the 64 MiB
# that a call of the device tool carries:
#   selftest.tar.xz  the CUDA program of every spec in testdata/specs/valid/
#               and models/ (selftest-all.sh runs their selftest), one archive
#   ZOO_OUT     (default .gpu/zoo, a folder apart: with it the whole is over
#               64 MiB) torchvision's classifiers that `make zoo` imported,
#               as zoo-bundle.sh makes them, and zoo.sh, which runs them
#   r18/        bench/models/resnet18_cifar.cue for CUDA (and its bf16 and
#               tf32 twins, resnet18_cifar_bf16.cue and _tf32.cue) and its
#               PyTorch twin
#   CPU_OUT     (default .gpu/cpu, apart) part 5: resnet18_cifar.cue for the
#               CPU, cpu_memory.py, and the imported resnet18 with its
#               weights embedded and one sample (from ZOO_DIR); part 7:
#               the CPU programs of the zoo (BENCH_ZOO_MODELS) for bench-zoo
#   cuda.test   the cuda package's tests, whose Real cases need the GPU
# Every program is xz-compressed; session.sh unpacks them there.
# Usage: bench/gpu/session-bundle.sh ZOO_DIR [DIR [ZOO_OUT [CPU_OUT]]]  (DIR: .gpu/session, CPU_OUT: .gpu/cpu)
# There: session.sh DIR OUT "1 2 3", zoo.sh ZOO_OUT OUT, and
# CPU_BUNDLE=CPU_OUT bash CPU_OUT/session.sh CPU_OUT OUT 5.
set -euo pipefail
cd "$(dirname "$0")/../.."
zoo=$1 dir=${2:-.gpu/session} zout=${3:-.gpu/zoo} cout=${4:-.gpu/cpu}
rm -rf "$dir" && mkdir -p "$dir/r18"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
mkdir -p "$tmp/st/selftest"
for spec in testdata/specs/valid/*.cue models/*.cue; do
	name=$(basename "$spec" .cue)
	if ! "$tmp/mlbuild" compile "$spec" --backend cuda --target linux/amd64 -o "$tmp/st/selftest/$name" --cache-dir "$tmp/cache" --force >"$tmp/$name.log" 2>&1; then
		echo "$name: $(tail -n 1 "$tmp/$name.log")" >>"$tmp/st/selftest/COMPILE-FAILED"
	fi
done
# One archive, one dictionary larger than the programs together: they share
# the runtime, so the archive is ~13 MB where 43 programs compressed one by
# one were ~60 MB (and took the session past the 64 MiB a call carries).
tar -C "$tmp/st" -cf - selftest | xz -6 --lzma2=dict=256MiB >"$dir/selftest.tar.xz"
"$tmp/mlbuild" compile bench/models/resnet18_cifar.cue --backend cuda --target linux/amd64 -o "$tmp/r18" --cache-dir "$tmp/cache" --force
xz -6 -T0 -c "$tmp/r18" >"$dir/r18/resnet18_cifar.xz"
for p in bf16 tf32; do
	"$tmp/mlbuild" compile "bench/models/resnet18_cifar_$p.cue" --backend cuda --target linux/amd64 -o "$tmp/r18-$p" --cache-dir "$tmp/cache" --force
	xz -6 -T0 -c "$tmp/r18-$p" >"$dir/r18/resnet18_cifar_$p.xz"
done
"$tmp/mlbuild" compile bench/models/resnet18_cifar.cue --backend cpu --target linux/amd64 -o "$tmp/r18cpu" --cache-dir "$tmp/cache" --force
cp bench/gpu/torch_resnet_cifar.py "$dir/r18/"
# Part 5 (the host CPU), a folder apart since the embedded weights would
# take the session past 64 MiB: the CPU program of resnet18_cifar.cue,
# cpu_memory.py with the PyTorch twin it imports, and the imported resnet18
# with its weights embedded and one of the photographs' crops.
rm -rf "$cout" && mkdir -p "$cout"
xz -6 -T0 -c "$tmp/r18cpu" >"$cout/resnet18_cifar-cpu.xz"
cp bench/gpu/torch_resnet_cifar.py bench/gpu/cpu_memory.py bench/gpu/session.sh "$cout/"
if [ -s "$zoo/resnet18.d/resnet18.safetensors" ] && [ -s "$zoo/resnet18.x.npy" ]; then
	"$tmp/mlbuild" compile "$zoo/resnet18.d/resnet18.cue" --weights "$zoo/resnet18.d/resnet18.safetensors" --target linux/amd64 -o "$tmp/zr18" --cache-dir "$tmp/cache" --force
	xz -6 -T0 -c "$tmp/zr18" >"$cout/resnet18-224.xz"
	/usr/bin/python3 -c 'import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1])[:1])' "$zoo/resnet18.x.npy" "$cout/one.npy"
fi
# Part 7 (the host CPU): the zoo's CPU programs for bench-zoo against the
# machine's PyTorch.
bench/gpu/zoo-cpu-bundle.sh "$zoo" "$cout" >/dev/null
go test -c -o "$tmp/cuda.test" ./cuda
xz -6 -T0 -c "$tmp/cuda.test" >"$dir/cuda.test.xz"
if [ -d "$zoo" ]; then
	bench/gpu/zoo-bundle.sh "$zoo" "$tmp/zoo" >/dev/null
	rm -rf "$zout" && mkdir -p "$zout/cuda"
	cp -r "$tmp/zoo/specs" "$tmp/zoo/photos" "$tmp/zoo/export.py" bench/gpu/zoo.sh "$zout/"
	gunzip -c "$tmp/zoo/mlbuild.gz" | xz -6 -T0 >"$zout/mlbuild.xz"
	for f in "$tmp"/zoo/cuda/*.gz; do gunzip -c "$f" | xz -6 -T0 >"$zout/cuda/$(basename "$f" .gz).xz"; done
fi
cp bench/gpu/session.sh bench/gpu/selftest-all.sh bench/gpu/zoo.sh "$dir/"
echo "mlbuild $(git describe --always --dirty 2>/dev/null || echo unknown)" >"$dir/VERSION"
du -sh "$dir"
