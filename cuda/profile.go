package cuda

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The profile (Options.Profile, MLBUILD_CUDA_PROFILE=1) answers "where
// does a step's time go" without NVIDIA's tools. Its sequences are kept
// as lists of ops, as blocking ones are, but each Launch enqueues them
// back to back, as the sequence's graph would run them, with a timing
// event recorded before the first op and after each; it then waits once,
// for the last event, and reads each op's GPU time between the events
// around it (cuEventElapsedTime). The Device's Close writes the table of
// ops by total time, and each sequence's GPU time a launch, to compare
// with a step of the graph. The table groups ops by what they are, the
// kernel's name (which names one shape: kernels are generated per shape)
// or the GEMM's sizes, over every sequence. The first launch of each
// sequence is not counted: CUDA loads a library's kernels when they
// first run (lazy loading), which made a 128×10×512 GEMM read 3 ms.
//
// An op's time runs from the event after the op before it to its own,
// so it also holds any time the GPU waited for the host to launch it.
// While the ops take longer than the host needs to launch one (a launch
// and an event record, a few µs), the GPU stays ahead and each time is
// the op's own; a run of shorter ops leaves the GPU waiting, and each of
// them reads about a launch. A fault shows at the one wait, which does
// not say which op hit it; MLBUILD_CUDA_BLOCKING=1 alone (blocking.go)
// names it.

// opStat is one line of the profile.
type opStat struct {
	what  string
	calls int
	total time.Duration
}

// profile sums the GPU time of each op over the timed launches of
// sequences.
type profile struct {
	stats map[string]*opStat
	// families sums each sequence's ops by family (opFamily): where a
	// step's time goes, apart from the other sequences'.
	families map[string]map[string]*opStat
	seqs     map[string]time.Duration
	runs     map[string]int // the counted launches of each sequence
	wall     time.Duration
}

// opIndex is the "op 12 " that starts an op's name in errors.
var opIndex = regexp.MustCompile(`^op [0-9]+ \((.*)\)$`)

// launched records one more counted launch of sequence seq, whose ops
// add their times.
func (p *profile) launched(seq string) {
	if p.runs == nil {
		p.runs = map[string]int{}
	}
	p.runs[seq]++
}

// add records one op's time in sequence seq.
func (p *profile) add(seq, op string, d time.Duration) {
	if p.stats == nil {
		p.stats, p.seqs = map[string]*opStat{}, map[string]time.Duration{}
	}
	what := op
	if m := opIndex.FindStringSubmatch(op); m != nil {
		what = m[1]
	}
	st := p.stats[what]
	if st == nil {
		st = &opStat{what: what}
		p.stats[what] = st
	}
	st.calls++
	st.total += d
	if p.families == nil {
		p.families = map[string]map[string]*opStat{}
	}
	fam := p.families[seq]
	if fam == nil {
		fam = map[string]*opStat{}
		p.families[seq] = fam
	}
	f := opFamily(what)
	if fam[f] == nil {
		fam[f] = &opStat{what: f}
	}
	fam[f].calls++
	fam[f].total += d
	p.seqs[seq] += d
	p.wall += d
}

// write prints the profile: the sequences' totals, then the ops by total
// time, at most top lines of them.
func (p *profile) write(w io.Writer, device string, top int) {
	if p.wall == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	fmt.Fprintf(w, "profile of %s (MLBUILD_CUDA_PROFILE: GPU time between events recorded around each op, the ops launched back to back; the first launch of each sequence not counted)\n", device)
	seqs := make([]string, 0, len(p.seqs))
	for s := range p.seqs {
		seqs = append(seqs, s)
	}
	slices.SortFunc(seqs, func(a, b string) int { return cmp.Compare(p.seqs[b], p.seqs[a]) })
	for _, s := range seqs {
		n := max(p.runs[s], 1)
		fmt.Fprintf(w, "  sequence %-28q %10.2f ms in %d launches, %.3f ms of GPU time a launch\n", s, ms(p.seqs[s]), n, ms(p.seqs[s])/float64(n))
	}
	ops := byTotal(p.stats)
	fmt.Fprintf(w, "  %10s %6s %8s %10s  %s\n", "total ms", "share", "calls", "mean µs", "op")
	for i, st := range ops {
		if i == top {
			var rest time.Duration
			for _, r := range ops[i:] {
				rest += r.total
			}
			fmt.Fprintf(w, "  %10.2f %5.1f%% %8s %10s  (%d more ops)\n", ms(rest), 100*float64(rest)/float64(p.wall), "", "", len(ops)-i)
			break
		}
		fmt.Fprintf(w, "  %10.2f %5.1f%% %8d %10.1f  %s\n", ms(st.total), 100*float64(st.total)/float64(p.wall), st.calls,
			float64(st.total)/float64(st.calls)/1e3, st.what)
	}
	fmt.Fprintf(w, "  %10.2f %5.1f%% in all\n", ms(p.wall), 100.0)
	for _, sq := range seqs {
		n := float64(max(p.runs[sq], 1))
		fams := byTotal(p.families[sq])
		fmt.Fprintf(w, "  sequence %q by family, a launch:\n  %10s %6s %8s  %s\n", sq, "ms", "share", "ops", "family")
		for i, st := range fams {
			if i == top/2 {
				break
			}
			fmt.Fprintf(w, "  %10.3f %5.1f%% %8.0f  %s\n", ms(st.total)/n, 100*float64(st.total)/float64(p.seqs[sq]), float64(st.calls)/n, st.what)
		}
	}
}

// byTotal is stats' lines, the largest total first (then by name).
func byTotal(stats map[string]*opStat) []*opStat {
	out := make([]*opStat, 0, len(stats))
	for _, st := range stats {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *opStat) int {
		if c := cmp.Compare(b.total, a.total); c != 0 {
			return c
		}
		return cmp.Compare(a.what, b.what)
	})
	return out
}

// opFamily is the family an op's name belongs to: a generated kernel's
// name without its number ("kernel batchnorm_nhwc" for every
// "kernel mlb012_batchnorm_nhwc"), every GEMM one, a library call its own.
func opFamily(what string) string {
	if m := kernelNumber.FindStringSubmatch(what); m != nil {
		return "kernel " + m[1]
	}
	if strings.HasSuffix(what, " GEMM") {
		return "GEMM"
	}
	return what
}

// kernelNumber is a generated kernel's op name: "kernel mlb012_name".
var kernelNumber = regexp.MustCompile(`^kernel mlb[0-9]+_(.*)$`)

// launchTimed runs a sequence's ops back to back between timing events,
// waits once, and adds each op's GPU time to the profile (but at the
// sequence's first launch). A failed launch names its op; a fault at the
// wait names the ops it may be in.
func (s *sequence) launchTimed() error {
	d := s.d
	if len(s.ops) == 0 {
		s.runs++
		return nil
	}
	evs, err := d.timingEvents(len(s.ops) + 1)
	if err != nil {
		return fmt.Errorf("cuda: profiling sequence %q: %w", s.name, err)
	}
	for i, op := range s.ops {
		var err error
		if i == 0 {
			err = d.e.RecordEvent(evs[0])
		}
		if err == nil {
			err = op.launch()
		}
		if err == nil {
			err = d.e.RecordEvent(evs[i+1])
		}
		if err != nil {
			return s.timedLaunchFailed(i, err)
		}
	}
	times, err := d.e.ElapsedTimes(evs[:len(s.ops)+1])
	if err != nil {
		return fmt.Errorf("cuda: %s failed in sequence %q in one of its %d ops, %s to %s, launched back to back and timed (MLBUILD_CUDA_PROFILE), "+
			"which does not say which: run again with MLBUILD_CUDA_BLOCKING=1 and without MLBUILD_CUDA_PROFILE (every op launched alone and waited for) to name it: %w",
			d.e.Name(), s.name, len(s.ops), s.ops[0].name, s.ops[len(s.ops)-1].name, err)
	}
	if s.runs > 0 {
		for i, op := range s.ops {
			d.prof.add(s.name, op.name, times[i])
		}
		d.prof.launched(s.name)
	}
	s.runs++
	return nil
}

// timedLaunchFailed is the error of op i's launch (or of an event around
// it) in a timed launch, once the ops before it are waited for: a fault
// of one of them may be what the launch reported.
func (s *sequence) timedLaunchFailed(i int, err error) error {
	d := s.d
	err = fmt.Errorf("cuda: %s failed in sequence %q at %s (of its %d ops, launched back to back and timed: MLBUILD_CUDA_PROFILE): %w",
		d.e.Name(), s.name, s.ops[i].name, len(s.ops), err)
	if i > 0 {
		err = fmt.Errorf("%w; the ops before it (from %s) ran without a wait, and a fault of one of them shows at the next call: "+
			"run again with MLBUILD_CUDA_BLOCKING=1 and without MLBUILD_CUDA_PROFILE (every op launched alone and waited for) to name the op", err, s.ops[0].name)
	}
	// Nothing of this launch runs after it returns, as in a blocking one.
	if werr := d.e.Synchronize(); werr != nil {
		err = fmt.Errorf("%w; waiting for the ops before it: %v", err, werr)
	}
	return err
}

// timingEvents returns the first n of the Device's timing events, made
// as needed; every timed launch reuses them, one at a time (each ends
// with a wait), and Close destroys them.
func (d *Device) timingEvents(n int) ([]Event, error) {
	if len(d.timing) < n {
		evs, err := d.e.NewTimingEvents(n - len(d.timing))
		if err != nil {
			return nil, err
		}
		d.timing = append(d.timing, evs...)
	}
	return d.timing[:n], nil
}

// NewTimingEvents makes n events that take the GPU's time when the
// stream reaches them (EventDefault), for ElapsedTimes; the caller
// destroys them with DestroyEvents.
func (e *Engine) NewTimingEvents(n int) ([]Event, error) {
	if e.closed {
		return nil, errClosed
	}
	evs := make([]Event, 0, n)
	err := e.doHere(func() error {
		d, l := e.lib.Driver, e.lib
		for range n {
			var ev Event
			if err := l.driverError("cuEventCreate", d.EventCreate(&ev, EventDefault), "a timing event"); err != nil {
				for _, ev := range evs {
					d.EventDestroy(ev)
				}
				return err
			}
			evs = append(evs, ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// RecordEvent records ev on the engine's stream: the point after the work
// enqueued so far.
func (e *Engine) RecordEvent(ev Event) error {
	if e.closed {
		return errClosed
	}
	return e.doHere(func() error {
		return e.lib.driverError("cuEventRecord", e.lib.Driver.EventRecord(ev, e.stream), "")
	})
}

// ElapsedTimes waits for the last of evs, recorded in order on the
// stream, and returns the GPU time between each two of them in turn
// (len(evs)−1 times). The wait's error is a fault of the work before the
// last event.
func (e *Engine) ElapsedTimes(evs []Event) ([]time.Duration, error) {
	if e.closed {
		return nil, errClosed
	}
	if len(evs) == 0 {
		return nil, nil
	}
	times := make([]time.Duration, len(evs)-1)
	err := e.doHere(func() error {
		d, l := e.lib.Driver, e.lib
		if err := l.driverError("cuEventSynchronize", d.EventSynchronize(evs[len(evs)-1]), ""); err != nil {
			return err
		}
		for i := range times {
			var ms float32
			if err := l.driverError("cuEventElapsedTime", d.EventElapsedTime(&ms, evs[i], evs[i+1]), fmt.Sprintf("between events %d and %d", i, i+1)); err != nil {
				return err
			}
			times[i] = time.Duration(float64(ms) * 1e6)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return times, nil
}

// DestroyEvents destroys events and returns the first error.
func (e *Engine) DestroyEvents(evs []Event) error {
	if e.closed {
		return errClosed
	}
	return e.doHere(func() error {
		var first error
		for _, ev := range evs {
			if err := e.lib.driverError("cuEventDestroy_v2", e.lib.Driver.EventDestroy(ev), ""); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}
