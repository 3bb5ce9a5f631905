package gpuhosttest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// CollectiveSuite is a gpuhost.Collective under test: NCCL on real GPUs,
// or a fake NCCL over several simulated GPUs in one process.
type CollectiveSuite struct {
	// Language is the devices' kernel language (the ordering case
	// launches the suite's kernels around the sums).
	Language Language
	// Ranks is how many ranks the cases use, 2 or more.
	Ranks int
	// Open makes n ranks, each a device with its collective; each case
	// opens its own, and the suite closes the collectives and then the
	// devices.
	Open func(t *testing.T, n int) Ranks
	// Timeout is what the fault cases give Wait; a failure must come
	// within it (and a little slack).
	Timeout time.Duration
}

// Ranks are the ranks of one process under test: Devices[i] with
// Collectives[i] of rank i.
type Ranks struct {
	Devices     []gpuhost.Device
	Collectives []gpuhost.Collective
	// Hang makes rank r's later collectives never start (a stuck
	// process); Kill makes rank r a crashed process. A fake can; real
	// GPUs in one process cannot, and leave them nil: the fault cases are
	// then skipped, which the test output reports (never a pass).
	Hang, Kill func(rank int)
}

// RunCollective runs every case of the collective suite as a subtest.
func RunCollective(t *testing.T, s CollectiveSuite) {
	if s.Open == nil || s.Ranks < 2 || s.Language == "" {
		t.Fatal("gpuhosttest: CollectiveSuite needs Open, Language and 2 or more Ranks")
	}
	if s.Timeout == 0 {
		s.Timeout = 2 * time.Second
	}
	for _, c := range []struct {
		name string
		run  func(t *testing.T, s CollectiveSuite)
	}{
		{"Sums", testSums},
		{"Repeated", testRepeated},
		{"Ordering", testOrdering},
		{"Overlap", testOverlap},
		{"SpansRefused", testSpansRefused},
		{"RankHangs", testRankHangs},
		{"RankDies", testRankDies},
		{"AbortFromElsewhere", testAbortFromElsewhere},
		{"CloseWithSumsPending", testCloseWithSumsPending},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

// openRanks opens n ranks and closes them when the test ends:
// collectives first, then devices.
func openRanks(t *testing.T, s CollectiveSuite, n int) Ranks {
	t.Helper()
	r := s.Open(t, n)
	if len(r.Devices) != n || len(r.Collectives) != n {
		t.Fatalf("Open(%d) made %d devices and %d collectives", n, len(r.Devices), len(r.Collectives))
	}
	t.Cleanup(func() {
		for i, c := range r.Collectives {
			if err := c.Close(); err != nil {
				t.Errorf("rank %d: Close: %v", i, err)
			}
		}
		for i, d := range r.Devices {
			if err := d.Close(); err != nil {
				t.Errorf("rank %d: device Close: %v", i, err)
			}
		}
	})
	for i, c := range r.Collectives {
		if c.Rank() != i || c.Size() != n {
			t.Fatalf("collective %d: Rank %d, Size %d; want %d of %d", i, c.Rank(), c.Size(), i, n)
		}
	}
	return r
}

// eachRank runs f for every rank at once (a collective needs every rank)
// and returns their errors, each naming its rank.
func eachRank(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(r); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		}()
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// rankValues are rank r's values in round k: small multiples of 1/4, so
// that every sum is exact in float32 whatever the order of the adds.
func rankValues(r, k, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((r+1)*(i%97+k)) * 0.25
	}
	return v
}

func testSums(t *testing.T, s CollectiveSuite) {
	n := s.Ranks
	rk := openRanks(t, s, n)
	const floatsA, floatsB = 3000, 100
	bufs := make([][2]gpuhost.Buffer, n)
	for r, d := range rk.Devices {
		bufs[r] = [2]gpuhost.Buffer{alloc(t, d, "grads", 4*floatsA), alloc(t, d, "more grads", 4*floatsB)}
		upload(t, d, bufs[r][0], 0, rankValues(r, 0, floatsA))
		upload(t, d, bufs[r][1], 0, rankValues(r, 5, floatsB))
	}
	// Buckets: floats 0–1000 and 1000–2500 of the first buffer (2500–3000
	// stay this rank's own), and the whole second buffer.
	noErrors(t, eachRank(n, func(r int) error {
		spans := []gpuhost.Arg{{Buf: bufs[r][0], Offset: 0, Bytes: 4000}, {Buf: bufs[r][0], Offset: 4000, Bytes: 6000}, {Buf: bufs[r][1], Bytes: 4 * floatsB}}
		if err := rk.Collectives[r].AllReduce(spans); err != nil {
			return err
		}
		return rk.Collectives[r].Wait(s.Timeout)
	}))
	for r, d := range rk.Devices {
		gotA, gotB := download(t, d, bufs[r][0], 0, floatsA), download(t, d, bufs[r][1], 0, floatsB)
		wantA, wantB := make([]float32, floatsA), make([]float32, floatsB)
		for q := range n {
			for i, v := range rankValues(q, 0, floatsA)[:2500] {
				wantA[i] += v
			}
			for i, v := range rankValues(q, 5, floatsB) {
				wantB[i] += v
			}
		}
		copy(wantA[2500:], rankValues(r, 0, floatsA)[2500:])
		near(t, fmt.Sprintf("rank %d grads", r), gotA, wantA, 0)
		near(t, fmt.Sprintf("rank %d more grads", r), gotB, wantB, 0)
	}
}

// testRepeated: many rounds, each with new values, must each be summed
// with their own round's values on every rank.
func testRepeated(t *testing.T, s CollectiveSuite) {
	n := s.Ranks
	rk := openRanks(t, s, n)
	const floats, rounds = 257, 12
	bufs := make([]gpuhost.Buffer, n)
	for r, d := range rk.Devices {
		bufs[r] = alloc(t, d, "grads", 4*floats)
	}
	for k := range rounds {
		noErrors(t, eachRank(n, func(r int) error {
			if err := rk.Devices[r].Upload(bufs[r], 0, toBytes(rankValues(r, k, floats))); err != nil {
				return err
			}
			// Two calls before one Wait: both must be enqueued in order.
			c := rk.Collectives[r]
			if err := c.AllReduce([]gpuhost.Arg{{Buf: bufs[r], Bytes: 4 * 100}}); err != nil {
				return err
			}
			if err := c.AllReduce([]gpuhost.Arg{{Buf: bufs[r], Offset: 400, Bytes: 4 * (floats - 100)}}); err != nil {
				return err
			}
			return c.Wait(s.Timeout)
		}))
		want := make([]float32, floats)
		for q := range n {
			for i, v := range rankValues(q, k, floats) {
				want[i] += v
			}
		}
		for r, d := range rk.Devices {
			near(t, fmt.Sprintf("round %d, rank %d", k, r), download(t, d, bufs[r], 0, floats), want, 0)
		}
	}
}

// testOrdering: a kernel launched before AllReduce is summed, and one
// launched after it reads the sums, with no wait between (the stream
// orders them).
func testOrdering(t *testing.T, s CollectiveSuite) {
	n := s.Ranks
	rk := openRanks(t, s, n)
	src, infos, err := Source(s.Language)
	if err != nil {
		t.Fatal(err)
	}
	k := kernel("conf_accumulate") // acc += x over accN floats
	type bufsOf struct{ x, grad, out gpuhost.Buffer }
	bufs := make([]bufsOf, n)
	seqs := make([][2]gpuhost.Sequence, n)
	for r, d := range rk.Devices {
		if err := d.LoadKernels(src, infos); err != nil {
			t.Fatalf("rank %d: LoadKernels: %v", r, err)
		}
		b := bufsOf{alloc(t, d, "x", 4*accN), alloc(t, d, "grad", 4*accN), alloc(t, d, "out", 4*accN)}
		bufs[r] = b
		upload(t, d, b.x, 0, rankValues(r, 1, accN))
		for i, pair := range [][2]gpuhost.Buffer{{b.x, b.grad}, {b.grad, b.out}} {
			seq, err := d.Record(fmt.Sprintf("step part %d", i), func(e gpuhost.Encoder) error {
				return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: pair[0], Bytes: 4 * accN}, {Buf: pair[1], Bytes: 4 * accN}}, k.Groups, k.Threadgroup)
			})
			if err != nil {
				t.Fatal(err)
			}
			seqs[r][i] = seq
		}
	}
	noErrors(t, eachRank(n, func(r int) error {
		// "backward" (grad += x), the sum, "update" (out += grad).
		if err := seqs[r][0].Launch(); err != nil {
			return err
		}
		if err := rk.Collectives[r].AllReduce([]gpuhost.Arg{{Buf: bufs[r].grad, Bytes: 4 * accN}}); err != nil {
			return err
		}
		if err := seqs[r][1].Launch(); err != nil {
			return err
		}
		if err := rk.Collectives[r].Wait(s.Timeout); err != nil {
			return err
		}
		return rk.Devices[r].Sync()
	}))
	want := make([]float32, accN)
	for q := range n {
		for i, v := range rankValues(q, 1, accN) {
			want[i] += v
		}
	}
	for r, d := range rk.Devices {
		near(t, fmt.Sprintf("rank %d: the update's input", r), download(t, d, bufs[r].out, 0, accN), want, 0)
	}
}

// testOverlap: sums started with StartAllReduce run beside the ops
// launched after them, and an op launched after Join reads the sums.
// Rank 0 launches the "backward" (grad += x), starts the sums of grad,
// launches the "rest of the backward" (other += x), joins, and only then
// lets the other ranks begin; then it launches the "update" (out +=
// grad). So its update is launched before any peer has sent a value: it
// must wait for the sums through Join (a Join that orders nothing makes
// out rank 0's own values), and the launch of the rest of the backward
// must not wait for them (it would wait for peers that have not begun,
// and the peers give up after overlapWait).
func testOverlap(t *testing.T, s CollectiveSuite) {
	const overlapWait = 20 * time.Second
	n := s.Ranks
	rk := openRanks(t, s, n)
	src, infos, err := Source(s.Language)
	if err != nil {
		t.Fatal(err)
	}
	k := kernel("conf_accumulate") // acc += x over accN floats
	type bufsOf struct{ x, grad, other, out gpuhost.Buffer }
	bufs := make([]bufsOf, n)
	seqs := make([][3]gpuhost.Sequence, n)
	for r, d := range rk.Devices {
		if err := d.LoadKernels(src, infos); err != nil {
			t.Fatalf("rank %d: LoadKernels: %v", r, err)
		}
		b := bufsOf{alloc(t, d, "x", 4*accN), alloc(t, d, "grad", 4*accN), alloc(t, d, "other", 4*accN), alloc(t, d, "out", 4*accN)}
		bufs[r] = b
		upload(t, d, b.x, 0, rankValues(r, 2, accN))
		for i, pair := range [][2]gpuhost.Buffer{{b.x, b.grad}, {b.x, b.other}, {b.grad, b.out}} {
			seq, err := d.Record(fmt.Sprintf("step part %d", i), func(e gpuhost.Encoder) error {
				return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: pair[0], Bytes: 4 * accN}, {Buf: pair[1], Bytes: 4 * accN}}, k.Groups, k.Threadgroup)
			})
			if err != nil {
				t.Fatal(err)
			}
			seqs[r][i] = seq
		}
	}
	joined := make(chan struct{})
	noErrors(t, eachRank(n, func(r int) error {
		if r > 0 {
			select {
			case <-joined:
			case <-time.After(overlapWait):
				return fmt.Errorf("rank 0 did not get past its Join within %v: its launch after StartAllReduce waited for the sums instead of running beside them", overlapWait)
			}
		}
		c := rk.Collectives[r]
		if err := seqs[r][0].Launch(); err != nil {
			return err
		}
		if err := c.StartAllReduce([]gpuhost.Arg{{Buf: bufs[r].grad, Bytes: 4 * accN}}); err != nil {
			return err
		}
		if err := seqs[r][1].Launch(); err != nil {
			return err
		}
		if err := c.Join(); err != nil {
			return err
		}
		if r == 0 {
			close(joined)
		}
		if err := seqs[r][2].Launch(); err != nil {
			return err
		}
		if err := c.Wait(s.Timeout + overlapWait); err != nil {
			return err
		}
		return rk.Devices[r].Sync()
	}))
	want := make([]float32, accN)
	for q := range n {
		for i, v := range rankValues(q, 2, accN) {
			want[i] += v
		}
	}
	for r, d := range rk.Devices {
		near(t, fmt.Sprintf("rank %d: the update's input (launched after Join)", r), download(t, d, bufs[r].out, 0, accN), want, 0)
		near(t, fmt.Sprintf("rank %d: the work beside the sums", r), download(t, d, bufs[r].other, 0, accN), rankValues(r, 2, accN), 0)
	}
}

// testSpansRefused: what cannot even start is an error at once, and
// leaves the collective usable.
func testSpansRefused(t *testing.T, s CollectiveSuite) {
	rk := openRanks(t, s, s.Ranks)
	d0, d1 := rk.Devices[0], rk.Devices[1]
	b0, b1 := alloc(t, d0, "grads", 64), alloc(t, d1, "elsewhere", 64)
	c := rk.Collectives[0]
	for _, bad := range []struct {
		span gpuhost.Arg
		want string
	}{
		{gpuhost.Arg{Buf: b0, Offset: 32, Bytes: 64}, "outside its buffer"},
		{gpuhost.Arg{Buf: b0, Offset: 2, Bytes: 8}, "whole float32s"},
		{gpuhost.Arg{Buf: b0, Bytes: 0}, "empty"},
		{gpuhost.Arg{Buf: b1, Bytes: 64}, "another device"},
	} {
		err := c.AllReduce([]gpuhost.Arg{bad.span})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("AllReduce(%+v) = %v, want an error containing %q", bad.span, err, bad.want)
		}
	}
	if err := c.Wait(s.Timeout); err != nil {
		t.Errorf("Wait after refused spans, with nothing enqueued: %v", err)
	}
}

// slack is what the timing checks allow past a stated timeout: a loaded
// CI machine can be seconds late, and the checks are about hangs.
const slack = 10 * time.Second

// wantFailure checks a Wait error: it names the rank, says words, and
// came within the timeout (plus slack).
func wantFailure(t *testing.T, s CollectiveSuite, r int, err error, took time.Duration, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("rank %d: Wait succeeded, want a failure", r)
	}
	said := false
	for _, w := range words {
		said = said || strings.Contains(err.Error(), w)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("rank %d of %d", r, s.Ranks)) || !said {
		t.Errorf("rank %d: error %q does not name the rank (\"rank %d of %d\") and say one of %q", r, err, r, s.Ranks, words)
	}
	if limit := s.Timeout + slack; took > limit {
		t.Errorf("rank %d: the failure came after %v, past %v", r, took, limit)
	}
}

// failing runs one round in which rank bad is hung or dead, and returns
// each rank's Wait error and how long it took.
func failing(t *testing.T, s CollectiveSuite, rk Ranks, bad int, inject func(int)) ([]error, []time.Duration) {
	n := s.Ranks
	bufs := make([]gpuhost.Buffer, n)
	for r, d := range rk.Devices {
		bufs[r] = alloc(t, d, "grads", 4*64)
	}
	inject(bad)
	took := make([]time.Duration, n)
	errs := eachRank(n, func(r int) error {
		start := time.Now()
		defer func() { took[r] = time.Since(start) }()
		if err := rk.Collectives[r].AllReduce([]gpuhost.Arg{{Buf: bufs[r], Bytes: 4 * 64}}); err != nil {
			return err
		}
		return rk.Collectives[r].Wait(s.Timeout)
	})
	return errs, took
}

func testRankHangs(t *testing.T, s CollectiveSuite) {
	rk := openRanks(t, s, s.Ranks)
	if rk.Hang == nil {
		t.Skip("this implementation cannot hang a rank on request (real GPUs); the fault cases run on the fake")
	}
	errs, took := failing(t, s, rk, 1, rk.Hang)
	// The first rank to time out aborts, and its peers may then learn of
	// it from NCCL before their own timeout: either is a right answer, but
	// some rank must have timed out.
	timedOut := false
	for r, err := range errs {
		wantFailure(t, s, r, err, took[r], "did not finish", "another rank failed")
		timedOut = timedOut || errors.Is(err, gpuhost.ErrCollectiveTimeout)
	}
	if !timedOut {
		t.Errorf("no rank's error wraps ErrCollectiveTimeout: %v", errs)
	}
	// The collective is aborted: later calls fail at once.
	b := alloc(t, rk.Devices[0], "later", 16)
	if err := rk.Collectives[0].AllReduce([]gpuhost.Arg{{Buf: b, Bytes: 16}}); !errors.Is(err, gpuhost.ErrAborted) {
		t.Errorf("AllReduce after a timeout = %v, want an error wrapping ErrAborted", err)
	}
}

func testRankDies(t *testing.T, s CollectiveSuite) {
	rk := openRanks(t, s, s.Ranks)
	if rk.Kill == nil {
		t.Skip("this implementation cannot kill a rank on request (real GPUs); the fault cases run on the fake")
	}
	errs, took := failing(t, s, rk, 2%s.Ranks, rk.Kill)
	for r, err := range errs {
		if r == 2%s.Ranks {
			continue // the dead rank's own process is gone; what it returns is moot
		}
		// The words show it came from NCCL's async error, not the timeout.
		wantFailure(t, s, r, err, took[r], "another rank failed")
	}
}

func testAbortFromElsewhere(t *testing.T, s CollectiveSuite) {
	rk := openRanks(t, s, s.Ranks)
	if rk.Hang == nil {
		t.Skip("needs a hung rank to keep a sum pending (real GPUs cannot); runs on the fake")
	}
	reason := errors.New("rank 1 on node-b exited with status 1")
	slow := s
	slow.Timeout = time.Hour // only Abort can end these waits
	go func() {
		time.Sleep(100 * time.Millisecond)
		for _, c := range rk.Collectives {
			c.Abort(reason)
		}
	}()
	start := time.Now()
	errs, _ := failing(t, slow, rk, 1, rk.Hang)
	if took := time.Since(start); took > slack {
		t.Fatalf("Abort ended the waits after %v", took)
	}
	// A rank learns of the abort from its own Abort (the reason) or, when
	// a peer's abort reached it first, from NCCL: either ends its wait.
	withReason := 0
	for r, err := range errs {
		switch {
		case errors.Is(err, gpuhost.ErrAborted) && errors.Is(err, reason):
			withReason++
		case err != nil && strings.Contains(err.Error(), "another rank failed"):
		default:
			t.Errorf("rank %d: Wait = %v, want an error wrapping ErrAborted and the reason, or a peer's failure", r, err)
		}
	}
	if withReason == 0 {
		t.Errorf("no rank's error carries the reason given to Abort: %v", errs)
	}
}

func testCloseWithSumsPending(t *testing.T, s CollectiveSuite) {
	rk := openRanks(t, s, s.Ranks)
	if rk.Hang == nil {
		t.Skip("needs a hung rank to keep a sum pending (real GPUs cannot); runs on the fake")
	}
	rk.Hang(1)
	b := alloc(t, rk.Devices[0], "grads", 64)
	if err := rk.Collectives[0].AllReduce([]gpuhost.Arg{{Buf: b, Bytes: 64}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rk.Collectives[0].Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close with a sum pending: %v", err)
		}
	case <-time.After(slack):
		t.Fatal("Close with a sum pending did not return: it must abort, not wait")
	}
}
