package cpu

import (
	"fmt"
	"testing"
)

// TestAdamVectorMatchesScalar runs Adam and AdamW with the vector kernel
// (where the CPU has it) and with the pure-Go loop forced, on lengths that
// leave every possible tail and span several parallel chunks, over three
// steps, and compares parameters and moments.
func TestAdamVectorMatchesScalar(t *testing.T) {
	if !adamVectorSupported {
		t.Log("no vector Adam on this CPU; checking the scalar loop against itself across thread counts")
	}
	defer SetThreads(Threads())
	for _, n := range []int{1, 7, 8, 33, 257, 3*8192 + 5} {
		for _, decoupled := range []bool{false, true} {
			for _, threads := range []int{1, 3} {
				name := fmt.Sprintf("n=%d decoupled=%v threads=%d", n, decoupled, threads)
				r := newTestRand(uint64(n))
				p0, m0 := randSlice(r, n, 1), randSlice(r, n, 0.1)
				v0 := randSlice(r, n, 0.01)
				for i := range v0 {
					v0[i] *= v0[i] * 100 // non-negative second moments
				}
				grads := [][]float32{randSlice(r, n, 1), randSlice(r, n, 1e-3), randSlice(r, n, 10)}
				run := func(vector bool) [3][]float32 {
					adamUseVector = vector
					defer func() { adamUseVector = true }()
					SetThreads(threads)
					p, m, v := cloneF(p0), cloneF(m0), cloneF(v0)
					for step, g := range grads {
						Adam(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.01, step+1, decoupled)
					}
					return [3][]float32{p, m, v}
				}
				want, got := run(false), run(true)
				for i, what := range []string{"param", "m", "v"} {
					if msg := closeTo(got[i], want[i], 1e-6); msg != "" {
						t.Errorf("%s: %s: %s", name, what, msg)
					}
				}
			}
		}
	}
}

// BenchmarkAdam times one Adam step over the MLP benchmark's 535,818
// parameters, vector and scalar.
func BenchmarkAdam(b *testing.B) {
	const n = 535818
	r := newTestRand(1)
	p, g, m, v := randSlice(r, n, 1), randSlice(r, n, 1), make([]float32, n), make([]float32, n)
	for _, vector := range []bool{true, false} {
		b.Run(fmt.Sprintf("vector=%v", vector), func(b *testing.B) {
			adamUseVector = vector
			defer func() { adamUseVector = true }()
			for b.Loop() {
				Adam(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0, 3, false)
			}
		})
	}
}
