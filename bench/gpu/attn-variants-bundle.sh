#!/usr/bin/env bash
# attn-variants-bundle.sh builds here (Go, no GPU) the folder that
# attn-variants.sh runs on a GPU machine: models/gpt.cue in bf16 for CUDA,
# once per block policy of the fused attention kernels (attnPolicies in
# emit/gpu/kernels_attention.go), each compiled by an mlbuild built with
# -ldflags "-X github.com/mlbuild/mlbuild/emit/gpu.attnVariant=NAME", so
# that one GPU call times them side by side. A variant POLICY-nofrags
# (or -notiles) is that policy built with -X …/emit/gpu.attnNoFrags=1
# (attnNoTiles=1): the fused attention off the register fragments, on
# the wmma tiles (or off both, on the SIMT kernels).
# Usage: bench/gpu/attn-variants-bundle.sh [DIR]  (default .gpu/attnvar)
# VARIANTS picks the variants (default: ilp ilp-nofrags).
# There: bash DIR/attn-variants.sh DIR OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu/attnvar}
variants=${VARIANTS:-ilp ilp-nofrags}
rm -rf "$dir" && mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
sed -e 's/name: "gpt"/name: "gpt_bf16"\n\tprecision: "bf16"/' models/gpt.cue >"$tmp/gpt_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/gpt_bf16.cue"
for v in $variants; do
	flags="-X github.com/mlbuild/mlbuild/emit/gpu.attnVariant=${v%%-*}"
	case $v in
	*-nofrags) flags="$flags -X github.com/mlbuild/mlbuild/emit/gpu.attnNoFrags=1" ;;
	*-notiles) flags="$flags -X github.com/mlbuild/mlbuild/emit/gpu.attnNoTiles=1" ;;
	esac
	go build -trimpath -ldflags "$flags" -o "$tmp/mlbuild-$v" ./cmd/mlbuild
	"$tmp/mlbuild-$v" compile "$tmp/gpt_bf16.cue" --backend cuda --target linux/amd64 -o "$tmp/gpt-bf16-$v" \
		--cache-dir "$tmp/cache-$v" --force
	# a variant that compiles to the first's bytes did not take
	first=${first:-$v}
	if [ "$v" != "$first" ] && cmp -s "$tmp/gpt-bf16-$first" "$tmp/gpt-bf16-$v"; then
		echo "attn-variants-bundle: variant $v compiled to the same program as $first" >&2
		exit 1
	fi
	xz -6 -T0 -c "$tmp/gpt-bf16-$v" >"$dir/gpt-bf16-$v.xz"
done
echo "$variants" >"$dir/VARIANTS"
cp bench/gpu/attn-variants.sh "$dir/"
git rev-parse --short HEAD >"$dir/VERSION"
du -sh "$dir"
