#!/usr/bin/env bash
# Measures what fusion buys: compiles a spec with and without fusion and
# runs the two binaries' bench alternately, printing the medians and the
# ratios. Usage: scripts/bench-fusion.sh [SPEC] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${1:-models/mnist.cue}
rounds=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/mlbuild" ./cmd/mlbuild
"$tmp/mlbuild" compile "$spec" --fusion on -o "$tmp/fused" --cache-dir "$tmp/cache" >/dev/null
"$tmp/mlbuild" compile "$spec" --fusion off -o "$tmp/unfused" --cache-dir "$tmp/cache" >/dev/null
for i in $(seq "$rounds"); do
	for b in fused unfused; do
		"$tmp/$b" bench --iters 20 --json | sed "s/^/$b /" >>"$tmp/results"
	done
done
python3 - "$tmp/results" "$spec" <<'PY'
import json, statistics, sys
rows = {"fused": [], "unfused": []}
for line in open(sys.argv[1]):
    name, js = line.split(" ", 1)
    rows[name].append(json.loads(js))
def med(name, key):
    return statistics.median(r[key] for r in rows[name])
print(f"fusion on {sys.argv[2]} ({rows['fused'][0]['threads']} threads, medians of {len(rows['fused'])} alternating runs)")
print("| measure | fused ms | unfused ms | speed-up |")
print("|---|--:|--:|--:|")
for key, label in [("train_step_ms", "training step"), ("infer_batch_ms", "inference, spec batch"), ("infer_batch1_ms", "inference, batch 1")]:
    f, u = med("fused", key), med("unfused", key)
    print(f"| {label} | {f:.3f} | {u:.3f} | {u / f:.2f}x |")
PY
