package cpu

import (
	"math"
	"testing"
)

// TestDropoutPathsAreTheGoTwin: every GEMM path's dropout kernel (AVX-512
// assembly where the machine has it) gives the Go loop's mask and output
// bits, for every length up to 40 and a long one, at several bases and
// rates (0.1, 0.5, and 1: everything dropped).
func TestDropoutPathsAreTheGoTwin(t *testing.T) {
	defer SetGemmPath("")
	r := newTestRand(12)
	x := randSlice(r, 5000, 3)
	x[7] = float32(math.Inf(1))
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, rate := range []float32{0.1, 0.5, 1} {
			keep := float32(0)
			if rate < 1 {
				keep = 1 / (1 - rate)
			}
			lengths := []int{len(x), 48, 63, 80} // odd counts of vectors after pairs of them
			for n := 0; n <= 40; n++ {
				lengths = append(lengths, n)
			}
			for _, n := range lengths {
				for _, base := range []uint32{0, 17, 1 << 31, math.MaxUint32 - 5} {
					seed, step := uint32(0xdeadbeef)+uint32(n), uint32(12345)
					y, mask := make([]float32, n+1), make([]float32, n+1)
					y[n], mask[n] = 42, 42
					dropoutMask(x[:n], y[:n], mask[:n], base, seed, step, rate, keep)
					for i := 0; i < n; i++ {
						m := keep
						if DropoutUniform(seed, step, base+uint32(i)) < rate {
							m = 0
						}
						want := x[i] * m
						if mask[i] != m || math.Float32bits(y[i]) != math.Float32bits(want) && !(y[i] != y[i] && want != want) {
							t.Fatalf("%s, rate %g, n %d, base %d, element %d: mask %g y %g, want %g %g", path, rate, n, base, i, mask[i], y[i], m, want)
						}
					}
					if y[n] != 42 || mask[n] != 42 {
						t.Fatalf("%s, n %d: wrote past the end", path, n)
					}
				}
			}
		}
	}
}

// TestDropoutIsTheSameOnAnyThreadCount: the mask depends on the seed and
// the element's index only, so 1, 2 and 3 threads draw the same; a call
// takes one draw of rng.
func TestDropoutIsTheSameOnAnyThreadCount(t *testing.T) {
	defer SetThreads(Threads())
	n := 100003
	x := make([]float32, n)
	Fill(x, 1)
	var first []float32
	for _, threads := range []int{1, 2, 3} {
		SetThreads(threads)
		y, mask := make([]float32, n), make([]float32, n)
		rng := NewRand(5)
		DropoutFwd(x, y, mask, 0.1, rng, true)
		next, want := rng.Uint64(), NewRand(5)
		want.Uint64()
		if next != want.Uint64() {
			t.Errorf("%d threads: DropoutFwd took more than one draw of rng", threads)
		}
		if first == nil {
			first = mask
			continue
		}
		if msg := closeTo(mask, first, 0); msg != "" {
			t.Errorf("%d threads: mask differs from one thread's: %s", threads, msg)
		}
	}
}
