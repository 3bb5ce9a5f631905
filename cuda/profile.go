package cuda

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"time"
)

// The profile (Options.Profile, MLBUILD_CUDA_PROFILE=1) answers "where
// does a step's time go" without NVIDIA's tools: its sequences are
// blocking (each op launched alone and waited for), each op is timed on
// the host from its launch to the end of its wait, and the Device's Close
// writes the table of ops by total time. Each time includes one launch
// and one wait (about 10 µs on the H200 kind), so an op of a few
// microseconds reads several times too slow; what the table is for is
// the large ops and the shares. The table groups ops by what they are,
// the kernel's name (which names one shape: kernels are generated per
// shape) or the GEMM's sizes, over every sequence. The first launch of
// each sequence is not counted: CUDA loads a library's kernels when they
// first run (lazy loading), which made a 128×10×512 GEMM read 3 ms.

// opStat is one line of the profile.
type opStat struct {
	what  string
	calls int
	total time.Duration
}

// profile sums the time of each op over the launches of blocking
// sequences.
type profile struct {
	stats map[string]*opStat
	seqs  map[string]time.Duration
	wall  time.Duration
}

// opIndex is the "op 12 " that starts an op's name in errors.
var opIndex = regexp.MustCompile(`^op [0-9]+ \((.*)\)$`)

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
	fmt.Fprintf(w, "profile of %s (MLBUILD_CUDA_PROFILE: every op launched alone and waited for; each time includes a launch and a wait)\n", device)
	seqs := make([]string, 0, len(p.seqs))
	for s := range p.seqs {
		seqs = append(seqs, s)
	}
	slices.SortFunc(seqs, func(a, b string) int { return cmp.Compare(p.seqs[b], p.seqs[a]) })
	for _, s := range seqs {
		fmt.Fprintf(w, "  sequence %-28q %10.2f ms\n", s, ms(p.seqs[s]))
	}
	ops := make([]*opStat, 0, len(p.stats))
	for _, st := range p.stats {
		ops = append(ops, st)
	}
	slices.SortFunc(ops, func(a, b *opStat) int {
		if c := cmp.Compare(b.total, a.total); c != 0 {
			return c
		}
		return cmp.Compare(a.what, b.what)
	})
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
}
