package cpu

import (
	"fmt"
	"testing"
)

// TestGemvMatchesNaive checks GemmFwd's dot-product path (batch 1 and 2)
// against float64 sums, with the vector dot product and with the pure-Go
// one forced, on input lengths around every multiple the vector loop uses
// (8, 32) and output counts split over 1 to 3 threads.
func TestGemvMatchesNaive(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(31)
	for _, vector := range []bool{true, false} {
		for _, threads := range []int{1, 2, 3} {
			SetThreads(threads)
			dotUseVector = vector
			for _, sz := range [][3]int{{1, 1, 1}, {1, 7, 5}, {2, 8, 3}, {1, 33, 257}, {2, 257, 33}, {1, 784, 512}, {1, 31, 2000}} {
				batch, in, out := sz[0], sz[1], sz[2]
				x, w, b := randSlice(r, batch*in, 1), randSlice(r, out*in, 1), randSlice(r, out, 1)
				y := randSlice(r, batch*out, 100)
				GemmFwd(x, w, b, y, batch, in, out, ActReLU, 0)
				want := make([]float32, batch*out)
				for i := 0; i < batch; i++ {
					for j := 0; j < out; j++ {
						s := float64(b[j])
						for k := 0; k < in; k++ {
							s += float64(x[i*in+k]) * float64(w[j*in+k])
						}
						want[i*out+j] = float32(actRef(s, ActReLU, 0))
					}
				}
				if msg := closeTo(y, want, 2e-5); msg != "" {
					t.Errorf("%s: GemmFwd %v: %s", fmt.Sprintf("vector=%v threads=%d", vector, threads), sz, msg)
				}
			}
		}
	}
	dotUseVector = true
}
