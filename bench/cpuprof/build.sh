#!/usr/bin/env bash
# build.sh builds, here, what run.sh profiles on another machine's CPU (the
# GPU machines' host: 16 cores, AMX, where no Go is installed): SPEC's CPU
# program with pprof.go beside its emitted main.go (a CPU profile of the
# whole run, written at exit), in f32 and with precision: "bf16", and
# rt/cpu's test binary (its GEMM benchmarks and the AMX tests).
# Usage: bench/cpuprof/build.sh [SPEC [DIR]]  (defaults models/gpt.cue, .gpu/cpuprof)
# There: bash DIR/run.sh DIR OUT; here: go tool pprof DIR/NAME OUT/NAME-tT.prof
set -euo pipefail
cd "$(dirname "$0")/../.."
spec=${1:-models/gpt.cue} dir=${2:-.gpu/cpuprof}
rm -rf "$dir" && mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
name=$(basename "$spec" .cue)
sed -e "s/name: \"$name\"/name: \"${name}_bf16\"\n\tprecision: \"bf16\"/" "$spec" >"$tmp/${name}_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/${name}_bf16.cue"
for v in "$spec:$name" "$tmp/${name}_bf16.cue:$name-bf16"; do
	src=${v%%:*} out=${v#*:}
	"$tmp/mlbuild" compile "$src" --backend cpu --target linux/amd64 --emit "$tmp/$out" -o "$tmp/$out.bin" >/dev/null
	# main.go's main runs the program and exits: pprof.go's main runs it,
	# writes the profile, then exits.
	sed -i 's/^func main() { app.Main(model{}) }$/func emittedMain() { app.Main(model{}) }/' "$tmp/$out/main.go"
	grep -q '^func emittedMain' "$tmp/$out/main.go"
	cp bench/cpuprof/pprof.go.in "$tmp/$out/pprof.go"
	(cd "$tmp/$out" && go build -o "$OLDPWD/$dir/$out" .)
done
go test -c -o "$dir/cpu.test" ./rt/cpu
cp bench/cpuprof/run.sh "$dir/"
git rev-parse --short HEAD >"$dir/VERSION"
du -sh "$dir"
