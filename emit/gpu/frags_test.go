package gpu

import (
	"fmt"
	"testing"
)

// The PTX ISA's layouts of mma.m16n8k16 with bfloat16 operands ("Matrix
// Fragments for mma.m16n8k16 with floating point type"), written out
// again from its text, apart from cudaFragments' tables: element i of
// lane's fragment lies at (row, col); g = lane >> 2, t = lane % 4.
func ptxA(lane, i int) (row, col int) {
	g, t := lane>>2, lane%4
	row = g
	if !(i < 2 || 4 <= i && i < 6) {
		row = g + 8
	}
	col = t*2 + i&1
	if i >= 4 {
		col += 8
	}
	return row, col
}

func ptxB(lane, i int) (row, col int) {
	g, t := lane>>2, lane%4
	row = t*2 + i&1
	if i >= 2 {
		row += 8
	}
	return row, g
}

func ptxC(lane, i int) (row, col int) {
	g, t := lane>>2, lane%4
	row = g
	if i >= 2 {
		row = g + 8
	}
	return row, t*2 + i&1
}

// TestFragmentLayoutIsPTX: the CUDA dialect's fragment tables place
// every element of every lane where the PTX ISA does, and, for a few
// lanes, where the ISA's figures show them (lane 0 holds A's (0,0) and
// (0,1); lane 5, g 1 and t 1, holds a7 at (9,11), b3 at (11,1), c2 at
// (9,2); lane 31 holds c3 at (15,7)).
func TestFragmentLayoutIsPTX(t *testing.T) {
	f := cudaFragments
	ptx := [3]func(lane, i int) (int, int){ptxA, ptxB, ptxC}
	for r := FragA; r <= FragC; r++ {
		if len(f.Layout[r]) != []int{8, 4, 4}[r] || f.Regs(r) != []int{4, 2, 4}[r] {
			t.Fatalf("role %d: %d elements in %d registers", r, len(f.Layout[r]), f.Regs(r))
		}
		for lane := range 32 {
			for i := range f.Layout[r] {
				gr, gc := f.At(r, i, lane)
				wr, wc := ptx[r](lane, i)
				if gr != wr || gc != wc {
					t.Errorf("role %d, lane %d, element %d: at (%d, %d), the PTX ISA says (%d, %d)", r, lane, i, gr, gc, wr, wc)
				}
			}
		}
	}
	for _, c := range []struct {
		role     FragRole
		lane, i  int
		row, col int
	}{
		{FragA, 0, 0, 0, 0}, {FragA, 0, 1, 0, 1}, {FragA, 5, 7, 9, 11}, {FragA, 5, 4, 1, 10},
		{FragB, 5, 3, 11, 1}, {FragB, 18, 1, 5, 4}, {FragC, 5, 2, 9, 2}, {FragC, 31, 3, 15, 7},
	} {
		if r, col := f.At(c.role, c.i, c.lane); r != c.row || col != c.col {
			t.Errorf("role %d, lane %d, element %d: at (%d, %d), want (%d, %d)", c.role, c.lane, c.i, r, col, c.row, c.col)
		}
	}
}

// fragProbeKernel multiplies, in one warp, an A fragment whose lane l
// holds the values 8l … 8l+7 (elements 0 … 7; bfloat16 holds these
// integers exactly) by a B fragment that is zero but for a 1 in element
// bi of lane bl, onto a zero accumulator, and writes each lane's four
// accumulator registers to out[4·lane + i]. Read through the PTX
// layouts, the 1 selects one column of B, so the product copies one
// column of A into one column of the accumulator: which lanes and
// registers the copied values land in shows the emulated layout.
func fragProbeKernel(bl, bi int) *Kernel {
	lane := lidE
	elem := func(i int) Expr { return toFloat(add(mul(lane, i32(8)), i32(i))) }
	one := func(i int) Expr { return sel(and(eq(lane, i32(bl)), eq(i32(i), i32(bi))), flt(1), flt(0)) }
	body := []Stmt{FragDecl{"a", FragA}, FragDecl{"b", FragB}, FragDecl{"c", FragC}}
	for r := range 4 {
		body = append(body, FragSet{"a", r, PackBF16{elem(2 * r), elem(2*r + 1)}}, FragSet{"c", r, flt(0)})
	}
	for r := range 2 {
		body = append(body, FragSet{"b", r, PackBF16{one(2 * r), one(2*r + 1)}})
	}
	body = append(body, FragMMA{"c", "a", "b"})
	for r := range 4 {
		body = append(body, store("out", add(mul(lane, i32(4)), i32(r)), FragGet{"c", r}))
	}
	return &Kernel{Doc: fmt.Sprintf("fragment probe, B's 1 in lane %d element %d", bl, bi),
		Params: []Param{out("out", 128)}, Threadgroup: 32, Groups: 1, Body: body}
}

// TestFragmentEmulationIsPTX runs fragProbeKernel in the CUDA dialect
// on the CPU shim and checks every lane's accumulator against the
// product worked out from the PTX ISA's layouts (ptxA, ptxB, ptxC): for
// B's 1 in lane 5 element 2 (row 10, column 1 of B), lane 4·(r%8) holds
// in register 1 (r < 8) or 3 the value A(r, 10), which lane 4·(r%8)+1
// holds as element 4 or 6; all else is 0. Shuffles are checked too: a
// second kernel swaps values between the lanes of each quad.
func TestFragmentEmulationIsPTX(t *testing.T) {
	var cases []gpuCase
	for _, p := range [][2]int{{5, 2}, {18, 1}, {31, 3}, {0, 0}} {
		bl, bi := p[0], p[1]
		var aAt [16][16]float32
		for lane := range 32 {
			for i := range 8 {
				r, c := ptxA(lane, i)
				aAt[r][c] = float32(8*lane + i)
			}
		}
		k, n := ptxB(bl, bi)
		want := make([]float32, 128)
		for lane := range 32 {
			for i := range 4 {
				r, c := ptxC(lane, i)
				if c == n {
					want[4*lane+i] = aAt[r][k]
				}
			}
		}
		cases = append(cases, gpuCase{name: fmt.Sprintf("probe_%d_%d", bl, bi), k: fragProbeKernel(bl, bi),
			in: [][]float32{zeros(128)}, want: map[int][]float32{0: want}})
	}
	// shuffles: out[lane] = value of lane^1 plus 100·value of lane^2
	shfl := &Kernel{Doc: "quad shuffles", Params: []Param{out("out", 64)}, Threadgroup: 64, Groups: 1, Body: []Stmt{
		let("x", Float, toFloat(lidE)),
		store("out", lidE, add(ShuffleXor{vr("x"), 1}, mul(flt(100), ShuffleXor{vr("x"), 2}))),
	}}
	want := make([]float32, 64)
	for l := range 64 {
		want[l] = float32(l^1) + 100*float32(l^2)
	}
	cases = append(cases, gpuCase{name: "shuffle", k: shfl, in: [][]float32{zeros(64)}, want: map[int][]float32{0: want}})
	checkCases(t, CUDA, cases, runCases(t, CUDA, cases))
}
