package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// decodeArgs is StepArgs with the decode position p, as the kernels
// receive it (uint words as float32 bit patterns).
func decodeArgs(p uint32) []float32 {
	a := argsVec(0, 0, 0)
	a[gpuhost.ArgPos] = math.Float32frombits(p)
	return a
}

// decodeCases are the KV-cache decode's kernels against rt/cpu (the CPU
// program's NextLogits calls): the embedding of one position with and
// without a position table, a position past the table clamped to its
// last row; the cached attention at the first position, one in the
// middle and the last of contexts that are no power of two (300: longer
// than its threadgroup), the caches' other rows left alone, with the
// weighted sum of the values split over groups of threads (37, 300) and
// not (a context of 4: a threadgroup narrower than a head).
// TestKernelsOnCPU runs them in the Metal dialect, TestCUDACheckOnCPU in
// the CUDA one.
func decodeCases(t *testing.T) []gpuCase {
	r := rand.New(rand.NewPCG(5, 6))
	var cs []gpuCase
	const vocab, dim, seq = 7, 5, 4
	w, pos := randVec(r, vocab*dim, -1, 1), randVec(r, seq*dim, -1, 1)
	for _, c := range []struct {
		id, p     int
		positions bool
	}{{3, 2, true}, {6, 9, true}, {0, 1, false}} {
		want := zeros(dim)
		var pw []float32
		if c.positions {
			pw = pos[min(c.p, seq-1)*dim : (min(c.p, seq-1)+1)*dim]
		}
		cpu.EmbeddingFwd("wte", []float32{float32(c.id)}, w, pw, want, 1, 1, vocab, dim)
		g := embeddingGeom{rows: 1, seq: seq, vocab: vocab, dim: dim, positions: c.positions}
		in := [][]float32{decodeArgs(uint32(c.p)), {float32(c.id)}, w}
		if c.positions {
			in = append(in, pos)
		}
		in = append(in, zeros(dim))
		cs = append(cs, gpuCase{name: fmt.Sprintf("decode_embedding_%d_at_%d", c.id, c.p), k: decodeEmbeddingKernel(g), in: in,
			want: map[int][]float32{len(in) - 1: want}, tol: 1e-7})
	}
	for _, c := range []struct{ context, heads, hd, p int }{{37, 3, 5, 0}, {37, 3, 5, 20}, {37, 3, 5, 36}, {300, 2, 8, 299}, {300, 2, 8, 131}, {4, 2, 5, 3}, {4, 2, 5, 1}} {
		wd := c.heads * c.hd
		q, k, v := randVec(r, wd, -1, 1), randVec(r, wd, -1, 1), randVec(r, wd, -1, 1)
		kc, vc := randVec(r, c.context*wd, -1, 1), randVec(r, c.context*wd, -1, 1)
		y, wkc, wvc := zeros(wd), slices.Clone(kc), slices.Clone(vc)
		const alpha = 0.37
		cpu.AttendCached(q, k, v, y, wkc, wvc, make([]float32, c.context), c.p, c.heads, c.hd, alpha)
		kern, err := attendCachedKernel(c.context, c.heads, c.hd, alpha)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, gpuCase{name: fmt.Sprintf("attend_cached_%d_at_%d", c.context, c.p), k: kern,
			in:   [][]float32{decodeArgs(uint32(c.p)), q, k, v, randVec(r, wd, 5, 6), kc, vc},
			want: map[int][]float32{4: y, 5: wkc, 6: wvc}, tol: 2e-6})
	}
	return cs
}

// TestAttendCachedRefusesLongContexts: a context whose scores would not
// fit a threadgroup's memory is an error, which leaves the program
// without a KV cache rather than with a kernel that fails to compile.
func TestAttendCachedRefusesLongContexts(t *testing.T) {
	if _, err := attendCachedKernel(16384, 4, 64, 1); err == nil {
		t.Error("a cached attention over 16384 positions was lowered")
	}
	if _, err := attendCachedKernel(4096, 4, 64, 1); err != nil {
		t.Errorf("4096 positions: %v", err)
	}
}
