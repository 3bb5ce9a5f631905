package app

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// DecodeStatsEnv, set to 1, makes generate write to stderr, after the
// text, where its time went: the model's calls (those after the prompt
// or a jump of the window apart: the prefill), and rt/cpu's decode team's
// account of its steps, a token (bench/gpu/decode-scaling.sh reads it).
// The account costs a few clock readings a step.
const DecodeStatsEnv = "MLBUILD_DECODE_STATS"

// timedModel is a TokenModel that times its calls of NextLogits for
// DecodeStatsEnv's line.
type timedModel struct {
	TokenModel
	// calls and time of all the calls, and of those with keep 0 (the
	// prompt, a moved window)
	calls, windows int
	all, window    time.Duration
	// each of the other calls' time (one token each, where generate
	// calls), for the median and the least: on a loaded machine those
	// tell the cost of a token that ran undisturbed
	token []time.Duration
}

func (m *timedModel) NextLogits(ctx []int32, keep int) []float32 {
	start := time.Now()
	logits := m.TokenModel.NextLogits(ctx, keep)
	d := time.Since(start)
	m.calls++
	m.all += d
	if keep == 0 {
		m.windows++
		m.window += d
	} else {
		m.token = append(m.token, d)
	}
	return logits
}

// writeDecodeStats writes DecodeStatsEnv's lines: the rate of the calls,
// the rate past the prompt and jumps, and the team's breakdown a token of
// those (its steps and parts; the caller's time in its own parts, in
// parts it ran for late members, waiting for members, and outside steps;
// the members' mean time in parts).
func writeDecodeStats(w io.Writer, m *timedModel, st cpu.DecodeStats) {
	if m.calls == 0 {
		return
	}
	tokens := m.calls - m.windows
	var median, least time.Duration
	if len(m.token) > 0 {
		slices.Sort(m.token)
		median, least = m.token[len(m.token)/2], m.token[0]
	}
	fmt.Fprintf(w, "decode stats: %d tokens in %.1f ms, %.1f tokens/s; %d calls after the prompt or a jump %.1f ms; the other %d at %.1f tokens/s (%.1f µs a token, median %.1f, least %.1f)\n",
		m.calls, ms(m.all), float64(m.calls)/m.all.Seconds(), m.windows, ms(m.window),
		tokens, float64(tokens)/max(1e-9, (m.all-m.window).Seconds()), us(m.all-m.window)/float64(max(1, tokens)), us(median), us(least))
	per := float64(m.calls)
	inSteps := st.Own + st.Stealing + st.Wait
	fmt.Fprintf(w, "decode stats: team of %d, a token: %.1f steps of %.1f parts, %.1f serial calls; the caller %.1f µs in its parts, %.1f µs in %.2f parts of late members, %.1f µs waiting, %.1f µs outside steps (kernels of one part, and the prefills' share); a member %.1f µs in parts; %d wake-ups\n",
		st.Team, float64(st.Steps)/per, float64(st.Parts)/float64(max(1, st.Steps)), float64(st.Serial)/per,
		us(st.Own)/per, us(st.Stealing)/per, float64(st.Stolen)/per, us(st.Wait)/per, us(m.all-inSteps)/per,
		us(st.MemberWork)/per/float64(max(1, st.Team-1)), st.Wakes)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
func us(d time.Duration) float64 { return float64(d) / 1e3 }
