package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The CUDA check: every case of the CPU kernel tests (kernelCases), printed
// in the CUDA dialect into one kernels.cu with a host driver that runs each
// kernel on a GPU (cudaMalloc, cudaMemcpy, <<<Groups, Threadgroup>>>,
// cudaDeviceSynchronize) and compares its buffers with the rt/cpu answers.
// scripts/cuda-check.sh writes it through TestCUDACheckExport and builds it
// with nvcc; TestCUDACheckOnCPU builds the very same file with g++ through
// the shims, so CI runs the driver without a GPU.

// cudaCheckDataDir is the folder under the export directory that holds the
// raw little-endian float32 inputs (<kernel>.<param>.in) and expected
// outputs (<kernel>.<param>.want).
const cudaCheckDataDir = "data"

// writeCUDACheck writes kernels.cu, shim/ and data/ for cases into dir and
// returns the kernel names in case order.
func writeCUDACheck(dir string, cases []gpuCase) ([]string, error) {
	data := filepath.Join(dir, cudaCheckDataDir)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "shim"), 0o755); err != nil {
		return nil, err
	}
	// Stale inputs of renamed cases would be harmless, but they confuse a
	// reader of the folder: drop the ones this function wrote before.
	for _, pat := range []string{"*.in", "*.want"} {
		old, _ := filepath.Glob(filepath.Join(data, pat))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return nil, err
			}
		}
	}
	var kernels []*Kernel
	var names []string
	for i, c := range cases {
		k := Rewrite(c.k, CUDA)
		k.Name = fmt.Sprintf("t%02d_%s", i, c.name)
		if len(c.in) != len(k.Params) {
			return nil, fmt.Errorf("case %s: %d inputs for %d params", k.Name, len(c.in), len(k.Params))
		}
		for j, v := range c.in {
			if len(v) < k.Params[j].Size {
				return nil, fmt.Errorf("case %s: param %s has %d elements, kernel touches %d", k.Name, k.Params[j].Name, len(v), k.Params[j].Size)
			}
			if err := writeFloatFile(filepath.Join(data, fmt.Sprintf("%s.%d.in", k.Name, j)), v); err != nil {
				return nil, err
			}
		}
		if len(c.want) == 0 {
			return nil, fmt.Errorf("case %s checks nothing", k.Name)
		}
		for j, v := range c.want {
			if j < 0 || j >= len(k.Params) || len(v) > len(c.in[j]) {
				return nil, fmt.Errorf("case %s: expectation for param %d does not fit the kernel", k.Name, j)
			}
			if err := writeFloatFile(filepath.Join(data, fmt.Sprintf("%s.%d.want", k.Name, j)), v); err != nil {
				return nil, err
			}
		}
		kernels = append(kernels, k)
		names = append(names, k.Name)
	}
	src, err := cudaCheckSource(cases, kernels)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.cu"), []byte(src), 0o644); err != nil {
		return nil, err
	}
	for _, h := range []string{"testdata/shim/cuda_shim.h", "../../cuda/fakecuda/fibers.h", "../../cuda/fakecuda/warp.h", "testdata/cuda/cuda_host_shim.h"} {
		b, err := os.ReadFile(h)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "shim", filepath.Base(h)), b, 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// writeFloatFile writes v as raw little-endian float32.
func writeFloatFile(path string, v []float32) error {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return os.WriteFile(path, b, 0o644)
}

// cudaCheckSource is kernels.cu: the kernels printed by the CUDA dialect,
// one launcher per case, the case table and the comparing main.
func cudaCheckSource(cases []gpuCase, kernels []*Kernel) (string, error) {
	var b strings.Builder
	b.WriteString(`// mlbuild CUDA check, written by emit/gpu (TestCUDACheckExport; see
// scripts/cuda-check.sh). Every kernel of emit/gpu's CPU kernel tests,
// printed by the CUDA dialect, and a driver that runs each on the GPU and
// compares its buffers with rt/cpu's answers in data/.
//   GPU: nvcc -O2 -arch=native -o cuda-check kernels.cu && ./cuda-check data
//   CPU: g++ -x c++ -std=c++20 -O1 -pthread -Ishim -o cuda-check-cpu kernels.cu && ./cuda-check-cpu data
#ifndef __CUDACC__
#include "cuda_host_shim.h"
#endif
`)
	src, err := Source(CUDA, kernels)
	if err != nil {
		return "", err
	}
	b.WriteString(src)
	b.WriteString(`
// ---- host driver ----
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

`)
	for _, k := range kernels {
		var args []string
		for i, p := range k.Params {
			cnst := "const "
			if p.Mutable {
				cnst = ""
			}
			args = append(args, fmt.Sprintf("(%s%s*)b[%d]", cnst, CUDA.Types[p.Elem], i))
		}
		call := fmt.Sprintf("%s(%s)", k.Name, strings.Join(args, ", "))
		fmt.Fprintf(&b, "static void mlb_launch_%s(void** b) {\n#ifdef __CUDACC__\n", k.Name)
		fmt.Fprintf(&b, "    %s<<<%d, %d>>>(%s);\n#else\n", k.Name, k.Groups, k.Threadgroup, strings.Join(args, ", "))
		fmt.Fprintf(&b, "    mlb_cpu_launch(%d, %d, %v, [&] { %s; });\n#endif\n}\n", k.Groups, k.Threadgroup, hasBarrier(k.Body), call)
	}
	b.WriteString("\nstruct mlb_check { int param; const char* name; };\n")
	b.WriteString("struct mlb_case { const char* name; int nbuf; int groups; int tg; double tol; const mlb_check* checks; int nchecks; void (*launch)(void**); };\n")
	for i, k := range kernels {
		var checks []string
		for j, p := range k.Params {
			if _, ok := cases[i].want[j]; ok {
				checks = append(checks, fmt.Sprintf("{%d, \"%s\"}", j, p.Name))
			}
		}
		fmt.Fprintf(&b, "static const mlb_check mlb_checks_%s[] = {%s};\n", k.Name, strings.Join(checks, ", "))
	}
	b.WriteString("static const mlb_case mlb_cases[] = {\n")
	for i, k := range kernels {
		fmt.Fprintf(&b, "    {\"%s\", %d, %d, %d, %g, mlb_checks_%s, %d, mlb_launch_%s},\n",
			k.Name, len(k.Params), k.Groups, k.Threadgroup, cases[i].tol, k.Name, len(cases[i].want), k.Name)
	}
	b.WriteString("};\n")
	b.WriteString(cudaCheckMain)
	return b.String(), nil
}

// cudaCheckMain runs every case and compares each checked buffer with its
// .want file by the kernel tests' measure, |got − want| / (1 + |want|), a
// NaN on one side only counting as infinite. It prints one line per case and
// last "N passed, M failed"; its exit status is 1 when any case failed.
// Run as `cuda-check DIR NAME`, it runs the case NAME alone.
const cudaCheckMain = `
static bool mlb_read(const std::string& path, std::vector<char>& v) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    v.assign(n > 0 ? n : 0, 0);
    bool ok = n >= 0 && (n == 0 || std::fread(v.data(), 1, n, f) == (size_t)n);
    std::fclose(f);
    return ok;
}

// mlb_run runs one case; on failure it fills why.
static bool mlb_run(const mlb_case& c, const std::string& dir, double& max_abs, double& max_rel, std::string& why) {
    char msg[512];
    std::vector<std::vector<char>> host(c.nbuf);
    std::vector<void*> dev(c.nbuf, nullptr);
    bool ok = true;
    for (int i = 0; i < c.nbuf && ok; i++) {
        std::string path = dir + "/" + c.name + "." + std::to_string(i) + ".in";
        if (!mlb_read(path, host[i])) {
            why = "cannot read " + path;
            ok = false;
            break;
        }
        cudaError_t e = cudaMalloc(&dev[i], host[i].size());
        if (e == cudaSuccess) e = cudaMemcpy(dev[i], host[i].data(), host[i].size(), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            std::snprintf(msg, sizeof msg, "buffer %d of %s: %s", i, c.name, cudaGetErrorString(e));
            why = msg;
            ok = false;
        }
    }
    if (ok) {
        c.launch(dev.data());
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            std::snprintf(msg, sizeof msg, "launching %s <<<%d, %d>>>: %s", c.name, c.groups, c.tg, cudaGetErrorString(e));
            why = msg;
            ok = false;
        } else if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
            std::snprintf(msg, sizeof msg, "running %s: %s", c.name, cudaGetErrorString(e));
            why = msg;
            ok = false;
        }
    }
    for (int k = 0; k < c.nchecks && ok; k++) {
        int p = c.checks[k].param;
        cudaError_t e = cudaMemcpy(host[p].data(), dev[p], host[p].size(), cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            std::snprintf(msg, sizeof msg, "reading back %s of %s: %s", c.checks[k].name, c.name, cudaGetErrorString(e));
            why = msg;
            ok = false;
            break;
        }
        std::vector<char> want;
        std::string path = dir + "/" + c.name + "." + std::to_string(p) + ".want";
        if (!mlb_read(path, want) || want.size() > host[p].size()) {
            why = "cannot read " + path + " or it is longer than the buffer";
            ok = false;
            break;
        }
        const float* g = (const float*)host[p].data();
        const float* w = (const float*)want.data();
        size_t n = want.size() / sizeof(float);
        double worst = 0;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            double diff = std::fabs((double)g[i] - (double)w[i]);
            if (std::isnan(g[i]) != std::isnan(w[i])) diff = INFINITY;
            else if (std::isnan(g[i])) diff = 0;
            double rel = diff / (1 + std::fabs((double)w[i]));
            if (diff > max_abs) max_abs = diff;
            if (rel > max_rel) max_rel = rel;
            if (rel > worst) { worst = rel; at = i; }
        }
        if (worst > c.tol) {
            std::snprintf(msg, sizeof msg, "param %s: element %zu is %.9g, want %.9g (relative error %.3g > tol %.3g)",
                c.checks[k].name, at, g[at], w[at], worst, c.tol);
            why = msg;
            ok = false;
        }
    }
    for (void* d : dev)
        if (d) cudaFree(d);
    return ok;
}

int main(int argc, char** argv) {
    std::string dir = argc > 1 ? argv[1] : "data";
#ifdef __CUDACC__
    int dev = 0, rt = 0, drv = 0;
    cudaDeviceProp prop;
    cudaGetDevice(&dev);
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
        std::printf("device %d: %s, compute capability %d.%d, %d multiprocessors; CUDA runtime %d, driver %d\n",
            dev, prop.name, prop.major, prop.minor, prop.multiProcessorCount, rt, drv);
    else
        std::printf("device %d: properties unavailable; CUDA runtime %d, driver %d\n", dev, rt, drv);
#else
    std::printf("device: CPU through the CUDA shim (g++)\n");
#endif
    int passed = 0, failed = 0;
    for (const mlb_case& c : mlb_cases) {
        if (argc > 2 && std::string(c.name) != argv[2]) continue;
        double max_abs = 0, max_rel = 0;
        std::string why;
        if (mlb_run(c, dir, max_abs, max_rel, why)) {
            passed++;
            std::printf("PASS %-28s <<<%4d, %4d>>>  max abs %.3g  max rel %.3g  tol %.3g\n",
                c.name, c.groups, c.tg, max_abs, max_rel, c.tol);
        } else {
            failed++;
            std::printf("FAIL %-28s <<<%4d, %4d>>>  %s\n", c.name, c.groups, c.tg, why.c_str());
        }
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
`

// cudaCheckDir is where TestCUDACheckExport writes: $MLBUILD_CUDA_OUT, or a
// temporary folder when it is unset (then the test checks the layout only).
func cudaCheckDir(t *testing.T) string {
	if d := os.Getenv("MLBUILD_CUDA_OUT"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return t.TempDir()
}

// TestCUDACheckExport writes the CUDA check folder (into $MLBUILD_CUDA_OUT
// for scripts/cuda-check.sh) and checks that every case has its kernel, its
// launch, its inputs and its expectations there.
func TestCUDACheckExport(t *testing.T) {
	dir := cudaCheckDir(t)
	cases := kernelCases(t)
	names, err := writeCUDACheck(dir, cases)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "kernels.cu"))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		for _, want := range []string{
			"extern \"C\" __global__ void " + name + "(",
			fmt.Sprintf("%s<<<%d, %d>>>(", name, cases[i].k.Groups, cases[i].k.Threadgroup),
			"{\"" + name + "\", ",
		} {
			if !bytes.Contains(src, []byte(want)) {
				t.Errorf("kernels.cu lacks %q", want)
			}
		}
		for j := range cases[i].in {
			if _, err := os.Stat(filepath.Join(dir, cudaCheckDataDir, fmt.Sprintf("%s.%d.in", name, j))); err != nil {
				t.Error(err)
			}
		}
		for j, w := range cases[i].want {
			fi, err := os.Stat(filepath.Join(dir, cudaCheckDataDir, fmt.Sprintf("%s.%d.want", name, j)))
			if err != nil {
				t.Error(err)
			} else if fi.Size() != int64(4*len(w)) {
				t.Errorf("%s.%d.want has %d bytes, want %d", name, j, fi.Size(), 4*len(w))
			}
		}
	}
	t.Logf("wrote %d CUDA check cases to %s", len(names), dir)
}

var cudaCheckSummary = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed\n\z`)

// TestCUDACheckOnCPU builds the CUDA check driver with g++ through the CUDA
// shims, exactly as written for nvcc, runs it and requires every case to
// pass; then it spoils one expectation and requires the driver, run on
// that case alone (running them all again doubled the test's cost), to
// report it and to exit non-zero. It is also the CUDA dialect's run of
// TestKernelsOnCPU's cases.
func TestCUDACheckOnCPU(t *testing.T) {
	gpp := gxx(t)
	dir := t.TempDir()
	cases := kernelCases(t)
	names, err := writeCUDACheck(dir, cases)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "cuda-check-cpu")
	cmd := exec.Command(gpp, "-x", "c++", "-std=c++20", "-O1", "-fno-strict-aliasing", "-pthread", "-Wno-attributes",
		"-I", filepath.Join(dir, "shim"), "-o", exe, filepath.Join(dir, "kernels.cu"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("g++ on kernels.cu failed: %v\n%s", err, out)
	}
	data := filepath.Join(dir, cudaCheckDataDir)
	out, err := exec.Command(exe, data).CombinedOutput()
	if err != nil {
		t.Fatalf("cuda-check-cpu failed: %v\n%s", err, out)
	}
	m := cudaCheckSummary.FindSubmatch(out)
	if m == nil || string(m[1]) != fmt.Sprint(len(cases)) || string(m[2]) != "0" {
		t.Fatalf("cuda-check-cpu: want last line %q\n%s", fmt.Sprintf("%d passed, 0 failed", len(cases)), out)
	}
	for _, name := range names {
		if !regexp.MustCompile(`(?m)^PASS ` + name + ` `).Match(out) {
			t.Errorf("no PASS line for %s", name)
		}
	}

	// Spoil the first expectation of one case: the driver must catch it.
	victim := len(cases) / 2
	var param int
	for j := range cases[victim].want {
		param = j
		break
	}
	path := filepath.Join(data, fmt.Sprintf("%s.%d.want", names[victim], param))
	w := append([]float32(nil), cases[victim].want[param]...)
	w[0] += 1
	if err := writeFloatFile(path, w); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(exe, data, names[victim]).CombinedOutput()
	if err == nil {
		t.Fatalf("cuda-check-cpu exited 0 with a spoilt expectation for %s\n%s", names[victim], out)
	}
	if !regexp.MustCompile(`(?m)^FAIL ` + names[victim] + ` .*element 0 is`).Match(out) {
		t.Errorf("no FAIL line naming element 0 of %s\n%s", names[victim], out)
	}
	if m := cudaCheckSummary.FindSubmatch(out); m == nil || string(m[1]) != "0" || string(m[2]) != "1" {
		t.Errorf("want last line %q\n%s", "0 passed, 1 failed", out)
	}
}
