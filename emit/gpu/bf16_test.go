package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/cpu"
)

// bf16Want is x rounded to bfloat16 as the IR's StoreBF16 promises, by the
// test's own arithmetic: to nearest, ties to even, a NaN kept and quieted.
func bf16Want(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	hi, rest := u>>16, u&0xffff
	if rest > 0x8000 || rest == 0x8000 && hi&1 == 1 {
		hi++
	}
	return uint16(hi)
}

// bf16Halves is v's bytes as bfloat16 elements, two in each float32.
func bf16Halves(v []float32) []uint16 {
	h := make([]uint16, 2*len(v))
	for i, x := range v {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h[2*i], h[2*i+1] = binary.LittleEndian.Uint16(b[:]), binary.LittleEndian.Uint16(b[2:])
	}
	return h
}

// bf16RoundTripKernel stores x[i] into the bfloat16 buffer y, then reads it
// back into z: StoreBF16 and LoadBF16 of one element a thread.
func bf16RoundTripKernel(n int) *Kernel {
	i := vr("i")
	return &Kernel{Name: "bf16_round_trip", Doc: "y = bf16(x); z = float(y)", Threadgroup: 64, Groups: (n + 63) / 64,
		Params: []Param{{Name: "x", Elem: Float, Size: n}, {Name: "y", Elem: BF16, Mutable: true, Size: n}, {Name: "z", Elem: Float, Mutable: true, Size: n}},
		Body: []Stmt{
			let("i", Int, gidE),
			If{Cond: lt(i, i32(n)), Then: []Stmt{
				StoreBF16{Buf: "y", Index: i, Value: load("x", i)},
				store("z", i, LoadBF16{Buf: "y", Index: i}),
			}},
		}}
}

// bf16RoundTrip4Kernel is bf16RoundTripKernel four elements a thread,
// with Store4BF16 and Load4BF16 (n a multiple of 4).
func bf16RoundTrip4Kernel(n int) *Kernel {
	i := vr("i")
	names := [4]string{"v0", "v1", "v2", "v3"}
	return &Kernel{Name: "bf16_round_trip4", Doc: "y = bf16(x); z = float(y), 8 bytes of y at a time", Threadgroup: 64, Groups: (n/4 + 63) / 64,
		Params: []Param{{Name: "x", Elem: Float, Size: n}, {Name: "y", Elem: BF16, Mutable: true, Size: n}, {Name: "z", Elem: Float, Mutable: true, Size: n}},
		Body: []Stmt{
			let("i", Int, mul(gidE, i32(4))),
			If{Cond: lt(i, i32(n)), Then: []Stmt{
				Store4BF16{Buf: "y", Index: i, Values: [4]Expr{load("x", i), load("x", add(i, i32(1))), load("x", add(i, i32(2))), load("x", add(i, i32(3)))}},
				Load4BF16{Buf: "y", Index: i, Names: names},
				Store4{Buf: "z", Index: i, Values: [4]Expr{vr("v0"), vr("v1"), vr("v2"), vr("v3")}},
			}},
		}}
}

// TestBF16StoreLoad runs StoreBF16 and LoadBF16, and their 8-byte forms
// Store4BF16 and Load4BF16 (which a dialect without them splits), in
// both dialects on the CPU: the stored bits are the rounding of each
// value (ties both ways, values that round up a binade or to infinity,
// infinities, NaNs of both signs, zeros, subnormals, random values), and
// the load gives back the float they stand for, bit for bit; the printed
// kernels match the goldens.
func TestBF16StoreLoad(t *testing.T) {
	x := []float32{1, -1, 0, float32(math.Copysign(0, -1)),
		1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1p-8 + 0x1p-20, -(1 + 3*0x1p-8), // ties to even, above a tie
		1.9999999, math.MaxFloat32, -math.MaxFloat32, // round up a binade, past the largest bfloat16
		float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7f800001), math.Float32frombits(0xffc12345), // NaNs (signalling, quiet, negative)
		math.Float32frombits(0x00000001), math.Float32frombits(0x00018000), math.Float32frombits(0x807fffff), // subnormals
	}
	r := rand.New(rand.NewPCG(3, 4))
	for len(x) < 132 {
		x = append(x, (r.Float32()*2-1)*float32(math.Pow(2, float64(r.IntN(60)-30))))
	}
	n := len(x)
	for _, d := range []*Dialect{CUDA, Metal} {
		// an odd count for the scalar accesses: the last bfloat16 is
		// alone in its float32 place
		bf16RoundTrip(t, d, bf16RoundTripKernel(n-1), x[:n-1])
		bf16RoundTrip(t, d, bf16RoundTrip4Kernel(n), x)
	}
}

// bf16RoundTrip runs a round-trip kernel k of TestBF16StoreLoad on x in
// dialect d, checks the bits it stored and loaded, and its golden.
func bf16RoundTrip(t *testing.T, d *Dialect, k *Kernel, x []float32) {
	t.Helper()
	n := len(x)
	res := runCases(t, d, []gpuCase{{name: k.Name, k: k, in: [][]float32{x, zeros((n + 1) / 2), zeros(n)}}})
	y, z := bf16Halves(res[0][1]), res[0][2]
	bad := 0
	for i, v := range x {
		want := bf16Want(v)
		if y[i] != want || math.Float32bits(z[i]) != uint32(want)<<16 {
			if bad < 5 {
				t.Errorf("%s %s: x[%d] = %g (%#08x): stored %#04x, loaded %#08x; want %#04x and %#08x",
					d.Name, k.Name, i, v, math.Float32bits(v), y[i], math.Float32bits(z[i]), want, uint32(want)<<16)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s %s: %d of %d values rounded or loaded wrong", d.Name, k.Name, bad, n)
	}
	src, err := Source(d, []*Kernel{Rewrite(k, d)})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, k.Name+"."+map[string]string{"cuda": "cu", "metal": "metal"}[d.Name], src)
}

// TestTwinKernels runs the kernels that write bfloat16 twins in both
// dialects on the CPU: layer norm (rows split over threads with 16-byte
// stores, one element a thread, and a row too wide for registers), GELU,
// dropout's and GELU's backward (four elements a thread with 16-byte
// accesses, and one) and the updates (SGD, Adam, multi-tensor Adam with a
// twin for two of its three params). Each float32 output matches the
// reference (rt/cpu or a plain loop), and each twin element is the
// rounding of the float32 the kernel stored beside it, bit for bit.
func TestTwinKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var cases []twinCase
	for _, sz := range []struct{ rows, cols int }{{5, 384}, {7, 12}, {3, 5000}} {
		n := sz.rows * sz.cols
		x, gamma := randVec(r, n, -2, 2), randVec(r, sz.cols, 0.5, 1.5)
		y, mean, inv := make([]float32, n), make([]float32, sz.rows), make([]float32, sz.rows)
		cpu.LayerNormFwd(x, gamma, nil, y, mean, inv, sz.rows, sz.cols, 1e-5)
		k := layerNormTwinKernel(sz.rows, sz.cols, 1e-5, false)
		cases = append(cases, twinCase{gpuCase{name: fmt.Sprintf("layernorm_%dx%d", sz.rows, sz.cols), k: k,
			in:   [][]float32{x, gamma, zeros(n), zeros(sz.rows), zeros(sz.rows), zeros((n + 1) / 2)},
			want: map[int][]float32{2: y, 3: mean, 4: inv}, tol: 1e-5}, map[int]int{5: 2}})
	}
	for _, n := range []int{1000, 999} { // four elements a thread, and one
		x := randVec(r, n, -3, 3)
		y := make([]float32, n)
		for i, v := range x {
			y[i] = 0.5 * v * (1 + float32(math.Erf(float64(v)/math.Sqrt2)))
		}
		k, err := unaryKernel(n, []planner.UnaryOp{{Op: "gelu"}})
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, twinCase{gpuCase{name: fmt.Sprint("gelu_", n), k: withTwins(k, []string{"y"}),
			in: [][]float32{x, zeros(n), zeros((n + 1) / 2)}, want: map[int][]float32{1: y}, tol: 1e-5}, map[int]int{2: 1}})
	}
	for _, n := range []int{1000, 999} { // backward kernels: dropout's and GELU's dx
		mask, dy, x := randVec(r, n, 0, 1.25), randVec(r, n, -1, 1), randVec(r, n, -3, 3)
		dx, dg := make([]float32, n), make([]float32, n)
		for i := range dy {
			dx[i] = dy[i] * mask[i]
			v := float64(x[i])
			dg[i] = dy[i] * float32(0.5*(1+math.Erf(v/math.Sqrt2))+v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi))
		}
		cases = append(cases, twinCase{gpuCase{name: fmt.Sprint("dropout_bwd_", n), k: withTwins(dropoutBwdKernel(n), []string{"dx"}),
			in: [][]float32{mask, dy, zeros(n), zeros((n + 1) / 2)}, want: map[int][]float32{2: dx}, tol: 1e-6}, map[int]int{3: 2}})
		k, err := unaryBwdKernel(n, []planner.UnaryOp{{Op: "gelu"}})
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, twinCase{gpuCase{name: fmt.Sprint("gelu_bwd_", n), k: withTwins(k, []string{"dx"}),
			in: [][]float32{x, dy, zeros(n), zeros((n + 1) / 2)}, want: map[int][]float32{2: dg}, tol: 1e-5}, map[int]int{3: 2}})
	}
	n := 999
	g, p, vel := randVec(r, n, -1, 1), randVec(r, n, -1, 1), randVec(r, n, -0.1, 0.1)
	wp, wv := slices.Clone(p), slices.Clone(vel)
	cpu.SGD(wp, g, wv, 0.05, 0.9, 1e-3)
	cases = append(cases, twinCase{gpuCase{name: "sgd", k: withTwins(sgdKernel(n, 0.9, 1e-3), []string{"p"}),
		in:   [][]float32{argsVec(0.05, 3, 0), g, slices.Clone(vel), slices.Clone(p), zeros((n + 1) / 2)},
		want: map[int][]float32{2: wv, 3: wp}, tol: 1e-6}, map[int]int{4: 3}})
	m, v := randVec(r, n, -0.1, 0.1), randVec(r, n, 0, 0.01)
	ap, am, av := slices.Clone(p), slices.Clone(m), slices.Clone(v)
	cpu.Adam(ap, g, am, av, 1e-3, 0.9, 0.999, 1e-8, 0.01, 5, true)
	cases = append(cases, twinCase{gpuCase{name: "adam", k: withTwins(adamKernel(n, 0.9, 0.999, 1e-8, 0.01, true), []string{"p"}),
		in:   [][]float32{argsVec(1e-3, 5, 0), g, slices.Clone(m), slices.Clone(v), slices.Clone(p), zeros((n + 1) / 2)},
		want: map[int][]float32{2: am, 3: av, 4: ap}, tol: 1e-5}, map[int]int{5: 4}})
	sizes := []int{300, 5, 513}
	in := [][]float32{argsVec(1e-3, 7, 0)}
	want := map[int][]float32{}
	for j, n := range sizes {
		g, m, v, p := randVec(r, n, -1, 1), randVec(r, n, -0.1, 0.1), randVec(r, n, 0, 0.01), randVec(r, n, -1, 1)
		wp, wm, wv := slices.Clone(p), slices.Clone(m), slices.Clone(v)
		cpu.Adam(wp, g, wm, wv, 1e-3, 0.9, 0.999, 1e-8, 0.01, 7, false)
		in = append(in, g, m, v, p)
		want[1+4*j+1], want[1+4*j+2], want[1+4*j+3] = wm, wv, wp
	}
	in = append(in, zeros((sizes[0]+1)/2), zeros((sizes[2]+1)/2))
	cases = append(cases, twinCase{gpuCase{name: "adam_multi", k: withTwins(adamMultiKernel(sizes, []float32{0.01, 0.01, 0.01}, 0.9, 0.999, 1e-8, false), []string{"p_0", "p_2"}),
		in: in, want: want, tol: 1e-5}, map[int]int{13: 4, 14: 12}})
	// softmax cross-entropy's gradient (the head's incoming gradient), by
	// the rows kernel and the one-threadgroup kernel, over a share of 2;
	// every fifth row's labels are all 0 (a padding token the loss
	// ignores): no loss, dz 0 and its twin too, over garbage in both
	rows, classes := 37, 89
	z, lab := randVec(r, rows*classes, -4, 4), zeros(rows*classes)
	dz, loss := make([]float32, rows*classes), make([]float32, rows)
	for i := range rows {
		if i%5 == 2 {
			continue
		}
		lab[i*classes+r.IntN(classes)] = 1
		zr, m := z[i*classes:(i+1)*classes], float64(slices.Max(z[i*classes:(i+1)*classes]))
		sum := 0.0
		for _, v := range zr {
			sum += math.Exp(float64(v) - m)
		}
		for c, v := range zr {
			lp := float64(v) - m - math.Log(sum)
			loss[i] -= lab[i*classes+c] * float32(lp)
			dz[i*classes+c] = float32((math.Exp(lp) - float64(lab[i*classes+c])) / float64(2*rows))
		}
	}
	total := float32(0)
	for _, l := range loss {
		total += l
	}
	cases = append(cases,
		twinCase{gpuCase{name: "softmax_xent_rows", k: withTwins(softmaxXentRowsKernel(rows, classes, 2*rows), []string{"dz"}),
			in: [][]float32{z, lab, zeros(rows), randVec(r, rows*classes, 5, 6), randVec(r, (rows*classes+1)/2, 5, 6)}, want: map[int][]float32{2: loss, 3: dz}, tol: 1e-5}, map[int]int{4: 3}},
		twinCase{gpuCase{name: "softmax_xent", k: withTwins(softmaxXentShareKernel(rows, classes, 2*rows), []string{"dz"}),
			in: [][]float32{z, lab, zeros(1), randVec(r, rows*classes, 5, 6), randVec(r, (rows*classes+1)/2, 5, 6)}, want: map[int][]float32{2: {total / float32(2*rows)}, 3: dz}, tol: 1e-5}, map[int]int{4: 3}})
	for _, d := range []*Dialect{CUDA, Metal} {
		runTwinCases(t, d, cases)
	}
}

// TestAttentionTwinKernels runs the fused attention's kernels that write
// bfloat16 twins of o, dk and dv, and dq (a GPT's proj and its q, k and
// v read them) in the CUDA dialect on the CPU: on register fragments, as
// a bf16 plan runs them, and the SIMT kernels, token-major with dropout
// and causal, and with keys fewer than queries. Each float32 output
// matches the unfused reference within the tolerances of the kernels'
// own tests, and each twin element is the rounding of the float32 the
// kernel stored beside it, bit for bit.
func TestAttentionTwinKernels(t *testing.T) {
	const step, seed = 7, 1234
	r := rand.New(rand.NewPCG(41, 7))
	tl, err := attnTilingFor(CUDA, "")
	if err != nil {
		t.Fatal(err)
	}
	var cases []twinCase
	for _, g := range []attnGeom{
		{mats: 4, tq: 80, tk: 80, d: 32, heads: 2, scale: 0.17, causal: true, rate: 0.1},
		{mats: 4, tq: 45, tk: 7, d: 6, heads: 4, scale: 0.4},
	} {
		g.tiling = tl
		q := randVec(r, g.mats*g.tq*g.d, -2, 2)
		kt := randVec(r, g.mats*g.d*g.tk, -2, 2)
		v := randVec(r, g.mats*g.tk*g.d, -1, 1)
		do := randVec(r, g.mats*g.tq*g.d, -1, 1)
		tm := func(o, dq, dkt, dv []float32) [4][]float32 {
			return [4][]float32{tokenMajor(g, o, g.tq), tokenMajor(g, dq, g.tq), tokenMajor(g, transposeMats(dkt, g.mats, g.d, g.tk), g.tk), tokenMajor(g, dv, g.tk)}
		}
		o, lse, delta, dq, dkt, dv := unfusedAttention(g, q, kt, v, do, step, seed, nil)
		exact := tm(o, dq, dkt, dv)
		o, lse16, delta16, dq, dkt, dv := unfusedAttention(g, q, kt, v, do, step, seed, cpu.RoundBF16)
		rounded := tm(o, dq, dkt, dv)
		q, v, do = tokenMajor(g, q, g.tq), tokenMajor(g, v, g.tk), tokenMajor(g, do, g.tq)
		kt = tokenMajor(g, transposeMats(kt, g.mats, g.d, g.tk), g.tk)
		var pre [][]float32
		a := 0
		if g.rate > 0 {
			pre, a = [][]float32{argsVec(0.1, step, seed)}, 1
		}
		args := func(ins ...[]float32) [][]float32 { return append(append([][]float32{}, pre...), ins...) }
		half := func(n int) []float32 { return zeros((n + 1) / 2) }
		name := fmt.Sprintf("attn_%dx%dx%dx%d", g.mats, g.tq, g.tk, g.d)
		for _, v2 := range []struct {
			name            string
			fwd, kv, qk     *Kernel
			want            [4][]float32
			lse, delta      []float32
			outTol, gradTol float64
		}{
			{"frag", attentionFwdFragKernel(g, CUDA.Fragments), attentionBwdKeysFragKernel(g, CUDA.Fragments, true, true), attentionBwdQueriesFragKernel(g, CUDA.Fragments), rounded, lse16, delta16, faOutTol, faGradTol},
			{"simt", attentionFwdKernel(g), attentionBwdKeysKernel(g, true, true), attentionBwdQueriesKernel(g), exact, lse, delta, 2e-5, 1e-4},
		} {
			w := v2.want
			cases = append(cases,
				twinCase{gpuCase{name: name + "_" + v2.name, k: withTwins(v2.fwd, []string{"o"}), tols: map[int]float64{a + 3: v2.outTol, a + 4: faLSETol},
					in: args(q, kt, v, zeros(len(w[0])), zeros(len(v2.lse)), half(len(w[0]))), want: map[int][]float32{a + 3: w[0]}}, map[int]int{a + 5: a + 3}},
				twinCase{gpuCase{name: name + "_" + v2.name + "_kv", k: withTwins(v2.kv, []string{g.dkName(), "dv"}), tol: v2.gradTol,
					in:   args(q, kt, v, do, v2.lse, v2.delta, zeros(len(w[2])), zeros(len(w[3])), half(len(w[2])), half(len(w[3]))),
					want: map[int][]float32{a + 6: w[2], a + 7: w[3]}}, map[int]int{a + 8: a + 6, a + 9: a + 7}},
				twinCase{gpuCase{name: name + "_" + v2.name + "_q", k: withTwins(v2.qk, []string{"dq"}), tol: v2.gradTol,
					in: args(q, kt, v, do, v2.lse, v2.delta, zeros(len(w[1])), half(len(w[1]))), want: map[int][]float32{a + 6: w[1]}}, map[int]int{a + 7: a + 6}})
		}
	}
	runTwinCases(t, CUDA, cases)
}

// twinCase is a kernel case whose kernel writes bfloat16 twins.
type twinCase struct {
	gpuCase
	twins map[int]int // twin parameter -> the float32 parameter it twins
}

// runTwinCases runs cases in dialect d on the CPU and checks each float32
// output against its reference (checkCases) and each twin element
// against the rounding of the float32 the kernel stored beside it, bit
// for bit.
func runTwinCases(t *testing.T, d *Dialect, cases []twinCase) {
	t.Helper()
	var plain []gpuCase
	for _, c := range cases {
		plain = append(plain, c.gpuCase)
	}
	res := runCases(t, d, plain)
	checkCases(t, d, plain, res)
	for i, c := range cases {
		if len(c.twins) == 0 {
			t.Errorf("%s/%s: case checks no twin", d.Name, c.name)
		}
		for tw, of := range c.twins {
			if c.k.Params[tw].Elem != BF16 {
				t.Fatalf("%s: parameter %d is no bfloat16 buffer", c.name, tw)
			}
			got, vals := bf16Halves(res[i][tw]), res[i][of]
			bad := 0
			for e, v := range vals {
				if got[e] != bf16Want(v) {
					if bad < 3 {
						t.Errorf("%s/%s: twin %s[%d] = %#04x, want %#04x (the rounding of %g)", d.Name, c.name, c.k.Params[tw].Name, e, got[e], bf16Want(v), v)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%s/%s: %d of %d twin elements wrong", d.Name, c.name, bad, len(vals))
			}
		}
	}
}

// packBF16 is v rounded to bfloat16 (bf16Want), two a float32 place, the
// first in the low half, as a buffer the plan stores in bfloat16 holds it.
func packBF16(v []float32) []float32 {
	out := make([]float32, (len(v)+1)/2)
	for i, x := range v {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(out[i/2]))
		binary.LittleEndian.PutUint16(b[2*(i%2):], bf16Want(x))
		out[i/2] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
	}
	return out
}

// TestStoredBF16 runs kernels written for float32 (batch norm's forward
// on float4 sweeps and its backward, a vectorised sum, ReLU's backward,
// the global average pool) as launch rewrites them for parameters bound
// to buffers the plan stores in bfloat16 (storedBF16), in both dialects
// on the CPU: each stored output is, bit for bit, the float32 kernel's
// output on the same bfloat16 values rounded to bfloat16, and the
// float32 outputs (batch norm's statistics) are the float32 kernel's; a
// name that is no float parameter is refused.
func TestStoredBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rounded := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(uint32(bf16Want(r.Float32()*4-2)) << 16)
		}
		return v
	}
	const outer, c, inner = 3, 5, 12
	n := outer * c * inner
	type kernelCase struct {
		name   string
		k      *Kernel
		stored []string // the parameters bound to bfloat16 buffers
	}
	accum, accumIn := accumulateKernel(n), [][]float32{rounded(n), rounded(n), zeros(n)}
	bnIn := [][]float32{rounded(n), rounded(c), rounded(c), zeros(c), rounded(c), zeros(n), zeros(c), zeros(c)}
	relu, err := actBwdKernel(n, "relu", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, kc := range []struct {
		kernelCase
		in [][]float32
	}{
		{kernelCase{"accumulate", accum, []string{"a", "b", "y"}}, accumIn},
		{kernelCase{"accumulate_mixed", accum, []string{"a", "y"}}, accumIn},
		{kernelCase{"batchnorm", batchNormKernel(outer, c, inner, 1e-5, 0.1, false), []string{"x", "y"}}, bnIn},
		{kernelCase{"batchnorm_bwd", batchNormBwdKernel(outer, c, inner, false), []string{"x", "dy", "dx"}},
			[][]float32{rounded(n), rounded(c), rounded(c), rounded(c), rounded(n), zeros(n), zeros(c), zeros(c)}},
		{kernelCase{"relu_bwd", relu, []string{"y", "dy"}}, [][]float32{rounded(n), rounded(n)}},
		{kernelCase{"globalavgpool", globalAvgPoolKernel(outer*c, inner), []string{"x"}}, [][]float32{rounded(n), zeros(outer * c)}},
	} {
		if len(kc.in) != len(kc.k.Params) {
			t.Fatalf("%s: %d inputs for %d parameters", kc.name, len(kc.in), len(kc.k.Params))
		}
		sk, err := storedBF16(kc.k, kc.stored)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[int]bool{}
		packed := make([][]float32, len(kc.in))
		for i, p := range kc.k.Params {
			packed[i] = kc.in[i]
			if slices.Contains(kc.stored, p.Name) {
				stored[i] = true
				packed[i] = packBF16(kc.in[i])
				if sk.Params[i].Elem != BF16 {
					t.Errorf("%s: parameter %s is not bfloat16 after the rewrite", kc.name, p.Name)
				}
			}
		}
		for _, d := range []*Dialect{CUDA, Metal} {
			res := runCases(t, d, []gpuCase{{name: kc.name, k: kc.k, in: kc.in}, {name: kc.name + "_stored", k: sk, in: packed}})
			for i, p := range kc.k.Params {
				if !p.Mutable {
					continue
				}
				want, got := res[0][i], res[1][i]
				bad := 0
				for j, w := range want {
					var g uint32
					if stored[i] {
						g = uint32(bf16Halves(got)[j]) << 16
						w = math.Float32frombits(uint32(bf16Want(w)) << 16)
					} else {
						g = math.Float32bits(got[j])
					}
					if g != math.Float32bits(w) {
						if bad < 3 {
							t.Errorf("%s %s: %s[%d] = %v, want %v", d.Name, kc.name, p.Name, j, math.Float32frombits(g), w)
						}
						bad++
					}
				}
			}
		}
	}
	if _, err := storedBF16(accum, []string{"z"}); err == nil {
		t.Error("storedBF16 took a name that is no parameter")
	}
}

// TestKRSCTwinUpdate runs multi-tensor SGD over a filter [6, 5, 3, 3]
// with a KRSC twin (a channels-last convolution's weight, the planner's
// store_channels_last.go) and a bias with a twin in its own order, in
// both dialects on the CPU: the params and velocities match rt/cpu's
// SGD, and each twin element holds the rounding of the param element
// whose place it is, bit for bit: for the filter, KCRS element
// (o, c, t) at (o·9 + t)·5 + c.
func TestKRSCTwinUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const oc, cg, rs = 6, 5, 9
	sizes := []int{oc * cg * rs, 7}
	in, want := [][]float32{argsVec(0.05, 2, 0)}, map[int][]float32{}
	for j, n := range sizes {
		g, vel, p := randVec(r, n, -1, 1), randVec(r, n, -0.1, 0.1), randVec(r, n, -1, 1)
		wp, wv := slices.Clone(p), slices.Clone(vel)
		cpu.SGD(wp, g, wv, 0.05, 0.9, 1e-3)
		in = append(in, g, vel, p)
		want[1+3*j+1], want[1+3*j+2] = wv, wp
	}
	in = append(in, zeros((sizes[0]+1)/2), zeros((sizes[1]+1)/2))
	at := map[string]func(Expr) Expr{"p_0": func(i Expr) Expr { return krscOfKCRS(i, cg, rs) }}
	k := withTwinsAt(sgdMultiKernel(sizes, []float32{1e-3, 1e-3}, 0.9), []string{"p_0", "p_1"}, at)
	for _, d := range []*Dialect{CUDA, Metal} {
		cases := []gpuCase{{name: "sgd_multi_krsc", k: k, in: in, want: want, tol: 1e-6}}
		res := runCases(t, d, cases)
		checkCases(t, d, cases, res)
		filter, bias := bf16Halves(res[0][7]), bf16Halves(res[0][8])
		for o := range oc {
			for c := range cg {
				for tap := range rs {
					v := res[0][3][(o*cg+c)*rs+tap]
					if got := filter[(o*rs+tap)*cg+c]; got != bf16Want(v) {
						t.Fatalf("%s: the KRSC twin of filter element (%d, %d, %d) is %#04x, want %#04x (the rounding of %g)", d.Name, o, c, tap, got, bf16Want(v), v)
					}
				}
			}
		}
		for i, v := range res[0][6] {
			if bias[i] != bf16Want(v) {
				t.Fatalf("%s: the bias's twin [%d] is %#04x, want %#04x (the rounding of %g)", d.Name, i, bias[i], bf16Want(v), v)
			}
		}
	}
}
