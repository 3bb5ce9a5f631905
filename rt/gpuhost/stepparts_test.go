package gpuhost

import (
	"slices"
	"testing"
)

// TestBucketsReady: a bucket starts after the last backward step that
// reads or writes any of its bytes, through a kernel's binds or a GEMM's
// operands (their extent from the shape, strides and batch), and never
// before an earlier bucket; bytes of other arenas do not count.
func TestBucketsReady(t *testing.T) {
	state := &testBuf{"state", 4096}
	kernel := func(off, n int) Op { return Op{Kernel: "k", Binds: []Bind{{Arena: ArenaState, Offset: off, Bytes: n}}} }
	backward := []PlanStep{
		{Name: "loss", Ops: []Op{{Kernel: "k", Binds: []Bind{{Arena: ArenaTrainWork, Offset: 0, Bytes: 4096}}}}},
		{Name: "dense2", Ops: []Op{kernel(1000, 40), // bytes 1000–1040
			// C = 2×3 at 2000 with rows of 16 bytes: bytes 2000 to 2028.
			{Gemm: &GemmOp{Shape: GemmShape{M: 2, N: 3, K: 5}, A: Matrix{Arena: ArenaTrainWork}, B: Matrix{Arena: ArenaTrainWork}, C: Matrix{Arena: ArenaState, Offset: 2000, RowBytes: 16}}}}},
		{Name: "dense1", Ops: []Op{kernel(0, 400),
			// A is Kᵀ: 5 rows of 2 (40 bytes) at 3000, twice, 100 apart: to 3140.
			{Gemm: &GemmOp{Shape: GemmShape{M: 2, N: 3, K: 5, TransA: true, Batch: 2}, A: Matrix{Arena: ArenaState, Offset: 3000}, B: Matrix{Arena: ArenaTrainWork}, C: Matrix{Arena: ArenaTrainWork}, MatrixBytes: [3]int{100, 0, 0}}}}},
		{Name: "relu", Ops: []Op{{Kernel: "k", Binds: []Bind{{Arena: ArenaTrainWork, Offset: 1000, Bytes: 40}}}}},
	}
	for _, c := range []struct {
		name    string
		buckets []Arg
		want    []int
	}{
		{"a kernel's bytes", []Arg{{Buf: state, Offset: 1000, Bytes: 40}, {Buf: state, Offset: 0, Bytes: 400}}, []int{1, 2}},
		{"the edge of a kernel's bytes", []Arg{{Buf: state, Offset: 1040, Bytes: 8}, {Buf: state, Offset: 996, Bytes: 8}}, []int{-1, 1}},
		{"a GEMM's C with its row stride", []Arg{{Buf: state, Offset: 2028, Bytes: 4}, {Buf: state, Offset: 2024, Bytes: 4}}, []int{-1, 1}},
		{"a batched GEMM's transposed A", []Arg{{Buf: state, Offset: 3140, Bytes: 4}, {Buf: state, Offset: 3136, Bytes: 4}}, []int{-1, 2}},
		{"never before an earlier bucket", []Arg{{Buf: state, Offset: 0, Bytes: 4}, {Buf: state, Offset: 1000, Bytes: 4}}, []int{2, 2}},
	} {
		if got := bucketsReady(backward, c.buckets); !slices.Equal(got, c.want) {
			t.Errorf("%s: ready after steps %v, want %v", c.name, got, c.want)
		}
	}
}

// TestGradientBucketsLeaveSummed: a gradient that a collective point of
// the step already sums (synchronised batch norm's dgamma and dbeta) is
// in no bucket, so it is not summed twice; the others are, in order.
func TestGradientBucketsLeaveSummed(t *testing.T) {
	state := &testBuf{"state", 4096}
	p := &Program{
		Gradients: []Region{{ArenaState, 100, 10}, {ArenaState, 200, 4}, {ArenaState, 300, 4}, {ArenaState, 0, 8}},
		TrainBackward: []PlanStep{{Name: "batch norm", Ops: []Op{
			{Kernel: "sums", Binds: []Bind{{ArenaState, 800, 16}, {ArenaState, 1200, 16}}},
			{Sum: true, Binds: []Bind{{ArenaState, 800, 16}, {ArenaState, 1200, 16}}},
		}}},
	}
	m := &Model{p: p, dp: &dataParallel{bucketBytes: DefaultBucketBytes}}
	m.bufs[ArenaState] = state
	got, err := m.gradientBuckets()
	if err != nil {
		t.Fatal(err)
	}
	want := []Arg{{Buf: state, Offset: 400, Bytes: 40}, {Buf: state, Offset: 0, Bytes: 32}}
	if !slices.Equal(got, want) {
		t.Errorf("buckets %v, want %v", got, want)
	}
}
