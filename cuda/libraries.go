package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Libraries is the three function tables of a process, filled from NVIDIA's
// libraries by LoadLibraries or by a fake (cuda/fakecuda). Several Engines
// (one per GPU) may share one Libraries.
type Libraries struct {
	Driver *DriverAPI
	NVRTC  *NVRTCAPI
	BLAS   *BLASAPI
	// NCCL is nil until LoadNCCL (or a fake) fills it: only a run on
	// several GPUs needs it.
	NCCL *NCCLAPI
	// DNN is nil until the first library convolution loads cuDNN
	// (LoadDNN, or DNNLoad where set): a program without one never needs
	// it.
	DNN *DNNAPI
	// DNNLoad, where set, loads DNN instead of the system search: a
	// fake's table and file, or its error.
	DNNLoad func() (*DNNAPI, LibraryFile, error)
	// Files lists the library files loaded, for `info`.
	Files []LibraryFile
}

// LibraryFile is one loaded library file.
type LibraryFile struct {
	// Library is "CUDA driver", "NVRTC", "cuBLAS", "NCCL" or "cuDNN".
	Library string
	// Path is what was opened: a soname for the system loader, else a path.
	Path string
	// File is the file the process mapped for it, when it can tell.
	File string
	// Version is the library's version, e.g. "13.0".
	Version string
}

// library describes where one of the three libraries is looked for.
type library struct {
	name string // for messages: "CUDA driver"
	env  string // the override variable
	// sonames in the order tried (newest first).
	sonames []string
	// toolkit is set for libraries of the CUDA toolkit (NVRTC, cuBLAS),
	// which CUDA_HOME, /usr/local/cuda and pip wheels hold; the driver comes
	// with the kernel module instead.
	toolkit bool
	// wheelDirs are the folders under site-packages that NVIDIA's pip wheels
	// put the library in.
	wheelDirs []string
	// fix says how to install the library.
	fix string
}

var (
	driverLibrary = library{
		name: "CUDA driver", env: "MLBUILD_CUDA_LIB", sonames: []string{"libcuda.so.1"},
		fix: "install the NVIDIA driver (it provides libcuda.so.1; on a container, run it with the GPU exposed, e.g. docker --gpus all)",
	}
	nvrtcLibrary = library{
		name: "NVRTC", env: "MLBUILD_NVRTC_LIB", sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"},
		toolkit: true, wheelDirs: []string{"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"},
		fix: "install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc` (CUDA 13; nvidia-cuda-nvrtc-cu12 for CUDA 12), or Debian's libnvrtc11.2 (non-free)",
	}
	blasLibrary = library{
		name: "cuBLAS", env: "MLBUILD_CUBLAS_LIB", sonames: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"},
		toolkit: true, wheelDirs: []string{"nvidia/cu13/lib", "nvidia/cublas/lib"},
		fix: "install the CUDA toolkit, or `pip install nvidia-cublas` (CUDA 13; nvidia-cublas-cu12 for CUDA 12)",
	}
)

// searchEnv is what the search reads from the machine; tests pass another.
type searchEnv struct {
	getenv func(string) string
	home   string
	arch   string // GOARCH, for the multiarch folder
}

func systemSearchEnv() searchEnv {
	home, _ := os.UserHomeDir()
	return searchEnv{getenv: os.Getenv, home: home, arch: runtime.GOARCH}
}

// candidates lists where lib is looked for, in order. This order is the
// documented one:
//
//  1. the override variable (MLBUILD_CUDA_LIB, MLBUILD_NVRTC_LIB,
//     MLBUILD_CUBLAS_LIB), a file path; when set, nothing else is tried;
//  2. the system loader, by soname, newest first (LD_LIBRARY_PATH, the
//     ld.so cache, the default folders);
//  3. for the driver: the multiarch, WSL and CUDA forward-compatibility
//     folders;
//     for NVRTC and cuBLAS: $CUDA_HOME and $CUDA_PATH, then /usr/local/cuda
//     and /usr/local/cuda-* (newest first), each in lib64, lib and
//     targets/*/lib;
//  4. for NVRTC and cuBLAS: the folders of NVIDIA's pip wheels
//     (site-packages/nvidia/cu13/lib, .../cublas/lib, .../cuda_nvrtc/lib)
//     under $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local, /usr and
//     /opt/conda.
//
// Entries with a '/' are paths, possibly glob patterns; the others are
// sonames for the system loader.
func (lib library) candidates(env searchEnv) []string {
	if p := env.getenv(lib.env); p != "" {
		return []string{p}
	}
	out := slices.Clone(lib.sonames)
	var dirs []string
	if !lib.toolkit {
		triple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[env.arch]
		if triple != "" {
			dirs = append(dirs, "/usr/lib/"+triple)
		}
		dirs = append(dirs, "/usr/lib64", "/usr/lib/wsl/lib", "/usr/local/cuda/compat")
	} else {
		var roots []string
		for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
			if r := env.getenv(v); r != "" && !slices.Contains(roots, r) {
				roots = append(roots, r)
			}
		}
		roots = append(roots, "/usr/local/cuda", "/usr/local/cuda-*")
		for _, r := range roots {
			dirs = append(dirs, r+"/lib64", r+"/lib", r+"/targets/*/lib")
		}
		var prefixes []string
		for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
			if p := env.getenv(v); p != "" {
				prefixes = append(prefixes, p)
			}
		}
		if env.home != "" {
			prefixes = append(prefixes, env.home+"/.local")
		}
		prefixes = append(prefixes, "/usr/local", "/usr", "/opt/conda")
		for _, p := range prefixes {
			for _, pk := range []string{"site-packages", "dist-packages"} {
				for _, w := range lib.wheelDirs {
					dirs = append(dirs, p+"/lib/python3*/"+pk+"/"+w)
				}
			}
		}
	}
	for _, d := range dirs {
		for _, so := range lib.sonames {
			out = append(out, d+"/"+so)
		}
	}
	return out
}

// attempt is one place tried and why it failed.
type attempt struct{ path, why string }

// MissingLibraryError is LoadLibraries' error when a library cannot be
// loaded: for each missing one, every place tried and how to fix it. It
// wraps ErrNoDevice.
type MissingLibraryError struct {
	Missing []MissingLibrary
}

// MissingLibrary is one library LoadLibraries could not load.
type MissingLibrary struct {
	Library, Env, Fix string
	// Tried lists each place tried, "PATH: why it failed".
	Tried []string
}

// Error lists, for each missing library, every place tried and the fix.
func (e *MissingLibraryError) Error() string {
	var b strings.Builder
	b.WriteString("cuda: cannot load NVIDIA's libraries:")
	for _, m := range e.Missing {
		fmt.Fprintf(&b, "\n  %s: not found; tried, in order:", m.Library)
		for _, t := range m.Tried {
			b.WriteString("\n    " + t)
		}
		fmt.Fprintf(&b, "\n  to fix: %s; or set %s to the library file's path", m.Fix, m.Env)
	}
	switch {
	case len(e.Missing) == 1 && e.Missing[0].Library == ncclLibrary.name:
		b.WriteString("\n  or train on one GPU (--gpus 1), which needs no NCCL")
	case len(e.Missing) == 1 && e.Missing[0].Library == dnnLibrary.name:
		b.WriteString("\n  cuDNN runs this program's convolutions; or compile the spec again with --backend cpu to run on the CPU")
	default:
		b.WriteString("\n  or compile the spec again with --backend cpu to run on the CPU")
	}
	return b.String()
}

// Unwrap makes the error an ErrNoDevice.
func (e *MissingLibraryError) Unwrap() error { return ErrNoDevice }

// Brief says the same in a few lines, for `info` and the commands that do
// not need the GPU: a summary line, then for each missing library the file
// looked for, how many places were tried and the first folders among them,
// and the variable that names its path.
func (e *MissingLibraryError) Brief() []string {
	names := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		names[i] = m.Library
	}
	lines := []string{"NVIDIA's libraries are missing: " + andList(names)}
	for _, m := range e.Missing {
		var file string
		var folders []string
		loader := false
		for _, t := range m.Tried {
			place, _, _ := strings.Cut(t, ": ")
			dir, base := filepath.Split(place)
			if file == "" {
				file = base
			}
			if dir == "" {
				loader = true
				continue
			}
			if d := filepath.Clean(dir); !slices.Contains(folders, d) {
				folders = append(folders, d)
			}
		}
		where := fmt.Sprintf("%d folders", len(folders))
		if len(folders) == 1 {
			where = "1 folder"
		}
		if loader {
			where = "the system loader's path and " + where
		}
		shown := folders[:min(len(folders), 3)]
		if len(shown) > 0 {
			more := ""
			if len(folders) > len(shown) {
				more = ", …"
			}
			where += " (" + strings.Join(shown, ", ") + more + ")"
		}
		lines = append(lines, fmt.Sprintf("%s: %s not found in %s; set %s to its path", m.Library, file, where, m.Env))
	}
	return lines
}

// andList joins names as "a", "a and b" or "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// open tries lib's candidates with dlopen (through openFile) and returns the
// handle and the path that worked, or the attempts.
func (lib library) open(env searchEnv, glob func(string) ([]string, error), openFile func(string) (uintptr, error)) (uintptr, string, []attempt) {
	var tried []attempt
	try := func(p string) (uintptr, bool) {
		h, err := openFile(p)
		if err != nil {
			tried = append(tried, attempt{p, err.Error()})
			return 0, false
		}
		return h, true
	}
	for _, c := range lib.candidates(env) {
		switch {
		case !strings.Contains(c, "/"):
			if h, ok := try(c); ok {
				return h, c, nil
			}
		case strings.ContainsAny(c, "*?["):
			matches, _ := glob(c)
			if len(matches) == 0 {
				tried = append(tried, attempt{c, "no match"})
				continue
			}
			// Newest first: cuda-13.0 before cuda-12.4, python3.12 before 3.11.
			slices.SortFunc(matches, func(a, b string) int { return -compareNatural(a, b) })
			for _, m := range matches {
				if h, ok := try(m); ok {
					return h, m, nil
				}
			}
		default:
			if h, ok := try(c); ok {
				return h, c, nil
			}
		}
	}
	return 0, "", tried
}

// compareNatural compares strings with digit runs as numbers, so that
// "cuda-12.10" sorts after "cuda-12.9".
func compareNatural(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := len(na) - len(nb); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// describeMissing turns the attempts at lib into a MissingLibrary.
func (lib library) describeMissing(tried []attempt) MissingLibrary {
	m := MissingLibrary{Library: lib.name, Env: lib.env, Fix: lib.fix}
	// Consecutive misses in one folder for the same reason share a line:
	// /usr/local/cuda/lib64/libnvrtc.so.{13,12,11.2}: no such file.
	for i := 0; i < len(tried); {
		dir, name := filepath.Split(tried[i].path)
		names := []string{name}
		j := i + 1
		for ; dir != "" && j < len(tried); j++ {
			d, n := filepath.Split(tried[j].path)
			if d != dir || tried[j].why != tried[i].why {
				break
			}
			names = append(names, n)
		}
		line := tried[i].path
		if len(names) > 1 {
			prefix := names[0]
			for _, n := range names[1:] {
				for !strings.HasPrefix(n, prefix) {
					prefix = prefix[:len(prefix)-1]
				}
			}
			prefix = prefix[:strings.LastIndexByte(prefix, '.')+1]
			for k := range names {
				names[k] = names[k][len(prefix):]
			}
			line = dir + prefix + "{" + strings.Join(names, ",") + "}"
		}
		m.Tried = append(m.Tried, line+": "+tried[i].why)
		i = j
	}
	return m
}

// fileExists is openFile's first check for paths, so that "no such file"
// reads plainly rather than as a loader message.
func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// mappedFile finds the file the process mapped for a library opened by
// soname, in /proc/self/maps: the first path whose name starts with stem
// ("libcublas.so"). It returns "" when it cannot tell.
func mappedFile(maps, stem string) string {
	for _, line := range strings.Split(maps, "\n") {
		i := strings.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		p := line[i:]
		if strings.HasPrefix(filepath.Base(p), stem) {
			return p
		}
	}
	return ""
}

// versionString prints a CUDA version number (major*1000 + minor*10).
func versionString(v int32) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
