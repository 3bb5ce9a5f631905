#!/usr/bin/env bash
# attn-variants.sh runs, on a GPU machine, what attn-variants-bundle.sh
# built: for each block policy of the fused attention kernels, the bf16
# GPT's bench medians (bench --json --iters 20), then 3 steps with
# MLBUILD_CUDA_PROFILE=1, of whose table it prints the sequences and the
# three attention kernels (forward, bwd_kv, bwd_q: each op alone, a launch
# and a wait included). About 30 s a variant; each command is cut at 60 s.
# Usage: bash attn-variants.sh BUNDLE OUT
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
export MLBUILD_CUDA_CACHE=$work/kernels
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" && chmod +x "$2"; }
echo "mlbuild $(cat "$b/VERSION")"; nvidia-smi -L
for v in $(cat "$b/VARIANTS"); do
	start=$SECONDS
	p=$work/gpt-bf16-$v
	unxz "$b/gpt-bf16-$v.xz" "$p"
	echo; echo "== attention variant $v: bench"
	timeout 60 "$p" bench --json --iters 20 2>&1 | tee "$out/$v-bench.json" | tail -n 2
	echo "== $v: profile (3 iterations)"
	MLBUILD_CUDA_PROFILE=1 timeout 60 "$p" bench --iters 3 2>"$out/$v-profile.txt" >/dev/null
	grep -E 'sequence|_attention(_bwd_kv|_bwd_q)?$' "$out/$v-profile.txt"
	echo "== $v: $((SECONDS - start)) s"
done
