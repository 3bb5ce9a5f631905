package cuda_test

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
)

// fakeGPU is one fake GPU driven directly through its tables, on a
// locked thread with its context current, so a test can make the calls
// the Communicator never makes (the fake's rules).
type fakeGPU struct {
	f      *fakecuda.Fake
	libs   *cuda.Libraries
	stream cuda.Stream
	buf    cuda.DevicePtr // 64 floats
}

func newFakeGPU(t *testing.T, w *fakecuda.NCCLWorld) *fakeGPU {
	t.Helper()
	g := &fakeGPU{f: fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})}
	g.libs = g.f.Libraries()
	g.libs.NCCL = g.f.NCCL(w)
	d := g.libs.Driver
	var ctx cuda.Context
	for _, r := range []cuda.Result{d.Init(0), d.DevicePrimaryCtxRetain(&ctx, 0), d.CtxSetCurrent(ctx),
		d.StreamCreate(&g.stream, 0), d.MemAlloc(&g.buf, 256)} {
		if r != cuda.Success {
			t.Fatalf("setting up the fake GPU: CUresult %d", r)
		}
	}
	return g
}

// onThread runs f on a locked OS thread with g's context current (the
// fake checks contexts per thread, as CUDA does).
func (g *fakeGPU) onThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var ctx cuda.Context
		g.libs.Driver.DevicePrimaryCtxRetain(&ctx, 0)
		g.libs.Driver.CtxSetCurrent(ctx)
		f()
		g.libs.Driver.DevicePrimaryCtxRelease(0)
	}()
	<-done
}

// TestFakeNCCLRules: each rule the fake's doc comment lists, broken once,
// with the status NCCL gives.
func TestFakeNCCLRules(t *testing.T) {
	w := fakecuda.NewNCCLWorld()
	defer w.Close()
	g := newFakeGPU(t, w)
	n := g.libs.NCCL
	want := func(what string, got, want cuda.NCCLResult) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}
	var id cuda.NCCLUniqueID
	want("ncclGetUniqueId", n.GetUniqueID(&id), cuda.NCCLSuccess)

	// No context on the calling thread.
	done := make(chan cuda.NCCLResult)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		g.libs.Driver.CtxSetCurrent(0)
		var c cuda.NCCLComm
		done <- n.CommInitRank(&c, 1, id, 0)
	}()
	want("ncclCommInitRank without a context", <-done, cuda.NCCLUnhandledCudaError)

	g.onThread(func() {
		var c cuda.NCCLComm
		want("an id ncclGetUniqueId did not make", n.CommInitRank(&c, 1, cuda.NCCLUniqueID{}, 0), cuda.NCCLInvalidArgument)
		want("rank out of range", n.CommInitRank(&c, 2, id, 2), cuda.NCCLInvalidArgument)
		want("a clique of one", n.CommInitRank(&c, 1, id, 0), cuda.NCCLSuccess)
		var c2 cuda.NCCLComm
		want("the clique's rank again", n.CommInitRank(&c2, 1, id, 0), cuda.NCCLInvalidUsage)

		p := g.buf
		want("bf16, which the fake does not sum", n.AllReduce(p, p, 64, cuda.NCCLBfloat16, cuda.NCCLSum, c, g.stream), cuda.NCCLInvalidArgument)
		want("past the allocation", n.AllReduce(p, p, 65, cuda.NCCLFloat32, cuda.NCCLSum, c, g.stream), cuda.NCCLInvalidArgument)
		want("an unknown stream", n.AllReduce(p, p, 64, cuda.NCCLFloat32, cuda.NCCLSum, c, g.stream+1), cuda.NCCLInvalidArgument)
		want("an unknown communicator", n.AllReduce(p, p, 64, cuda.NCCLFloat32, cuda.NCCLSum, c+1, g.stream), cuda.NCCLInvalidArgument)
		want("ncclGroupEnd without ncclGroupStart", n.GroupEnd(), cuda.NCCLInvalidUsage)

		d := g.libs.Driver
		want("cuStreamBeginCapture", cuda.NCCLResult(d.StreamBeginCapture(g.stream, cuda.CaptureModeRelaxed)), 0)
		want("a collective in a capture", n.AllReduce(p, p, 64, cuda.NCCLFloat32, cuda.NCCLSum, c, g.stream), cuda.NCCLInvalidUsage)
		var graph cuda.Graph
		d.StreamEndCapture(g.stream, &graph)
		if graph != 0 {
			d.GraphDestroy(graph)
		}

		// A clique of one sums at once; a group launches its calls at its end.
		want("ncclGroupStart", n.GroupStart(), cuda.NCCLSuccess)
		want("ncclAllReduce in a group", n.AllReduce(p, p, 64, cuda.NCCLFloat32, cuda.NCCLSum, c, g.stream), cuda.NCCLSuccess)
		want("ncclGroupEnd", n.GroupEnd(), cuda.NCCLSuccess)
		if r := d.StreamQuery(g.stream); r != cuda.Success {
			t.Errorf("cuStreamQuery after a clique of one summed: %d", r)
		}
		want("ncclCommDestroy", n.CommDestroy(c), cuda.NCCLSuccess)
		want("ncclCommDestroy again", n.CommDestroy(c), cuda.NCCLInvalidArgument)
	})
	if leaks := g.f.Leaks(); len(leaks) != 3 { // the stream, the buffer, the context
		t.Errorf("leaks %v, want the test's own stream, allocation and context only", leaks)
	}
}

// TestFakeNCCLTwoRanks: a pending collective keeps the stream busy until
// its peer comes; lengths that differ are an async error; destroying with
// work pending is refused, and abort releases the stream.
func TestFakeNCCLTwoRanks(t *testing.T) {
	w := fakecuda.NewNCCLWorld()
	defer w.Close()
	gs := []*fakeGPU{newFakeGPU(t, w), newFakeGPU(t, w)}
	var id cuda.NCCLUniqueID
	gs[0].libs.NCCL.GetUniqueID(&id)
	comms := make([]cuda.NCCLComm, 2)
	var wg sync.WaitGroup
	for r, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.onThread(func() {
				if res := g.libs.NCCL.CommInitRank(&comms[r], 2, id, int32(r)); res != 0 {
					t.Errorf("rank %d: ncclCommInitRank: %d", r, res)
				}
			})
		}()
	}
	wg.Wait()
	g0, g1 := gs[0], gs[1]
	// One round that finishes: its work is done on both streams (and an
	// abort later must not finish it again).
	for r, g := range gs {
		g.onThread(func() {
			if res := g.libs.NCCL.AllReduce(g.buf, g.buf, 64, cuda.NCCLFloat32, cuda.NCCLSum, comms[r], g.stream); res != 0 {
				t.Errorf("rank %d: the first round: %d", r, res)
			}
		})
	}
	for r, g := range gs {
		g.onThread(func() {
			if res := g.libs.Driver.StreamQuery(g.stream); res != cuda.Success {
				t.Errorf("rank %d: cuStreamQuery after a finished round: %d", r, res)
			}
		})
	}
	g0.onThread(func() {
		if r := g0.libs.NCCL.AllReduce(g0.buf, g0.buf, 64, cuda.NCCLFloat32, cuda.NCCLSum, comms[0], g0.stream); r != 0 {
			t.Fatalf("rank 0's all-reduce: %d", r)
		}
		if r := g0.libs.Driver.StreamQuery(g0.stream); r != cuda.ErrorNotReady {
			t.Errorf("cuStreamQuery with the peer missing: %d, want CUDA_ERROR_NOT_READY", r)
		}
		if r := g0.libs.NCCL.CommDestroy(comms[0]); r != cuda.NCCLInvalidUsage {
			t.Errorf("ncclCommDestroy with a collective pending: %d, want ncclInvalidUsage", r)
		}
	})
	g1.onThread(func() {
		// A different length in the same round: both ranks learn it.
		g1.libs.NCCL.AllReduce(g1.buf, g1.buf, 32, cuda.NCCLFloat32, cuda.NCCLSum, comms[1], g1.stream)
	})
	for r, g := range gs {
		var async cuda.NCCLResult
		g.libs.NCCL.CommGetAsyncError(comms[r], &async)
		if async != cuda.NCCLInvalidUsage {
			t.Errorf("rank %d: async error %d after lengths that differ, want ncclInvalidUsage", r, async)
		}
	}
	for r, g := range gs {
		if res := g.libs.NCCL.CommAbort(comms[r]); res != 0 {
			t.Errorf("rank %d: ncclCommAbort: %d", r, res)
		}
		g.onThread(func() {
			if res := g.libs.Driver.StreamQuery(g.stream); res != cuda.Success {
				t.Errorf("rank %d: cuStreamQuery after the abort: %d", r, res)
			}
		})
	}
	// Abort frees: nothing of NCCL is left.
	for r, g := range gs {
		if leaks := g.f.Leaks(); len(leaks) != 3 {
			t.Errorf("rank %d: leaks %v", r, leaks)
		}
	}
}

// TestFakeEvents: an event orders streams as on a GPU: a stream that
// waits for an event recorded while a collective was pending on another
// stream is busy until that collective finishes, and a stream that does
// not wait is not; an event on a capturing stream is refused (and
// invalidates the capture); an event not destroyed is a leak.
func TestFakeEvents(t *testing.T) {
	w := fakecuda.NewNCCLWorld()
	defer w.Close()
	gs := []*fakeGPU{newFakeGPU(t, w), newFakeGPU(t, w)}
	var id cuda.NCCLUniqueID
	gs[0].libs.NCCL.GetUniqueID(&id)
	comms := make([]cuda.NCCLComm, 2)
	var wg sync.WaitGroup
	for r, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.onThread(func() {
				if res := g.libs.NCCL.CommInitRank(&comms[r], 2, id, int32(r)); res != 0 {
					t.Errorf("rank %d: ncclCommInitRank: %d", r, res)
				}
			})
		}()
	}
	wg.Wait()
	g0, g1 := gs[0], gs[1]
	d := g0.libs.Driver
	var side, other cuda.Stream
	var ev cuda.Event
	g0.onThread(func() {
		for _, r := range []cuda.Result{d.StreamCreate(&side, 0), d.StreamCreate(&other, 0), d.EventCreate(&ev, cuda.EventDisableTiming)} {
			if r != cuda.Success {
				t.Fatalf("making streams and an event: %d", r)
			}
		}
		if r := g0.libs.NCCL.AllReduce(g0.buf, g0.buf, 64, cuda.NCCLFloat32, cuda.NCCLSum, comms[0], side); r != 0 {
			t.Fatalf("rank 0's all-reduce on its second stream: %d", r)
		}
		if r := d.EventRecord(ev, side); r != cuda.Success {
			t.Fatalf("cuEventRecord: %d", r)
		}
		if r := d.StreamWaitEvent(g0.stream, ev, 0); r != cuda.Success {
			t.Fatalf("cuStreamWaitEvent: %d", r)
		}
		if r := d.StreamQuery(g0.stream); r != cuda.ErrorNotReady {
			t.Errorf("the stream that waits for the event, with the sums pending: %d, want CUDA_ERROR_NOT_READY", r)
		}
		if r := d.StreamQuery(other); r != cuda.Success {
			t.Errorf("a stream that does not wait, with the sums pending on another: %d, want CUDA_SUCCESS", r)
		}
	})
	g1.onThread(func() {
		if r := g1.libs.NCCL.AllReduce(g1.buf, g1.buf, 64, cuda.NCCLFloat32, cuda.NCCLSum, comms[1], g1.stream); r != 0 {
			t.Errorf("rank 1's all-reduce: %d", r)
		}
	})
	g0.onThread(func() {
		if r := d.StreamQuery(g0.stream); r != cuda.Success {
			t.Errorf("the stream that waits for the event, once the sums finished: %d", r)
		}
		if r := d.StreamBeginCapture(other, cuda.CaptureModeRelaxed); r != cuda.Success {
			t.Fatalf("cuStreamBeginCapture: %d", r)
		}
		if r := d.EventRecord(ev, other); r != cuda.ErrorStreamCaptureUnsup {
			t.Errorf("cuEventRecord on a capturing stream: %d, want CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", r)
		}
		var graph cuda.Graph
		if r := d.StreamEndCapture(other, &graph); r != cuda.ErrorStreamCaptureInvalid {
			t.Errorf("cuStreamEndCapture after an event in the capture: %d, want CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", r)
		}
		if leaks := g0.f.Leaks(); !slices.ContainsFunc(leaks, func(s string) bool { return strings.HasPrefix(s, "event ") }) {
			t.Errorf("leaks %v: the event is not among them", leaks)
		}
		for _, r := range []cuda.Result{d.EventDestroy(ev), d.StreamDestroy(side), d.StreamDestroy(other)} {
			if r != cuda.Success {
				t.Errorf("destroying the event and streams: %d", r)
			}
		}
	})
	for r, g := range gs {
		if res := g.libs.NCCL.CommDestroy(comms[r]); res != 0 {
			t.Errorf("rank %d: ncclCommDestroy: %d", r, res)
		}
	}
	if leaks := g0.f.Leaks(); len(leaks) != 3 {
		t.Errorf("leaks %v, want the test's own stream, allocation and context only", leaks)
	}
}

// TestFakeEventElapsedTime holds the fake's cuEventElapsedTime and
// cuEventSynchronize to the driver's rules: a time between two reached
// timing events, the time the stream got there (here a collective that
// waits 20 ms for its peer), and CUDA_ERROR_INVALID_HANDLE for an event
// made with CU_EVENT_DISABLE_TIMING, one never recorded or one unknown,
// CUDA_ERROR_NOT_READY for one recorded but not reached,
// CUDA_ERROR_INVALID_VALUE for no result.
func TestFakeEventElapsedTime(t *testing.T) {
	w := fakecuda.NewNCCLWorld()
	defer w.Close()
	gs := []*fakeGPU{newFakeGPU(t, w), newFakeGPU(t, w)}
	var id cuda.NCCLUniqueID
	gs[0].libs.NCCL.GetUniqueID(&id)
	comms := make([]cuda.NCCLComm, 2)
	var wg sync.WaitGroup
	for r, g := range gs {
		wg.Go(func() {
			g.onThread(func() {
				if res := g.libs.NCCL.CommInitRank(&comms[r], 2, id, int32(r)); res != 0 {
					t.Errorf("rank %d: ncclCommInitRank: %d", r, res)
				}
			})
		})
	}
	wg.Wait()
	g := gs[0]
	d := g.libs.Driver
	want := func(what string, got, want cuda.Result) {
		t.Helper()
		if got != want {
			t.Errorf("%s: CUresult %d, want %d", what, got, want)
		}
	}
	var start, end, untimed, unrecorded cuda.Event
	var ms float32
	g.onThread(func() {
		for _, c := range []struct {
			ev    *cuda.Event
			flags uint32
		}{{&start, cuda.EventDefault}, {&end, cuda.EventDefault}, {&untimed, cuda.EventDisableTiming}, {&unrecorded, cuda.EventDefault}} {
			want("cuEventCreate", d.EventCreate(c.ev, c.flags), cuda.Success)
		}
		want("cuEventSynchronize of an event never recorded", d.EventSynchronize(unrecorded), cuda.Success)
		want("cuEventRecord", d.EventRecord(start, g.stream), cuda.Success)
		want("cuEventRecord", d.EventRecord(untimed, g.stream), cuda.Success)
		want("an event never recorded", d.EventElapsedTime(&ms, start, unrecorded), cuda.ErrorInvalidHandle)
		want("an event made with CU_EVENT_DISABLE_TIMING", d.EventElapsedTime(&ms, start, untimed), cuda.ErrorInvalidHandle)
		want("an unknown event", d.EventElapsedTime(&ms, start, end+1000), cuda.ErrorInvalidHandle)
		want("no result", d.EventElapsedTime(nil, start, start), cuda.ErrorInvalidValue)
		want("the same reached event twice", d.EventElapsedTime(&ms, start, start), cuda.Success)
		if ms != 0 {
			t.Errorf("the time from an event to itself: %g ms", ms)
		}
		// A collective waiting for its peer holds the stream: the event
		// after it is recorded but not reached.
		if r := g.libs.NCCL.AllReduce(g.buf, g.buf, 64, cuda.NCCLFloat32, cuda.NCCLSum, comms[0], g.stream); r != 0 {
			t.Fatalf("rank 0's all-reduce: %d", r)
		}
		want("cuEventRecord after the collective", d.EventRecord(end, g.stream), cuda.Success)
		want("an event recorded but not reached", d.EventElapsedTime(&ms, start, end), cuda.ErrorNotReady)
	})
	const wait = 20 * time.Millisecond
	time.Sleep(wait)
	gs[1].onThread(func() {
		if r := gs[1].libs.NCCL.AllReduce(gs[1].buf, gs[1].buf, 64, cuda.NCCLFloat32, cuda.NCCLSum, comms[1], gs[1].stream); r != 0 {
			t.Errorf("rank 1's all-reduce: %d", r)
		}
	})
	g.onThread(func() {
		want("cuEventSynchronize", d.EventSynchronize(end), cuda.Success)
		want("two reached events", d.EventElapsedTime(&ms, start, end), cuda.Success)
		if got := time.Duration(float64(ms) * 1e6); got < wait || got > 10*time.Second {
			t.Errorf("the time across a collective that waited %v for its peer: %v", wait, got)
		}
		for _, ev := range []cuda.Event{start, end, untimed, unrecorded} {
			want("cuEventDestroy", d.EventDestroy(ev), cuda.Success)
		}
		want("a destroyed event", d.EventElapsedTime(&ms, start, end), cuda.ErrorInvalidHandle)
		want("cuEventSynchronize of a destroyed event", d.EventSynchronize(start), cuda.ErrorInvalidHandle)
	})
	for r := range gs {
		if res := gs[r].libs.NCCL.CommDestroy(comms[r]); res != 0 {
			t.Errorf("rank %d: ncclCommDestroy: %d", r, res)
		}
	}
}
