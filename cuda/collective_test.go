package cuda_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
	"github.com/mlbuild/mlbuild/rt/rendezvous"
)

// fakeRanks opens n fake GPUs in one NCCL world, each a Device on its own
// engine; the world is closed and every fake checked for leaks when the
// test ends.
func fakeRanks(t *testing.T, n int) ([]*cuda.Device, *fakecuda.NCCLWorld) {
	t.Helper()
	w := fakecuda.NewNCCLWorld()
	devs := make([]*cuda.Device, n)
	for i := range devs {
		f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir, Name: "fake GPU " + strconv.Itoa(i)})
		libs := f.Libraries()
		libs.NCCL = f.NCCL(w)
		d, err := cuda.OpenDevice(cuda.Options{Libraries: libs, KernelCacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = d
		t.Cleanup(func() {
			if leaks := f.Leaks(); len(leaks) > 0 && !t.Failed() {
				t.Errorf("fake GPU %d still holds: %v", i, leaks)
			}
		})
	}
	t.Cleanup(w.Close)
	return devs, w
}

// TestCollectiveConformanceOnFake runs the collective suite on the fake
// NCCL: three simulated GPUs of one process, as `--gpus 3` opens them.
func TestCollectiveConformanceOnFake(t *testing.T) {
	gpuhosttest.RunCollective(t, gpuhosttest.CollectiveSuite{
		Language: gpuhosttest.CUDA,
		Ranks:    3,
		Timeout:  time.Second,
		Open: func(t *testing.T, n int) gpuhosttest.Ranks {
			devs, w := fakeRanks(t, n)
			id, err := cuda.NewNCCLID(devs[0].Engine().Libraries())
			if err != nil {
				t.Fatal(err)
			}
			comms, err := cuda.OpenCommunicators(devs, id, 0, n, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			r := gpuhosttest.Ranks{Hang: w.Hang, Kill: w.Kill}
			for i := range devs {
				r.Devices = append(r.Devices, devs[i])
				r.Collectives = append(r.Collectives, comms[i])
			}
			return r
		},
	})
}

// TestCommunicatorStartTimesOut: a rank that never comes makes the start
// fail within its timeout, naming the ranks left waiting.
func TestCommunicatorStartTimesOut(t *testing.T) {
	devs, w := fakeRanks(t, 2)
	id, err := cuda.NewNCCLID(devs[0].Engine().Libraries())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = cuda.OpenCommunicators(devs, id, 0, 3, 300*time.Millisecond) // rank 2 never comes
	if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms: ranks 0, 1 of this process still wait") {
		t.Fatalf("OpenCommunicators = %v, want the timeout naming ranks 0 and 1", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the timeout of 300ms came after %v", d)
	}
	w.Close() // releases the engine threads left in ncclCommInitRank
	for _, d := range devs {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestCommunicatorErrors: NCCL's refusals reach the caller as errors that
// name the call and NCCL's message.
func TestCommunicatorErrors(t *testing.T) {
	devs, _ := fakeRanks(t, 1)
	defer devs[0].Close()
	_, err := cuda.OpenCommunicators(devs, cuda.NCCLUniqueID{}, 0, 1, time.Second)
	var ce *cuda.Error
	if !errors.As(err, &ce) || ce.Call != "ncclCommInitRank" || ce.Name != "ncclInvalidArgument" || !strings.Contains(err.Error(), "rank 0 of 1 on GPU 0") {
		t.Errorf("an id ncclGetUniqueId did not make: %v", err)
	}
	if _, err := cuda.OpenCommunicators(devs, cuda.NCCLUniqueID{}, 1, 1, time.Second); err == nil || !strings.Contains(err.Error(), "1 GPUs as ranks 1 to 1 of 1") {
		t.Errorf("ranks out of range: %v", err)
	}
	if _, err := cuda.NewNCCLID(&cuda.Libraries{}); err == nil || !strings.Contains(err.Error(), "NCCL is not loaded") {
		t.Errorf("NewNCCLID without NCCL: %v", err)
	}
}

// TestTwoProcessesThroughTheRendezvous joins two "processes" (goroutines,
// one with two GPUs and one with one) through the rendezvous, which hands
// out member 0's NCCL id, and sums across all three ranks: the seams of a
// multi-node run, end to end, on fakes.
func TestTwoProcessesThroughTheRendezvous(t *testing.T) {
	devs, _ := fakeRanks(t, 3)
	comms, _ := twoProcesses(t, devs)
	errs := make([]error, 2)
	all := append(comms[0], comms[1]...)
	bufs := make([]gpuhost.Buffer, 3)
	for r, d := range devs {
		if all[r].Rank() != r || all[r].Size() != 3 {
			t.Fatalf("communicator %d is rank %d of %d", r, all[r].Rank(), all[r].Size())
		}
		b, err := d.Alloc("grads", 16)
		if err != nil {
			t.Fatal(err)
		}
		bufs[r] = b
		if err := d.Upload(b, 0, floatBytes(float32(r+1), 10, 100, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	var round sync.WaitGroup
	for r := range 3 {
		round.Add(1)
		go func() {
			defer round.Done()
			if err := all[r].AllReduce([]gpuhost.Arg{{Buf: bufs[r], Bytes: 16}}); err != nil {
				errs[r%2] = err
				return
			}
			if err := all[r].Wait(30 * time.Second); err != nil {
				errs[r%2] = err
			}
		}()
	}
	round.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r, d := range devs {
		got := make([]byte, 16)
		if err := d.Download(got, bufs[r], 0); err != nil {
			t.Fatal(err)
		}
		if want := floatBytes(6, 30, 300, 3000); string(got) != string(want) {
			t.Errorf("rank %d: %v, want the floats 6, 30, 300, 3000", r, got)
		}
		if err := all[r].Close(); err != nil {
			t.Error(err)
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
}

func floatBytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestRealCollective runs the collective suite on this machine's GPUs
// with the real NCCL when MLBUILD_CUDA_REAL is 1, and then fails (never
// skips) without NCCL or two GPUs. The fault cases skip there (real GPUs
// cannot be told to hang), which the output shows.
func TestRealCollective(t *testing.T) {
	realOn(t)
	libs, err := cuda.LoadLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if err := libs.LoadNCCL(); err != nil {
		t.Fatalf("MLBUILD_CUDA_REAL=1 but NCCL cannot be loaded: %v", err)
	}
	ranks := 2
	if v := os.Getenv("MLBUILD_CUDA_REAL_GPUS"); v != "" {
		ranks, _ = strconv.Atoi(v)
	}
	// One GPU cannot run a collective of two: say so rather than fail
	// (an H200 alone ran every other Real test); on two GPUs it runs.
	if n, err := cuda.DeviceCount(libs); err != nil || n < ranks {
		t.Skipf("the collective suite needs %d GPUs and this machine has %d (%v): run it where there are two (the device tool's nvidia-h200-x2)", ranks, n, err)
	}
	gpuhosttest.RunCollective(t, gpuhosttest.CollectiveSuite{
		Language: gpuhosttest.CUDA,
		Ranks:    ranks,
		Open: func(t *testing.T, n int) gpuhosttest.Ranks {
			devs := make([]*cuda.Device, n)
			for i := range devs {
				d, err := cuda.OpenDevice(cuda.Options{Ordinal: i, Libraries: libs, KernelCacheDir: t.TempDir()})
				if err != nil {
					t.Fatalf("GPU %d: %v (the suite needs %d GPUs)", i, err, n)
				}
				devs[i] = d
			}
			id, err := cuda.NewNCCLID(libs)
			if err != nil {
				t.Fatal(err)
			}
			comms, err := cuda.OpenCommunicators(devs, id, 0, n, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var r gpuhosttest.Ranks
			for i := range devs {
				r.Devices = append(r.Devices, devs[i])
				r.Collectives = append(r.Collectives, comms[i])
			}
			return r
		},
	})
}

// TestCommunicatorStartFailsFast: when one GPU of the process cannot
// join (here: its NCCL is another world's, which never made the id), the
// start says why at once instead of at the timeout, while its sibling is
// left waiting for it.
func TestCommunicatorStartFailsFast(t *testing.T) {
	devs, w := fakeRanks(t, 1)
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	libs := f.Libraries()
	libs.NCCL = f.NCCL(fakecuda.NewNCCLWorld())
	other, err := cuda.OpenDevice(cuda.Options{Libraries: libs, KernelCacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id, err := cuda.NewNCCLID(devs[0].Engine().Libraries())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = cuda.OpenCommunicators([]*cuda.Device{devs[0], other}, id, 0, 2, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "ncclInvalidArgument") || !strings.Contains(err.Error(), "ranks 0 of this process are left waiting") {
		t.Fatalf("OpenCommunicators = %v, want rank 1's ncclInvalidArgument and rank 0 named as waiting", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the failure came after %v; it must not wait for the timeout of a minute", d)
	}
	w.Close()
	for _, d := range []*cuda.Device{devs[0], other} {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestOpenDevices: --gpus all opens every GPU the driver sees, --gpus N
// the first N, a torchrun process the GPU of its LOCAL_RANK (the first
// GPU given), and more than there are is an error with both numbers.
func TestOpenDevices(t *testing.T) {
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir, Devices: 3})
	opts := cuda.Options{Libraries: f.Libraries(), KernelCacheDir: t.TempDir()}
	for _, c := range []struct{ first, ask, want int }{{0, 0, 3}, {0, 2, 2}, {2, 1, 1}, {1, 0, 2}} {
		o := opts
		o.Ordinal = c.first // LOCAL_RANK under torchrun
		devs, err := cuda.OpenDevices(o, c.ask)
		if err != nil {
			t.Fatal(err)
		}
		if len(devs) != c.want {
			t.Errorf("OpenDevices(%d) from GPU %d opened %d, want %d", c.ask, c.first, len(devs), c.want)
		}
		for i, d := range devs {
			if !strings.Contains(d.Facts()[0].Value, "(GPU "+strconv.Itoa(c.first+i)+")") {
				t.Errorf("device %d: %v", i, d.Facts()[0])
			}
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := cuda.OpenDevices(opts, 4); err == nil || !strings.Contains(err.Error(), "4 GPUs asked for (--gpus 4), but the driver sees 3") {
		t.Errorf("OpenDevices(4) on 3 GPUs: %v", err)
	}
	o := opts
	o.Ordinal = 3
	if _, err := cuda.OpenDevices(o, 1); err == nil || !strings.Contains(err.Error(), "GPU 3 asked for (LOCAL_RANK=3), but the driver sees 3") {
		t.Errorf("OpenDevices from GPU 3 of 3: %v", err)
	}
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("after Close: %v", leaks)
	}
	none := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir, Devices: -1})
	if _, err := cuda.OpenDevices(cuda.Options{Libraries: none.Libraries()}, 0); !errors.Is(err, cuda.ErrNoDevice) {
		t.Errorf("OpenDevices without a GPU: %v, want ErrNoDevice", err)
	}
}

// TestCommunicatorAfterDeviceClose: a call that reaches a closed engine
// (a goroutine of OpenCommunicators that starts late, a Close racing a
// Wait) is an error, never a panic.
func TestCommunicatorAfterDeviceClose(t *testing.T) {
	w := fakecuda.NewNCCLWorld()
	defer w.Close()
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	libs := f.Libraries()
	libs.NCCL = f.NCCL(w)
	d, err := cuda.OpenDevice(cuda.Options{Libraries: libs, KernelCacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := cuda.NewNCCLID(libs)
	comms, err := cuda.OpenCommunicators([]*cuda.Device{d}, id, 0, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := comms[0].Close(); err == nil || !strings.Contains(err.Error(), "the device is closed") {
		t.Errorf("Close of a communicator whose device is closed: %v", err)
	}
	if _, err := cuda.OpenCommunicators([]*cuda.Device{d}, id, 0, 1, time.Second); err == nil || !strings.Contains(err.Error(), "the device is closed") {
		t.Errorf("OpenCommunicators on a closed device: %v", err)
	}
}

// TestWaitReportsGPUFault: a fault of the GPU's own work before the sums
// (here a graph launch that faults) is Wait's error, naming the rank and
// CUDA's status, and aborts the communicator.
func TestWaitReportsGPUFault(t *testing.T) {
	w := fakecuda.NewNCCLWorld()
	defer w.Close()
	var fakes []*fakecuda.Fake
	var devs []*cuda.Device
	for range 2 {
		f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
		libs := f.Libraries()
		libs.NCCL = f.NCCL(w)
		d, err := cuda.OpenDevice(cuda.Options{Libraries: libs, KernelCacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		fakes, devs = append(fakes, f), append(devs, d)
	}
	id, _ := cuda.NewNCCLID(devs[0].Engine().Libraries())
	comms, err := cuda.OpenCommunicators(devs, id, 0, 2, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bufs := make([]gpuhost.Buffer, 2)
	seqs := make([]gpuhost.Sequence, 2)
	for r, d := range devs {
		b, err := d.Alloc("grads", 4*4*4)
		if err != nil {
			t.Fatal(err)
		}
		bufs[r] = b
		// C = A·B on 4×4 blocks of one buffer: a step's work before the sums.
		seqs[r], err = d.Record("backward", func(e gpuhost.Encoder) error {
			return e.Gemm(gpuhost.Gemm{M: 2, N: 2, K: 2, Alpha: 1, A: gpuhost.Operand{Buf: b}, B: gpuhost.Operand{Buf: b, Offset: 16}, C: gpuhost.Operand{Buf: b, Offset: 32}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fakes[0].FailNextGraphLaunch(cuda.ErrorIllegalAddress)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := seqs[r].Launch(); err != nil {
				errs[r] = err
				return
			}
			if err := comms[r].AllReduce([]gpuhost.Arg{{Buf: bufs[r], Bytes: 64}}); err != nil {
				errs[r] = err
				return
			}
			errs[r] = comms[r].Wait(3 * time.Second)
		}()
	}
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 0 of 2") || !strings.Contains(errs[0].Error(), "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("rank 0: Wait = %v, want the GPU's fault naming the rank", errs[0])
	}
	// Rank 0's GPU ran no sum after its fault, so rank 1 cannot finish
	// either: it fails too (by rank 0's abort, or at its timeout).
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "rank 1 of 2") {
		t.Errorf("rank 1, whose peer's GPU faulted: %v, want an error naming it", errs[1])
	}
	if err := comms[0].AllReduce([]gpuhost.Arg{{Buf: bufs[0], Bytes: 64}}); !errors.Is(err, gpuhost.ErrAborted) {
		t.Errorf("rank 0 after the fault: %v, want ErrAborted", err)
	}
	for _, c := range comms {
		c.Close()
	}
}

// twoProcesses joins two "processes" (goroutines) through the rendezvous:
// node0 drives devs[0] and devs[1], node1 devs[2]. Member 0 makes the
// NCCL id and the rendezvous hands it out; each then starts its
// communicators. The groups stay open until the test ends.
func twoProcesses(t *testing.T, devs []*cuda.Device) ([][]*cuda.Communicator, [2]*rendezvous.Group) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	token := "a-test-token-of-some-length"
	procs := []struct {
		member int
		devs   []*cuda.Device
	}{{0, devs[:2]}, {1, devs[2:]}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	comms := make([][]*cuda.Communicator, 2)
	var groups [2]*rendezvous.Group
	for p, proc := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := rendezvous.Config{Members: 2, Member: proc.member, Addr: ln.Addr().String(), Token: token, Timeout: 30 * time.Second}
			self := rendezvous.Member{Host: "node" + strconv.Itoa(p), GPUs: len(proc.devs)}
			var g *rendezvous.Group
			var err error
			if proc.member == 0 {
				id, err := cuda.NewNCCLID(proc.devs[0].Engine().Libraries())
				if err != nil {
					errs[p] = err
					return
				}
				if g, err = rendezvous.Serve(context.Background(), ln, cfg, self, id.Internal[:]); err != nil {
					errs[p] = err
					return
				}
			} else if g, err = rendezvous.Dial(context.Background(), cfg, self); err != nil {
				errs[p] = err
				return
			}
			groups[p] = g
			var id cuda.NCCLUniqueID
			if len(g.Payload) != len(id.Internal) {
				errs[p] = errors.New("the payload is not an NCCL id")
				return
			}
			copy(id.Internal[:], g.Payload)
			comms[p], errs[p] = cuda.OpenCommunicators(proc.devs, id, g.Self().FirstRank, g.Ranks(), 30*time.Second)
		}()
	}
	wg.Wait()
	for _, g := range groups {
		if g != nil {
			t.Cleanup(func() { g.Close() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return comms, groups
}

// TestDeadNodeAbortsTheOthers: node1 dies (its process, and so its
// connection and its GPU, are gone) while node0's two GPUs wait on a sum
// that cannot finish, and NCCL says nothing (as over NVLink: the peers
// just wait); the control channel names node1, node0 aborts its
// collectives with that failure, and its waits end long before their own
// timeout (an hour here), each error naming the dead node.
func TestDeadNodeAbortsTheOthers(t *testing.T) {
	devs, w := fakeRanks(t, 3)
	comms, groups := twoProcesses(t, devs)
	failures := groups[0].Watch(rendezvous.WatchOptions{Interval: 50 * time.Millisecond, Silence: 2 * time.Second})
	go func() {
		if err, ok := <-failures; ok {
			for _, c := range comms[0] {
				c.Abort(err)
			}
		}
	}()
	w.Hang(2)         // node1's GPU runs nothing more, and NCCL reports nothing
	groups[1].Close() // and its connection ends without a done
	start := time.Now()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms[0] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := devs[r].Alloc("grads", 64)
			if err != nil {
				errs[r] = err
				return
			}
			if err := c.AllReduce([]gpuhost.Arg{{Buf: b, Bytes: 64}}); err != nil {
				errs[r] = err
				return
			}
			errs[r] = c.Wait(time.Hour)
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("node0's waits ended after %v", d)
	}
	// Only the control channel could end these waits. Its abort reaches
	// each rank, or (as the ranks are aborted one after the other) a rank
	// learns first from NCCL that its sibling aborted; the first aborted
	// carries node1's failure.
	named := 0
	for r, err := range errs {
		var me *rendezvous.MemberError
		switch {
		case errors.Is(err, gpuhost.ErrAborted) && errors.As(err, &me) && me.Member == 1 &&
			strings.Contains(err.Error(), "node 1 (node1, rank 2) failed: its connection closed"):
			named++
		case err != nil && strings.Contains(err.Error(), "another rank failed"):
		default:
			t.Errorf("rank %d: %v, want the abort naming node 1 (node1, rank 2)", r, err)
		}
	}
	if named == 0 {
		t.Errorf("no rank's error names node 1: %v", errs)
	}
	// The dead process's resources go with it; here the test frees them.
	comms[1][0].Abort(errors.New("the process died"))
	for _, c := range append(comms[0], comms[1]...) {
		c.Close()
	}
	for _, d := range devs {
		d.Close()
	}
}
