// Command sgemm measures single-precision GEMM throughput of mlbuild's
// rt/cpu.Sgemm against OpenBLAS (a small C driver) and PyTorch CPU, on square
// sizes, on one thread and on all cores, in one run on one machine.
//
// Each implementation runs in its own worker process that reads "n iters"
// lines on stdin and answers with the seconds the iters products took
// (after one untimed warm-up product). The driver alternates the workers
// sample by sample, so that drift of a shared machine hits all of them alike,
// and prints medians and ratios. bench/sgemm.sh builds the workers and runs
// it; `go run ./bench/sgemm -worker mlbuild -threads 1` is the Go worker.
// With -base, the mlbuild worker of the driver built from another commit
// runs as one more column, so that a change to rt/cpu is measured side by
// side with what it replaces (bench/sgemm.sh's SGEMM_BASE).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

func main() {
	var (
		worker    = flag.String("worker", "", "run as the worker for this implementation (mlbuild) instead of the driver")
		threads   = flag.Int("threads", 1, "worker: threads to use")
		path      = flag.String("path", "", "worker: force an rt/cpu GEMM path (avx512, avx2, generic)")
		sizes     = flag.String("sizes", "64,128,256,512,1024,2048,4096", "driver: square sizes")
		threadSet = flag.String("thread-counts", fmt.Sprintf("1,%d", runtime.NumCPU()), "driver: thread counts to compare")
		reps      = flag.Int("reps", 7, "driver: samples per size and implementation (medians are reported)")
		bigReps   = flag.Int("big-reps", 3, "driver: samples for sizes of 2048 and up")
		sampleSec = flag.Float64("sample", 0.2, "driver: target seconds per sample")
		openblas  = flag.String("openblas", "", "driver: OpenBLAS worker command (space-separated); empty skips it")
		torch     = flag.String("torch", "", "driver: PyTorch worker command (space-separated); empty skips it")
		base      = flag.String("base", "", "driver: this driver built from another commit; its mlbuild worker runs as a column \"base\" (empty skips it)")
	)
	flag.Parse()
	if *worker != "" {
		if err := runMlbuildWorker(*threads, *path); err != nil {
			fmt.Fprintln(os.Stderr, "sgemm worker:", err)
			os.Exit(1)
		}
		return
	}
	cfg := driverConfig{reps: *reps, bigReps: *bigReps, sample: *sampleSec, openblas: *openblas, torch: *torch, base: *base}
	var err error
	if cfg.sizes, err = parseInts(*sizes); err == nil {
		cfg.threads, err = parseInts(*threadSet)
	}
	if err == nil {
		err = runDriver(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sgemm:", err)
		os.Exit(1)
	}
}

// runMlbuildWorker serves timing requests with cpu.Sgemm.
func runMlbuildWorker(threads int, path string) error {
	cpu.SetThreads(threads)
	if err := cpu.SetGemmPath(path); err != nil {
		return err
	}
	fmt.Printf("mlbuild rt/cpu.Sgemm path=%s threads=%d GOMAXPROCS=%d\n", cpu.GemmPath(), cpu.Threads(), runtime.GOMAXPROCS(0))
	type operands struct{ a, b, c []float32 }
	cache := map[int]operands{}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var n, iters int
		if _, err := fmt.Sscan(in.Text(), &n, &iters); err != nil {
			return fmt.Errorf("request %q: %v", in.Text(), err)
		}
		ops, ok := cache[n]
		if !ok {
			clear(cache) // keep one size in memory at a time
			r := rand.New(rand.NewSource(int64(n)))
			ops = operands{randomMatrix(r, n), randomMatrix(r, n), make([]float32, n*n)}
			cache[n] = ops
		}
		cpu.Sgemm(false, false, n, n, n, 1, ops.a, n, ops.b, n, 0, ops.c, n)
		start := time.Now()
		for range iters {
			cpu.Sgemm(false, false, n, n, n, 1, ops.a, n, ops.b, n, 0, ops.c, n)
		}
		fmt.Println(time.Since(start).Seconds())
	}
	return in.Err()
}

func randomMatrix(r *rand.Rand, n int) []float32 {
	x := make([]float32, n*n)
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	return x
}

type driverConfig struct {
	sizes, threads  []int
	reps, bigReps   int
	sample          float64
	openblas, torch string
	base            string // driver binary of another commit, for its mlbuild worker
}

// worker is one running implementation at one thread count.
type worker struct {
	name string
	cmd  *exec.Cmd
	in   *bufio.Writer
	out  *bufio.Scanner
}

func startWorker(name, command string, threads int) (*worker, error) {
	args := strings.Fields(command)
	cmd := exec.Command(args[0], args[1:]...)
	t := strconv.Itoa(threads)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+t, "OPENBLAS_NUM_THREADS="+t, "MKL_NUM_THREADS="+t, "SGEMM_THREADS="+t)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s worker %q: %v", name, command, err)
	}
	w := &worker{name: name, cmd: cmd, in: bufio.NewWriter(stdin), out: bufio.NewScanner(stdout)}
	if !w.out.Scan() {
		return nil, fmt.Errorf("%s worker %q exited before its banner", name, command)
	}
	fmt.Printf("  %-8s t=%d: %s\n", name, threads, w.out.Text())
	return w, nil
}

func (w *worker) time(n, iters int) (float64, error) {
	fmt.Fprintf(w.in, "%d %d\n", n, iters)
	if err := w.in.Flush(); err != nil {
		return 0, fmt.Errorf("%s worker: %v", w.name, err)
	}
	if !w.out.Scan() {
		return 0, fmt.Errorf("%s worker died on n=%d", w.name, n)
	}
	return strconv.ParseFloat(strings.TrimSpace(w.out.Text()), 64)
}

func (w *worker) stop() {
	w.in.Flush()
	w.cmd.Process.Kill()
	w.cmd.Wait()
}

func runDriver(cfg driverConfig) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("sgemm C = A·B, row-major, no transposes, float32; GFLOP/s = 2n³/time, median of samples\n")
	fmt.Printf("machine: %s, %s, %d CPUs, %s/%s, rt/cpu GEMM paths %v\n", host, cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpu.GemmPaths())
	// Other processes skew every column, OpenMP pools most: say how busy
	// the machine was.
	fmt.Printf("load average at start: %s\n", loadAverage())
	defer func() { fmt.Printf("\nload average at end: %s\n", loadAverage()) }()
	for _, t := range cfg.threads {
		commands := [][2]string{{"mlbuild", self + " -worker mlbuild -threads " + strconv.Itoa(t)}}
		if cfg.openblas != "" {
			commands = append(commands, [2]string{"openblas", cfg.openblas})
		}
		if cfg.torch != "" {
			commands = append(commands, [2]string{"torch", cfg.torch})
		}
		if cfg.base != "" {
			commands = append(commands, [2]string{"base", cfg.base + " -worker mlbuild -threads " + strconv.Itoa(t)})
		}
		fmt.Printf("\nthreads = %d\n", t)
		var workers []*worker
		for _, c := range commands {
			w, err := startWorker(c[0], c[1], t)
			if err != nil {
				return err
			}
			defer w.stop()
			workers = append(workers, w)
		}
		fmt.Printf("%6s", "n")
		for _, w := range workers {
			fmt.Printf(" %10s", w.name)
		}
		for _, w := range workers[1:] {
			fmt.Printf(" %14s", "mlbuild/"+w.name)
		}
		fmt.Println()
		for _, n := range cfg.sizes {
			flops := 2 * float64(n) * float64(n) * float64(n)
			// Size iterations for an assumed 80 GFLOP/s per thread.
			iters := max(1, int(cfg.sample*80e9*float64(t)/flops))
			reps := cfg.reps
			if n >= 2048 {
				reps = cfg.bigReps
			}
			samples := make([][]float64, len(workers))
			for range reps {
				for i, w := range workers {
					sec, err := w.time(n, iters)
					if err != nil {
						return err
					}
					samples[i] = append(samples[i], flops*float64(iters)/sec/1e9)
				}
			}
			fmt.Printf("%6d", n)
			medians := make([]float64, len(workers))
			for i := range workers {
				medians[i] = median(samples[i])
				fmt.Printf(" %10.1f", medians[i])
			}
			for i := range workers[1:] {
				fmt.Printf(" %14.2f", medians[0]/medians[i+1])
			}
			fmt.Println()
		}
	}
	return nil
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimLeft(name, "\t :"))
		}
	}
	return "unknown CPU"
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q: want a comma-separated list of positive integers", s)
		}
		out = append(out, v)
	}
	return out, nil
}
