#!/usr/bin/env bash
# decode-scaling-bundle.sh builds here (Go, no GPU) the folder that
# decode-scaling.sh runs on the GPU machine's host CPU (16 cores; PyTorch
# 2.x as `python3`, no Go) for issue #31's generation at batch 1 on 1 to
# 16 cores: models/gpt.cue's CPU program from this tree and, with
# BASE=REV, the same program built from commit REV (the decode before a
# change, for a before/after in one run), the text that the program trains
# its one step of weights on, the PyTorch twin's KV-cache loop, and
# rt/cpu's test binary for the team's step and token benchmarks.
# Usage: [BASE=REV] bench/gpu/decode-scaling-bundle.sh [TEXT_DIR [DIR]]
#        (defaults data/text, .gpu/decode-scaling)
# There: bash DIR/decode-scaling.sh DIR OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
text=${1:-data/text} dir=${2:-.gpu/decode-scaling}
rm -rf "$dir" && mkdir -p "$dir/data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
# compile TREE OUT: models/gpt.cue's CPU program, built by TREE's mlbuild
compile() {
	(cd "$1" && go build -trimpath -o "$tmp/mlbuild-$2" ./cmd/mlbuild &&
		"$tmp/mlbuild-$2" compile models/gpt.cue --backend cpu --target linux/amd64 -o "$tmp/$2" --cache-dir "$tmp/cache-$2" --force >/dev/null)
	xz -6 -T0 -c "$tmp/$2" >"$dir/$2.xz"
}
compile . gpt
go test -c -trimpath -o "$tmp/cpu.test" ./rt/cpu
xz -6 -T0 -c "$tmp/cpu.test" >"$dir/cpu.test.xz"
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- rt emit planner cmd || echo ' with uncommitted changes')" >"$dir/VERSION"
if [ -n "${BASE:-}" ]; then
	mkdir "$tmp/base"
	git archive "$BASE" | tar -x -C "$tmp/base"
	compile "$tmp/base" gpt-base
	git rev-parse --short "$BASE" >"$dir/BASE"
fi
cp "$text/moby-dick.txt" "$dir/data/"
cp bench/gpu/decode-scaling.sh bench/generate/torch_kv.py "$dir/"
du -sh "$dir"
