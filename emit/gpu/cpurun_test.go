package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gpuCase is one kernel run on the CPU: the initial contents of each of its
// parameters (uint parameters as float32 bit patterns) and the expected
// final contents of those that want checks.
type gpuCase struct {
	name string
	k    *Kernel
	in   [][]float32
	want map[int][]float32
	tol  float64
	// tols, where set, is the tolerance of a param, in place of tol.
	tols map[int]float64
}

// hasBarrier reports whether a kernel body synchronises its threadgroup
// (a barrier, or a fragment's collective, which the shims run as one).
func hasBarrier(ss []Stmt) bool {
	if usesFrags(ss) {
		return true
	}
	for _, s := range ss {
		switch s := s.(type) {
		case Barrier:
			return true
		case If:
			if hasBarrier(s.Then) || hasBarrier(s.Else) {
				return true
			}
		case For:
			if hasBarrier(s.Body) {
				return true
			}
		}
	}
	return false
}

// driverSource is the C++ main that runs every case's kernel over its whole
// grid: threadgroups one after another; when the kernel has barriers, the
// lanes as fibers (cuda/fakecuda/fibers.h) that switch at each barrier;
// otherwise the lanes in turn on one thread. Run as `driver DIR`, it runs every
// case once, reading dir/<kernel>.<i>.in and writing dir/<kernel>.<i>.out
// for every parameter; run as `driver -serve`, it runs the launches sent on
// its stdin (see mlb_serve and kernelServer), so that a test can interleave
// kernels with GEMMs computed in Go.
func driverSource(d *Dialect, kernels []*Kernel) string {
	var b strings.Builder
	b.WriteString("\n// ---- test driver ----\n#include <cstdio>\n#include <string>\n#include <vector>\n")
	b.WriteString("typedef void (*mlb_fn)(void**, uint, uint, uint, uint);\n")
	b.WriteString("struct mlb_case { const char* name; int nbuf; int groups; int tg; bool barriers; mlb_fn fn; };\n")
	for _, k := range kernels {
		var args []string
		for i, p := range k.Params {
			cnst := "const "
			if p.Mutable {
				cnst = ""
			}
			args = append(args, fmt.Sprintf("(%s%s*)b[%d]", cnst, d.Types[p.Elem], i))
		}
		fmt.Fprintf(&b, "static void mlb_call_%s(void** b, uint gid, uint lid, uint tgid, uint tgs) {\n", k.Name)
		if len(d.BuiltinParams) > 0 {
			args = append(args, "gid", "lid", "tgid", "tgs")
		} else {
			b.WriteString("    (void)gid; (void)tgs; threadIdx.x = lid; blockIdx.x = tgid;\n")
		}
		fmt.Fprintf(&b, "    %s(%s);\n}\n", k.Name, strings.Join(args, ", "))
	}
	b.WriteString("static mlb_case mlb_cases[] = {\n")
	for _, k := range kernels {
		fmt.Fprintf(&b, "    {\"%s\", %d, %d, %d, %v, mlb_call_%s},\n", k.Name, len(k.Params), k.Groups, k.Threadgroup, hasBarrier(k.Body), k.Name)
	}
	b.WriteString("};\n")
	setBlockDim := ""
	if len(d.BuiltinParams) == 0 {
		setBlockDim = "blockDim.x = c.tg;"
	}
	b.WriteString(`
static std::vector<char> mlb_read(const std::string& path) {
    std::vector<char> v;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) { std::fprintf(stderr, "cannot open %s\n", path.c_str()); std::exit(2); }
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    v.resize(n > 0 ? n : 4);
    if (n > 0 && std::fread(v.data(), 1, n, f) != (size_t)n) { std::fprintf(stderr, "short read %s\n", path.c_str()); std::exit(2); }
    std::fclose(f);
    v.resize(n);
    return v;
}

// mlb_run runs case c over its whole grid on the buffers ptrs.
static void mlb_run(mlb_case& c, void** ptrs) {
    ` + setBlockDim + `
    if (c.barriers) {
        for (int g = 0; g < c.groups; g++)
            mlb_fiber_run(c.tg, [&c, ptrs, g](int l) { c.fn(ptrs, g * c.tg + l, l, g, c.tg); });
    } else {
        for (int g = 0; g < c.groups; g++)
            for (int l = 0; l < c.tg; l++) c.fn(ptrs, g * c.tg + l, l, g, c.tg);
    }
}

static void mlb_io(bool ok) {
    if (!ok) { std::fprintf(stderr, "driver: short read or write on the serve pipe\n"); std::exit(2); }
}

// mlb_serve runs launches sent on stdin: an int32 case index (-1 ends),
// then per parameter a uint32 element count and the elements; it answers
// with every parameter's final elements.
static int mlb_serve() {
    for (;;) {
        int idx;
        mlb_io(std::fread(&idx, 4, 1, stdin) == 1);
        if (idx < 0) return 0;
        if (idx >= (int)(sizeof mlb_cases / sizeof mlb_cases[0])) { std::fprintf(stderr, "driver: no case %d\n", idx); return 2; }
        mlb_case& c = mlb_cases[idx];
        std::vector<std::vector<float>> data(c.nbuf);
        std::vector<void*> ptrs(c.nbuf);
        for (int i = 0; i < c.nbuf; i++) {
            unsigned n;
            mlb_io(std::fread(&n, 4, 1, stdin) == 1);
            data[i].resize(n > 0 ? n : 1);
            mlb_io(n == 0 || std::fread(data[i].data(), 4, n, stdin) == n);
            data[i].resize(n);
            ptrs[i] = data[i].data();
        }
        mlb_run(c, ptrs.data());
        for (int i = 0; i < c.nbuf; i++)
            mlb_io(data[i].empty() || std::fwrite(data[i].data(), 4, data[i].size(), stdout) == data[i].size());
        std::fflush(stdout);
    }
}

int main(int argc, char** argv) {
    if (argc == 2 && std::string(argv[1]) == "-serve") return mlb_serve();
    if (argc != 2) { std::fprintf(stderr, "usage: driver DIR | driver -serve\n"); return 2; }
    std::string dir = argv[1];
    for (mlb_case& c : mlb_cases) {
        std::vector<std::vector<char>> data(c.nbuf);
        std::vector<void*> ptrs(c.nbuf);
        for (int i = 0; i < c.nbuf; i++) {
            data[i] = mlb_read(dir + "/" + c.name + "." + std::to_string(i) + ".in");
            ptrs[i] = data[i].data();
        }
        mlb_run(c, ptrs.data());
        for (int i = 0; i < c.nbuf; i++) {
            std::string path = dir + "/" + c.name + "." + std::to_string(i) + ".out";
            FILE* f = std::fopen(path.c_str(), "wb");
            if (!f || std::fwrite(data[i].data(), 1, data[i].size(), f) != data[i].size()) { std::fprintf(stderr, "cannot write %s\n", path.c_str()); return 2; }
            std::fclose(f);
        }
    }
    return 0;
}
`)
	return b.String()
}

// gxx returns the path of g++ or fails the test: the kernel checks are part
// of the evidence for the Metal backend and must not be skipped silently.
func gxx(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("g++")
	if err != nil {
		t.Fatalf("g++ not found (%v): the generated GPU kernels are checked by compiling them as C++; run `make deps` to install it", err)
	}
	return p
}

// runCases prints every case's kernel in dialect d, compiles them with the
// driver in one g++ run, runs them, and returns each case's final buffers.
func runCases(t *testing.T, d *Dialect, cases []gpuCase) [][][]float32 {
	t.Helper()
	gpp := gxx(t)
	dir := t.TempDir()
	var kernels []*Kernel
	for i, c := range cases {
		k := Rewrite(c.k, d)
		k.Name = fmt.Sprintf("t%02d_%s", i, c.name)
		kernels = append(kernels, k)
		if len(c.in) != len(k.Params) {
			t.Fatalf("case %s: %d inputs for %d params", c.name, len(c.in), len(k.Params))
		}
		for j, data := range c.in {
			if 4*len(data) < k.Params[j].Bytes() {
				t.Fatalf("case %s: param %s has %d elements, kernel touches %d", c.name, k.Params[j].Name, len(data), k.Params[j].Size)
			}
			writeFloats(t, filepath.Join(dir, fmt.Sprintf("%s.%d.in", k.Name, j)), data)
		}
	}
	src, err := Source(d, kernels)
	if err != nil {
		t.Fatal(err)
	}
	if d == CUDA {
		src = "#include \"cuda_shim.h\"\n" + src
	}
	src += driverSource(d, kernels)
	cpp := filepath.Join(dir, "kernels_"+d.Name+".cpp")
	if err := os.WriteFile(cpp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	shim, err := filepath.Abs("testdata/shim")
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "driver")
	cmd := exec.Command(gpp, append(append([]string{"-std=c++20", "-O1", "-fno-strict-aliasing", "-pthread", "-Wno-attributes"}, shimIncludes(shim)...), "-o", exe, cpp)...)
	if outp, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("g++ on the %s kernels failed: %v\n%s\n(source kept in %s)", d.Name, err, outp, cpp)
	}
	if outp, err := exec.Command(exe, dir).CombinedOutput(); err != nil {
		t.Fatalf("running the %s kernels failed: %v\n%s", d.Name, err, outp)
	}
	res := make([][][]float32, len(cases))
	for i, k := range kernels {
		for j := range k.Params {
			res[i] = append(res[i], readFloats(t, filepath.Join(dir, fmt.Sprintf("%s.%d.out", k.Name, j))))
		}
	}
	return res
}

func writeFloats(t *testing.T, path string, v []float32) {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFloats(t *testing.T, path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// checkCases compares each case's results with its expectations and
// reports the largest error of each.
func checkCases(t *testing.T, d *Dialect, cases []gpuCase, res [][][]float32) {
	t.Helper()
	for i, c := range cases {
		if len(c.want) == 0 {
			t.Errorf("%s/%s: case checks nothing", d.Name, c.name)
		}
		for j, want := range c.want {
			got := res[i][j]
			tol := c.tol
			if pt, ok := c.tols[j]; ok {
				tol = pt
			}
			worst, at := 0.0, -1
			for e := range want {
				diff := math.Abs(float64(got[e]) - float64(want[e]))
				if math.IsNaN(float64(got[e])) != math.IsNaN(float64(want[e])) {
					diff = math.Inf(1)
				}
				rel := diff / (1 + math.Abs(float64(want[e])))
				if math.IsInf(float64(got[e]), 0) || math.IsInf(float64(want[e]), 0) {
					// an infinity (a masked row's log-sum-exp) only equals itself
					rel = 0
					if got[e] != want[e] {
						rel = math.Inf(1)
					}
				}
				if rel > worst || (at < 0 && rel > tol) {
					worst, at = rel, e
				}
			}
			if worst > tol {
				t.Errorf("%s/%s: param %s: element %d is %g, want %g (relative error %.3g > %.3g)",
					d.Name, c.name, cases[i].k.Params[j].Name, at, got[at], want[at], worst, tol)
			}
		}
	}
}
