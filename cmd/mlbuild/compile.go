package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/cache"
	"github.com/mlbuild/mlbuild/emit"
	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/atomicfile"
	"github.com/mlbuild/mlbuild/spec"
)

func init() { subcommands = append(subcommands, newCompileCmd) }

// compileOptions are the inputs of `mlbuild compile`.
type compileOptions struct {
	files   []string
	out     string
	target  string // GOOS/GOARCH
	backend string
	emitDir string
	fusion  bool
	// keepBN is --fold-batchnorm=off: keep the inference plans' batch
	// norms where the backend would fold them into the layers before.
	keepBN   bool
	force    bool
	cacheDir string
	memLimit string // --memory-limit, "" for this machine's memory
	weights  string // --weights, a safetensors file to embed; "" for none
	stdout   io.Writer
	stderr   io.Writer
}

func newCompileCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compile FILE...",
		Short: "Compile a model spec to a standalone binary",
		Long: `Compile checks a model spec, plans it, writes a Go program specialised to
that one model and builds it into a standalone binary (CGO_ENABLED=0,
statically linked on Linux) that trains, evaluates and runs the model.

Binaries are cached by a key that covers everything that changes the
generated program (the plans, the backend, the target, mlbuild's and Go's
versions, the bytes of embedded weights), so compiling the same spec again
is a cache hit. Set MLBUILD_DEBUG=cachekey to print the key's lines.

--weights FILE compiles a safetensors file of weights into the binary,
which then predicts, evaluates and trains on from them with no other file
(a --weights given to the binary still overrides them). The file is
checked first: every param of the spec by name, with its shape and a
dtype the program reads (F32, F64, F16, BF16), and nothing else.

Examples:
  # compile for this machine; the binary is ./mnist
  mlbuild compile models/mnist.cue

  # keep the generated source to read it
  mlbuild compile models/mnist.cue --emit build/mnist-src

  # cross-compile for an Apple M-series Mac
  mlbuild compile models/mnist.cue --target darwin/arm64 -o mnist-mac

  # the Metal backend (MPS GEMMs and generated Metal kernels), from any OS
  mlbuild compile models/mnist.cue --backend metal --target darwin/arm64 -o mnist-metal

  # the CUDA backend (cuBLAS GEMMs, generated CUDA kernels, one CUDA graph per step)
  mlbuild compile models/mnist.cue --backend cuda --target linux/amd64 -o mnist-cuda

  # one file to ship: the weights are compiled in (checked against the
  # spec first); ./mlp predict x.npy then needs no --weights
  mlbuild import mlp.onnx && mlbuild compile mlp.cue --weights mlp.safetensors

  # measure what fusion buys
  mlbuild compile models/mnist.cue --fusion=off -o mnist-unfused

  # measure what folding the batch norms into the convolutions buys
  # (inference only: the training plan is the same either way)
  mlbuild compile bench/models/resnet18_cifar.cue --fold-batchnorm=off -o resnet18-unfolded`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.config
			opts := &compileOptions{
				files:    args,
				out:      c.GetString("output"),
				target:   c.GetString("target"),
				backend:  c.GetString("backend"),
				emitDir:  c.GetString("emit"),
				force:    c.GetBool("force"),
				cacheDir: c.GetString("cache-dir"),
				memLimit: c.GetString("memory-limit"),
				weights:  c.GetString("weights"),
				stdout:   g.stdout,
				stderr:   g.stderr,
			}
			fusion, err := parseSwitch("--fusion", c.GetString("fusion"))
			if err != nil {
				return err
			}
			opts.fusion = fusion
			fold, err := parseSwitch("--fold-batchnorm", c.GetString("fold-batchnorm"))
			if err != nil {
				return err
			}
			opts.keepBN = !fold
			return compileRun(opts)
		},
	}
	f := cmd.Flags()
	f.StringP("output", "o", "", "where to write the binary (default: the model's name in the current directory)")
	f.String("target", runtime.GOOS+"/"+runtime.GOARCH, "GOOS/GOARCH to build for")
	f.String("backend", "cpu", backendHelp())
	f.String("emit", "", "also write the generated Go source to this directory")
	f.String("fusion", "on", "fuse bias+activation into GEMMs and chains of element-wise ops: on or off")
	f.String("fold-batchnorm", "on", "fold each inference batch norm into the convolution or dense layer before it (with --fusion on, on the CPU): on or off")
	f.Bool("force", false, "overwrite an output file that mlbuild did not make")
	f.String("cache-dir", "", "build cache directory (default $MLBUILD_CACHE_DIR or the user cache dir)")
	f.String("memory-limit", "", memoryLimitHelp)
	f.String("weights", "", "embed the weights in this safetensors file, checked against the spec's params, so the binary predicts with no other file")
	return cmd
}

// backendHelp describes --backend from the backend table.
func backendHelp() string {
	var lines []string
	for _, b := range emit.Backends {
		lines = append(lines, b.Name+": "+b.Doc)
	}
	return "backend, one of\n" + strings.Join(lines, "\n")
}

// buildKey lists everything that changes the built program, one readable
// line each: mlbuild's version, Go's, the backend, the target, every
// setting of the go command that can change its output (goBuildSettings:
// GOAMD64=v4 makes a binary other machines cannot run) and every file the
// emitter writes, so editing what no program carries (a test, a document)
// never invalidates a cached binary. The files are the ones built: the key
// reaches the program at link time (see goBuild), not through its source.
// Its error carries ExitBuild.
func buildKey(opts *compileOptions, files []emit.File, goVersion string) (*cache.Key, error) {
	k := cache.NewKey()
	k.Add("mlbuild", mlbuildVersion())
	k.Add("go", goVersion)
	k.Add("backend", opts.backend)
	k.Add("target", opts.target)
	goos, goarch, _ := strings.Cut(opts.target, "/")
	settings, err := goBuildSettings(files, goos, goarch)
	if err != nil {
		return nil, withCode(ExitBuild, err)
	}
	for _, s := range settings {
		k.Add("goenv "+s[0], s[1])
	}
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		k.Add("file "+f.Path, hex.EncodeToString(sum[:]))
	}
	return k, nil
}

// goToolVersion asks the go command on PATH which version it is.
func goToolVersion() (string, error) {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("mlbuild compile needs the Go toolchain (go) on PATH to build the model: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// planAll makes the three plans a CPU program needs.
func planAll(m *spec.Model, fusion bool, memoryLimit int64) ([]*planner.Plan, error) {
	return planBackend(m, fusion, true, memoryLimit, "", emit.CPU)
}

// planBackend makes the three plans of a program of backend b (training at
// the spec's batch, inference at the spec's batch and at batch 1), with the
// backend's planning rules; foldBN lets the inference plans fold their
// batch norms where the backend can. limitSource says where memoryLimit
// comes from, for the message of a plan above it.
func planBackend(m *spec.Model, fusion, foldBN bool, memoryLimit int64, limitSource string, b *emit.Backend) ([]*planner.Plan, error) {
	var plans []*planner.Plan
	for _, o := range []planner.Options{
		{Training: true, Fusion: fusion, MemoryLimit: memoryLimit, MemoryLimitSource: limitSource},
		{Training: false, Fusion: fusion, KeepBatchNorm: !foldBN, MemoryLimit: memoryLimit, MemoryLimitSource: limitSource},
		{Training: false, Fusion: fusion, KeepBatchNorm: !foldBN, Batch: 1, MemoryLimit: memoryLimit, MemoryLimitSource: limitSource},
	} {
		p, err := planner.Build(m, b.PlanOptions(o))
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

func compileRun(opts *compileOptions) error {
	start := time.Now()
	goos, goarch, ok := strings.Cut(opts.target, "/")
	if !ok || goos == "" || goarch == "" {
		return withCode(ExitUsage, fmt.Errorf("--target must be GOOS/GOARCH, e.g. linux/amd64 or darwin/arm64, got %s", spec.QuoteShort(opts.target)))
	}
	backend, err := emit.LookupBackend(opts.backend)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if err := backend.CheckTarget(goos, goarch); err != nil {
		return withCode(ExitUsage, err)
	}
	memLimit, err := resolveMemoryLimit(opts.memLimit)
	if err != nil {
		return err
	}
	limitSource := "this machine's memory"
	if strings.TrimSpace(opts.memLimit) != "" {
		limitSource = "--memory-limit"
	}
	memLimit, limitSource = targetMemoryLimit(memLimit, limitSource, goos, goarch)
	m, err := spec.Load(opts.files...)
	if err != nil {
		return reportSpecError(opts.stderr, err, opts.files...)
	}
	plans, err := planBackend(m, opts.fusion, !opts.keepBN, memLimit, limitSource, backend)
	if err != nil {
		return reportSpecError(opts.stderr, err)
	}
	var weights *emit.Weights
	if opts.weights != "" {
		if weights, err = readWeights(opts.weights, m, plans[0]); err != nil {
			return err
		}
	}
	goVersion, err := goToolVersion()
	if err != nil {
		return withCode(ExitBuild, err)
	}
	in := &emit.Input{Model: m, Train: plans[0], Infer: plans[1], Infer1: plans[2],
		Backend: backend.Name, Version: mlbuildVersion(), Weights: weights}
	files, err := emit.Program(in)
	var unsupported *gpu.UnsupportedError
	if errors.As(err, &unsupported) {
		return withCode(ExitInvalid, err) // a limit of the backend, not a bug
	}
	if err != nil {
		return withCode(ExitInternal, err)
	}
	key, err := buildKey(opts, files, goVersion)
	if err != nil {
		return err
	}
	if opts.emitDir != "" {
		if err := writeTree(opts.emitDir, files, opts.force); err != nil {
			return withCode(ExitIO, err)
		}
		fmt.Fprintf(opts.stderr, "generated source in %s\n", opts.emitDir)
	}

	dir := opts.cacheDir
	if dir == "" {
		if dir, err = cache.DefaultDir(); err != nil {
			return withCode(ExitIO, err)
		}
	}
	build := func(outPath string) error {
		return goBuild(files, goos, goarch, key.ID().Short(), outPath)
	}
	var res cache.Result
	c, err := cache.Open(dir)
	if err != nil {
		// A cache that cannot be made or written costs the caching only.
		fmt.Fprintf(opts.stderr, "%v; building without caching\n", err)
		res, err = cache.BuildUncached(build)
	} else {
		label := cache.Label{Model: m.Name, Backend: opts.backend, Target: opts.target, Version: mlbuildVersion(), GoVersion: goVersion, Source: m.File}
		res, err = c.GetOrBuild(key, label, opts.stderr, build)
	}
	defer res.Close()
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return withCode(ExitIO, err)
	}

	out := opts.out
	if out == "" {
		out = m.Name
		if goos == "windows" {
			out += ".exe"
		}
	}
	if err := installBinary(res.Path, out, opts.force); err != nil {
		return withCode(ExitIO, err)
	}
	how := "built"
	if res.Hit {
		how = "cache hit"
	}
	embedded := ""
	if weights != nil {
		embedded = ", weights " + weights.Source + " embedded"
	}
	fmt.Fprintf(opts.stdout, "%s: %s (%s, %s/%s%s, %s, %.2fs)\n", m.Name, out, opts.backend, goos, goarch, embedded, how, time.Since(start).Seconds())
	return nil
}

// memory32 is the most bytes mlbuild lets the buffers of a program for a
// 32-bit target take: such a program's ints end at 2^31 - 1 and its
// address space at 4 GiB (less in practice), which its code, heap and data
// set share.
const memory32 = math.MaxInt32

// targets32 are the GOARCHes whose programs address 32 bits (wasm's ints
// are 64-bit, but its memory is 32-bit).
var targets32 = map[string]bool{"386": true, "arm": true, "mips": true, "mipsle": true, "wasm": true}

// targetMemoryLimit caps the memory limit (0: none) at memory32 when the
// target is 32-bit, so that a plan too large for such a program fails at
// compile time naming its bytes, and returns where the limit now comes
// from.
func targetMemoryLimit(limit int64, source, goos, goarch string) (int64, string) {
	if !targets32[goarch] || (limit > 0 && limit <= memory32) {
		return limit, source
	}
	return memory32, fmt.Sprintf("the most mlbuild gives a program for %s/%s, a 32-bit target", goos, goarch)
}

// reportSpecError prints a spec or planner error and returns the exit
// (see specExitCode; files are the spec's).
func reportSpecError(w io.Writer, err error, files ...string) error {
	code := specExitCode(err, files...)
	var es spec.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			fmt.Fprintln(w, e.Error())
		}
		return silentExit(code)
	}
	var pe *spec.Error
	if errors.As(err, &pe) {
		fmt.Fprintln(w, pe.Error())
		return silentExit(code)
	}
	return withCode(code, err)
}

// goBuild writes files into a fresh module directory and builds it,
// setting the program's build key at link time (emit.BuildKeySymbol).
func goBuild(files []emit.File, goos, goarch, key, outPath string) error {
	tmp, err := os.MkdirTemp("", "mlbuild-build-")
	if err != nil {
		return withCode(ExitIO, err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		p := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return withCode(ExitIO, err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return withCode(ExitIO, err)
		}
	}
	abs, err := filepath.Abs(outPath)
	if err != nil {
		return withCode(ExitIO, err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid= -X "+emit.BuildKeySymbol+"="+key, "-o", abs, ".")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), emit.BuildEnv(files, goos, goarch)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return withCode(ExitBuild, fmt.Errorf("building the generated program for %s/%s failed (a bug in mlbuild; --emit DIR keeps the source):\n%s", goos, goarch, out))
	}
	return nil
}

// installBinary copies the cached binary to out atomically, creating
// out's folder when it is missing. An existing file is replaced only when
// mlbuild made it (see madeByMlbuild) or with --force.
func installBinary(cached, out string, force bool) error {
	if fi, err := os.Stat(out); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory; use -o to name the binary, e.g. -o %s", out, filepath.Join(out, filepath.Base(out)))
		}
		if !force && !madeByMlbuild(out) {
			return fmt.Errorf("%s exists and was not made by mlbuild; remove it, choose another -o, or pass --force", out)
		}
	}
	if dir := filepath.Dir(out); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = fmt.Errorf("%s: %v", pe.Path, pe.Err)
			}
			return fmt.Errorf("-o %s: cannot create the folder %s: %v", out, dir, err)
		}
	}
	data, err := os.ReadFile(cached)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(out, 0o755, data)
}

// madeByMlbuild reports whether path is a program that mlbuild produced:
// a Go executable (ELF, Mach-O, PE, ...) whose embedded build information,
// read where the Go linker puts it, names the generated program's module
// as its main package. Nothing else qualifies: not mlbuild itself, not a
// generated main.go, not a file that merely mentions the module's name.
func madeByMlbuild(path string) bool {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return false
	}
	return info.Path == emit.ModulePath && info.Main.Path == emit.ModulePath
}

// writeTree writes generated files under dir. A non-empty dir is replaced
// only when mlbuild wrote it (it holds .mlbuild-generated) or with force.
func writeTree(dir string, files []emit.File, force bool) error {
	marker := filepath.Join(dir, ".mlbuild-generated")
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(marker); err != nil && !force {
			return fmt.Errorf("--emit %s: the directory is not empty and was not written by mlbuild; choose an empty one or pass --force", dir)
		}
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := atomicfile.WriteBytes(p, 0o644, f.Data); err != nil {
			return err
		}
	}
	return atomicfile.WriteBytes(marker, 0o644, []byte("This directory was written by mlbuild compile --emit.\n"))
}

// parseSwitch reads an on/off flag value; true/false and 1/0 are accepted too.
func parseSwitch(flag, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "true", "1", "yes":
		return true, nil
	case "off", "false", "0", "no":
		return false, nil
	}
	return false, withCode(ExitUsage, fmt.Errorf("%s must be on or off, got %s", flag, spec.QuoteShort(v)))
}
