package fakecuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The fake compiles kernels for real: the CUDA C++ source, after shim.h,
// with one launcher per kernel (mlb_launch_NAME(args, groups, threads),
// args as cuLaunchKernel's kernelParams), built by g++ into a shared
// library that the fake loads with dlopen. Libraries are kept in the work
// folder under the hash of their C++ text, so a source is built once per
// machine however many fakes load it.

//go:embed shim.h
var shimHeader string

// shimIncludes are the headers shim.h includes, written beside it.
var shimIncludes = map[string]string{"fibers.h": fibersHeader, "warp.h": warpHeader}

//go:embed fibers.h
var fibersHeader string

//go:embed warp.h
var warpHeader string

// kernelDecl matches a kernel's declaration as the CUDA dialect prints it;
// the parameters hold no parentheses.
var kernelDecl = regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)`)

// kernelSig is one kernel of a source: its name, its parameters' C types
// and whether it synchronises its block.
type kernelSig struct {
	name     string
	params   []string
	barriers bool
}

// parseKernels finds the kernels of a CUDA dialect source.
func parseKernels(src string) ([]kernelSig, error) {
	locs := kernelDecl.FindAllStringSubmatchIndex(src, -1)
	var out []kernelSig
	for i, loc := range locs {
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		// the fragments' collective calls (mlb_warp_*) wait for the
		// block's lanes as a barrier does
		body := src[loc[1]:end]
		k := kernelSig{name: src[loc[2]:loc[3]], barriers: strings.Contains(body, "__syncthreads") || strings.Contains(body, "mlb_warp_")}
		for _, p := range strings.Split(src[loc[4]:loc[5]], ",") {
			p = strings.TrimSpace(strings.ReplaceAll(p, "__restrict__", ""))
			if p == "" {
				continue
			}
			j := strings.LastIndexAny(p, " *")
			if j < 0 || !strings.Contains(p[:j+1], "*") {
				return nil, fmt.Errorf("kernel %s: parameter %q is not a pointer (the fake passes only buffers)", k.name, p)
			}
			k.params = append(k.params, strings.TrimSpace(p[:j+1]))
		}
		out = append(out, k)
	}
	return out, nil
}

// launcherSource is the C++ file g++ builds for a source: the shim, the
// source, and one extern "C" launcher per kernel.
func launcherSource(src string, kernels []kernelSig) string {
	var b strings.Builder
	b.WriteString("#include \"shim.h\"\n")
	b.WriteString(src)
	b.WriteString("\n// ---- fakecuda launchers ----\n")
	for _, k := range kernels {
		fmt.Fprintf(&b, "extern \"C\" void mlb_launch_%s(void** a, unsigned groups, unsigned threads) {\n", k.name)
		var args []string
		for i, t := range k.params {
			args = append(args, fmt.Sprintf("(%s)(uintptr_t)(*(unsigned long long*)a[%d])", t, i))
		}
		fmt.Fprintf(&b, "    mlb_run(groups, threads, %v, [&] { %s(%s); });\n}\n", k.barriers, k.name, strings.Join(args, ", "))
	}
	return b.String()
}

// errCompile is wrapped by build's error when g++ rejects the source; its
// text is g++'s output.
var errCompile = errors.New("compilation failed")

// build compiles src into a shared library in dir (reusing one built
// before) and returns its path.
func build(dir, src string, kernels []kernelSig) (string, error) {
	cpp := launcherSource(src, kernels)
	sum := sha256.Sum256([]byte(shimHeader + "\x00" + fibersHeader + "\x00" + warpHeader + "\x00" + cpp))
	h := hex.EncodeToString(sum[:12])
	so := filepath.Join(dir, "k-"+h+".so")
	if _, err := os.Stat(so); err == nil {
		return so, nil
	}
	gpp, err := exec.LookPath("g++")
	if err != nil {
		return "", fmt.Errorf("fakecuda: g++ not found (%v): the fake compiles CUDA kernels as C++; install the g++ package (apt-get install g++, or `make deps`)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if err := os.WriteFile(filepath.Join(work, "shim.h"), []byte(shimHeader), 0o644); err != nil {
		return "", err
	}
	for name, text := range shimIncludes {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	srcPath := filepath.Join(work, "kernels.cpp")
	if err := os.WriteFile(srcPath, []byte(cpp), 0o644); err != nil {
		return "", err
	}
	tmp := filepath.Join(work, "k.so")
	cmd := exec.Command(gpp, "-std=c++20", "-O1", "-fno-strict-aliasing", "-shared", "-fPIC", "-pthread", "-w", "-I", work, "-o", tmp, srcPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: g++: %v\n%s", errCompile, err, out)
	}
	if err := os.Rename(tmp, so); err != nil {
		return "", err
	}
	return so, nil
}

// loaded is a built library opened with dlopen: each kernel's launcher.
type loaded struct {
	launchers map[string]uintptr
	sigs      map[string]kernelSig
}

func load(so string, kernels []kernelSig) (*loaded, error) {
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("fakecuda: dlopen %s: %w", so, err)
	}
	l := &loaded{launchers: map[string]uintptr{}, sigs: map[string]kernelSig{}}
	for _, k := range kernels {
		sym, err := purego.Dlsym(h, "mlb_launch_"+k.name)
		if err != nil {
			return nil, fmt.Errorf("fakecuda: %s lacks the launcher of %s: %w", so, k.name, err)
		}
		l.launchers[k.name] = sym
		l.sigs[k.name] = k
	}
	return l, nil
}

// runMu makes the kernels of every fake of a process run one at a time:
// shim.h keeps blockDim, gridDim, the block's barrier and __shared__
// arrays in process-wide variables of the library, which fakes running
// the same source share (dlopen loads it once), so two fake GPUs running
// kernels at once (the ranks of a data-parallel run, each on its own
// engine thread) would corrupt each other's launches or hang on each
// other's barrier.
var runMu sync.Mutex

// run calls a kernel's launcher with the device pointers args.
func run(launcher uintptr, args []uint64, groups, threads uint32) {
	runMu.Lock()
	defer runMu.Unlock()
	vals := append([]uint64(nil), args...)
	ptrs := make([]uintptr, len(vals)+1)
	for i := range vals {
		ptrs[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	purego.SyscallN(launcher, uintptr(unsafe.Pointer(&ptrs[0])), uintptr(groups), uintptr(threads))
	runtime.KeepAlive(vals)
	runtime.KeepAlive(ptrs)
}
