package cpu

import (
	"fmt"
	"math"
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

// TestDotRowsBits: dotRows (the four-row kernel where it runs) against dot
// row by row, bit for bit, on lengths around the kernel's steps (8, 32)
// and its Go tail, row ranges that leave 0 to 3 rows for dot, vectors on
// and off.
func TestDotRowsBits(t *testing.T) {
	defer func() { dotUseVector = true }()
	r := newTestRand(7)
	for _, vector := range []bool{true, false} {
		dotUseVector = vector
		for _, in := range []int{1, 7, 8, 9, 31, 32, 33, 40, 64, 100, 384, 1536} {
			const rows = 11
			x, w := randSlice(r, in, 1), randSlice(r, rows*in, 1)
			for _, span := range [][2]int{{0, rows}, {1, rows}, {2, 8}, {3, 6}, {5, 6}} {
				y := make([]float32, rows)
				dotRows(x, w[span[0]*in:], in, y[span[0]:span[1]])
				for j := span[0]; j < span[1]; j++ {
					if want := dot(x, w[j*in:(j+1)*in]); math.Float32bits(y[j]) != math.Float32bits(want) {
						t.Errorf("vector=%v in=%d rows %v: y[%d] = %v, dot gives %v", vector, in, span, j, y[j], want)
					}
				}
			}
		}
	}
}

// TestGemvThreadsBits: GemmFwd on one and two rows gives the same bits on
// 1, 2, 3, 5 and 16 threads (each output is one thread's dot product), at
// the shapes of a GPT decode step and odd ones.
func TestGemvThreadsBits(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(9)
	for _, sz := range [][3]int{{1, 384, 384}, {1, 384, 1536}, {1, 1536, 384}, {1, 384, 89}, {2, 257, 33}, {1, 8, 4000}} {
		batch, in, out := sz[0], sz[1], sz[2]
		x, w, b := randSlice(r, batch*in, 1), randSlice(r, out*in, 1), randSlice(r, out, 1)
		var want []float32
		for _, threads := range []int{1, 2, 3, 5, 16} {
			SetThreads(threads)
			y := make([]float32, batch*out)
			GemmFwd(x, w, b, y, batch, in, out, ActNone, 0)
			if want == nil {
				want = y
				continue
			}
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("GemmFwd %v on %d threads: y[%d] = %v, on 1 thread %v", sz, threads, i, y[i], want[i])
				}
			}
		}
	}
}

// TestDecodeKernelsAllocateNothingOnOneThread: a batch-1 decode's matrix-
// vector product and cached attention allocate nothing a call on one
// thread (their ParallelFor closures are made only where they split).
func TestDecodeKernelsAllocateNothingOnOneThread(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(1)
	r := newTestRand(2)
	x, w, y := randSlice(r, 384, 1), randSlice(r, 1536*384, 1), make([]float32, 1536)
	q, kc, vc, ya := randSlice(r, 384, 1), make([]float32, 256*384), make([]float32, 256*384), make([]float32, 384)
	scores := make([]float32, 6*256)
	if n := leastAllocs(20, func() { GemmFwd(x, w, nil, y, 1, 384, 1536, ActNone, 0) }); n != 0 {
		t.Errorf("GemmFwd 1×384×1536: %v allocations a call", n)
	}
	if n := leastAllocs(20, func() { AttendCached(q, q, q, ya, kc, vc, scores, 200, 6, 64, 0.125) }); n != 0 {
		t.Errorf("AttendCached at position 200: %v allocations a call", n)
	}
	wb, xb := make([]uint16, len(w)), make([]uint16, 384)
	if n := leastAllocs(20, func() { GemvBF16(x, xb, wb, nil, y, 384, 1536, ActNone, 0) }); n != 0 {
		t.Errorf("GemvBF16 1×384×1536: %v allocations a call", n)
	}
}
