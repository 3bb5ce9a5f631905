// Package gpuhosttest is the one conformance suite of gpuhost.Device: every
// device (Metal, CUDA) and every fake of one runs it, so the GPU host
// program can rely on the same contract from all of them. The suite's
// kernels are defined once in emit/gpu's IR and printed in each device's
// language into testdata (emit/gpu's TestConformanceKernels writes and
// checks them), so the suite, like every runtime package, imports no
// compiler package.
package gpuhosttest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// Suite is the device under test.
type Suite struct {
	// Open returns a new device; each case opens its own and closes it.
	Open func(t *testing.T) gpuhost.Device
	// Language is the device's kernel language.
	Language Language
	// FailNextLaunch, when set, makes the next launched sequence on d fail
	// on the device as a kernel fault would (a fake can; a real GPU
	// cannot be asked to). Without it the Sync failure case is skipped.
	FailNextLaunch func(d gpuhost.Device)
	// Caller says the device is a discrete GPU that must implement
	// gpuhost.Caller; the Call case then runs (devices sharing memory with
	// the host have no use for it and leave this false).
	Caller bool
	// Precisions are the fast GEMM precisions the device computes (beside
	// f32, which every device does); the Precision case checks each, and
	// that the device refuses the others when they are encoded.
	Precisions []gpuhost.Precision
	// RoundsOperands says the device computes a fast precision exactly as
	// its definition (A and B rounded, float32 sums), as the fakes do: the
	// Precision case then holds it to the rounded reference and requires
	// it to differ from the exact product. Without it (cuBLAS's FAST_16BF
	// and FAST_TF32 round the operands or not, by shape: a 9×11×65 GEMM on
	// an H200 was float32 exact) the result must be within the precision's
	// error bound of the exact float32 product.
	RoundsOperands bool
	// BF16Operands says the device reads bfloat16 A and B (Operand.Elem
	// ElemBF16, in a bf16 GEMM): the BF16Operands case then holds it to
	// the product of the stored values and checks the refusals of the
	// combinations the contract forbids; without it, every bfloat16
	// operand must be refused.
	BF16Operands bool
	// Conv says the device has library convolutions (Encoder.Conv): the
	// Conv case then holds each product to the float64 reference, and
	// checks ConvPrecisions (fast precisions on float32 tensors: tf32;
	// bf16 is ConvBF16's) as Precisions are checked for GEMMs; without
	// it, every Conv must be refused.
	Conv           bool
	ConvPrecisions []gpuhost.Precision
	// ConvBF16 says the device's library convolutions read and write
	// bfloat16 tensors in precision bf16: the ConvBF16 case then holds
	// each product to the product of the stored values with a bfloat16
	// output and checks the refusals of the combinations the contract
	// forbids; without it (and with Conv), every bfloat16 Conv must be
	// refused.
	ConvBF16 bool
	// ConvNHWC says the device's library convolutions read and write
	// channels-last tensors (Conv.NHWC: X and Y NHWC, W KRSC): the
	// ConvNHWC case then holds each product, float32 and (with ConvBF16)
	// bfloat16, to the NCHW reference on the transposed tensors, checks
	// that the result is not that of the same memory read in another
	// layout (NCHW, or the filter KCRS), and checks the refusals; without
	// it (and with Conv), every channels-last Conv must be refused.
	ConvNHWC bool
	// ConvEpilogue says the device's library convolutions compute a
	// forward's epilogue (Conv.Bias, Conv.Z and Conv.Act; ConvSupport's
	// Epilogue): the ConvEpilogue case then holds it, in every element
	// type and layout the device reads, to the float64 reference;
	// without it (and with Conv), every Conv with an epilogue must be
	// refused. The case checks the refusals of the contract on every
	// device.
	ConvEpilogue bool
}

// Run runs every case of the suite as a subtest.
func Run(t *testing.T, s Suite) {
	if s.Open == nil || s.Language == "" {
		t.Fatal("gpuhosttest: Suite needs Open and Language")
	}
	cases := []struct {
		name string
		run  func(t *testing.T, s Suite)
	}{
		{"Identity", testIdentity},
		{"AllocZeroed", testAllocZeroed},
		{"UploadDownload", testUploadDownload},
		{"HostView", testHostView},
		{"Saxpy", testSaxpy},
		{"BlockSum", testBlockSum},
		{"Gemm", testGemm},
		{"GemmBatched", testGemmBatched},
		{"GemmPrecision", testGemmPrecision},
		{"GemmBF16Operands", testGemmBF16Operands},
		{"KernelThenGemm", testKernelThenGemm},
		{"Conv", testConv},
		{"ConvBF16", testConvBF16},
		{"ConvNHWC", testConvNHWC},
		{"ConvEpilogue", testConvEpilogue},
		{"Replay", testReplay},
		{"SyncFailure", testSyncFailure},
		{"BoundsRefused", testBoundsRefused},
		{"MissingKernel", testMissingKernel},
		{"Close", testClose},
	}
	if s.Caller {
		cases = append(cases, struct {
			name string
			run  func(t *testing.T, s Suite)
		}{"Call", testCall})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

// open opens a device that the test closes at its end, checking Close.
func open(t *testing.T, s Suite) gpuhost.Device {
	t.Helper()
	d := s.Open(t)
	if d == nil {
		t.Fatal("Open returned a nil device")
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// loaded opens a device with the suite's kernels loaded.
func loaded(t *testing.T, s Suite) gpuhost.Device {
	t.Helper()
	d := open(t, s)
	src, infos, err := Source(s.Language)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadKernels(src, infos); err != nil {
		t.Fatalf("LoadKernels: %v", err)
	}
	return d
}

func alloc(t *testing.T, d gpuhost.Device, label string, n int) gpuhost.Buffer {
	t.Helper()
	b, err := d.Alloc(label, n)
	if err != nil {
		t.Fatalf("Alloc(%q, %d): %v", label, n, err)
	}
	if b.Len() != n {
		t.Fatalf("Alloc(%q, %d): Len %d", label, n, b.Len())
	}
	return b
}

func toBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func toFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func upload(t *testing.T, d gpuhost.Device, b gpuhost.Buffer, off int, v []float32) {
	t.Helper()
	if err := d.Upload(b, off, toBytes(v)); err != nil {
		t.Fatalf("Upload of %d floats at byte %d: %v", len(v), off, err)
	}
}

func download(t *testing.T, d gpuhost.Device, b gpuhost.Buffer, off, n int) []float32 {
	t.Helper()
	dst := make([]byte, 4*n)
	if err := d.Download(dst, b, off); err != nil {
		t.Fatalf("Download of %d floats at byte %d: %v", n, off, err)
	}
	return toFloats(dst)
}

// random returns n floats in [-1, 1) from a fixed seed.
func random(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float32, n)
	for i := range v {
		v[i] = 2*r.Float32() - 1
	}
	return v
}

// run records a sequence, launches it once and waits: the first error of
// the three (a device may check ops when recording or when launching).
func run(d gpuhost.Device, name string, encode func(gpuhost.Encoder) error) error {
	seq, err := d.Record(name, encode)
	if err != nil {
		return err
	}
	if err := seq.Launch(); err != nil {
		return err
	}
	return d.Sync()
}

// near compares got with want elementwise: |got-want| <= tol·(1+|want|).
func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		diff := math.Abs(float64(got[i]) - float64(want[i]))
		if !(diff <= tol*(1+math.Abs(float64(want[i])))) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values wrong", what, bad, len(want))
	}
}

func kernel(name string) Kernel {
	for _, k := range Kernels() {
		if k.Info.Name == name {
			return k
		}
	}
	panic("gpuhosttest: no kernel " + name)
}

func testIdentity(t *testing.T, s Suite) {
	d := open(t, s)
	if d.Name() == "" {
		t.Error("Name is empty")
	}
	facts := d.Facts()
	if len(facts) == 0 {
		t.Error("Facts is empty")
	}
	for i, f := range facts {
		if f.Key == "" || f.Value == "" {
			t.Errorf("fact %d: %q = %q: empty key or value", i, f.Key, f.Value)
		}
	}
}

func testAllocZeroed(t *testing.T, s Suite) {
	d := open(t, s)
	for _, n := range []int{4, 1000, 1<<20 + 12} {
		b := alloc(t, d, fmt.Sprintf("zeroed-%d", n), n)
		got := make([]byte, n)
		if err := d.Download(got, b, 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != 0 {
				t.Fatalf("new %d-byte buffer: byte %d is %#x, want 0", n, i, v)
			}
		}
		// Memory given back and taken again must be zeroed again.
		ones := make([]byte, n)
		for i := range ones {
			ones[i] = 0xFF
		}
		if err := d.Upload(b, 0, ones); err != nil {
			t.Fatal(err)
		}
		if err := d.Free(b); err != nil {
			t.Fatalf("Free: %v", err)
		}
		b = alloc(t, d, fmt.Sprintf("again-%d", n), n)
		if err := d.Download(got, b, 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != 0 {
				t.Fatalf("re-allocated %d-byte buffer: byte %d is %#x, want 0", n, i, v)
			}
		}
	}
	for _, n := range []int{0, -8} {
		if _, err := d.Alloc("bad", n); err == nil {
			t.Errorf("Alloc of %d bytes: no error", n)
		}
	}
}

func testUploadDownload(t *testing.T, s Suite) {
	d := open(t, s)
	b := alloc(t, d, "round-trip", 256)
	pattern := make([]byte, 256)
	for i := range pattern {
		pattern[i] = byte(i*7 + 3)
	}
	if err := d.Upload(b, 0, pattern); err != nil {
		t.Fatal(err)
	}
	patch := []byte("sixteen bytes!!!")
	if err := d.Upload(b, 100, patch); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), pattern...)
	copy(want[100:], patch)
	got := make([]byte, 256)
	if err := d.Download(got, b, 0); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("whole buffer after two uploads:\n got %x\nwant %x", got, want)
	}
	part := make([]byte, 32)
	if err := d.Download(part, b, 92); err != nil {
		t.Fatal(err)
	}
	if string(part) != string(want[92:124]) {
		t.Errorf("bytes [92, 124): got %x, want %x", part, want[92:124])
	}
	for _, c := range []struct {
		what string
		err  error
	}{
		{"Upload past the end", d.Upload(b, 252, make([]byte, 8))},
		{"Upload at a negative offset", d.Upload(b, -4, make([]byte, 4))},
		{"Download past the end", d.Download(make([]byte, 8), b, 250)},
		{"Download at a negative offset", d.Download(make([]byte, 4), b, -4)},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.what)
		}
	}
	if err := d.Download(got, b, 0); err != nil || string(got) != string(want) {
		t.Errorf("refused copies changed the buffer or broke the device (%v)", err)
	}
}

func testHostView(t *testing.T, s Suite) {
	d := open(t, s)
	b := alloc(t, d, "view", 64)
	v := d.HostView(b)
	if v == nil {
		// A discrete GPU: every buffer must say so.
		if d.HostView(alloc(t, d, "view2", 8)) != nil {
			t.Error("HostView is nil for one buffer and not for another")
		}
		return
	}
	if len(v) != b.Len() {
		t.Fatalf("HostView has %d bytes, the buffer %d", len(v), b.Len())
	}
	for i := range v {
		v[i] = byte(i)
	}
	got := make([]byte, 64)
	if err := d.Download(got, b, 0); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != byte(i) {
			t.Fatalf("Download after a HostView write: byte %d is %d, want %d", i, got[i], i)
		}
	}
	if err := d.Upload(b, 8, []byte{200, 201}); err != nil {
		t.Fatal(err)
	}
	if v[8] != 200 || v[9] != 201 {
		t.Errorf("HostView after Upload: bytes 8, 9 are %d, %d, want 200, 201", v[8], v[9])
	}
}

func testSaxpy(t *testing.T, s Suite) {
	d := loaded(t, s)
	k := kernel("conf_saxpy")
	x, y := random(1, saxpyN), random(2, saxpyN)
	a := []float32{1.75}
	// x and y sit at offsets inside larger buffers, so offsets must reach
	// the kernel.
	const xOff, yOff = 64, 4096
	bx := alloc(t, d, "x", xOff+4*saxpyN+12)
	by := alloc(t, d, "y", yOff+4*saxpyN)
	ba := alloc(t, d, "a", 4)
	upload(t, d, bx, xOff, x)
	upload(t, d, by, yOff, y)
	upload(t, d, ba, 0, a)
	err := run(d, "saxpy", func(e gpuhost.Encoder) error {
		return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: bx, Offset: xOff, Bytes: 4 * saxpyN}, {Buf: by, Offset: yOff, Bytes: 4 * saxpyN}, {Buf: ba, Bytes: 4}},
			k.Groups, k.Threadgroup)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{x, append([]float32(nil), y...), a}
	k.Reference(want)
	near(t, "y", download(t, d, by, yOff, saxpyN), want[1], 1e-6)
	if got := download(t, d, by, 0, yOff/4); !allZero(got) {
		t.Error("saxpy wrote before y's offset")
	}
}

func allZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

func testBlockSum(t *testing.T, s Suite) {
	d := loaded(t, s)
	k := kernel("conf_block_sum")
	x := random(3, sumBlocks*sumPerBlk)
	bx := alloc(t, d, "x", 4*len(x))
	bo := alloc(t, d, "sums", 4*sumBlocks)
	upload(t, d, bx, 0, x)
	err := run(d, "block sum", func(e gpuhost.Encoder) error {
		return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: bx, Bytes: 4 * len(x)}, {Buf: bo, Bytes: 4 * sumBlocks}}, k.Groups, k.Threadgroup)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, sumBlocks)
	for b := range sumBlocks {
		var s float64
		for _, v := range x[b*sumPerBlk : (b+1)*sumPerBlk] {
			s += float64(v)
		}
		want[b] = float32(s)
	}
	near(t, "sums", download(t, d, bo, 0, sumBlocks), want, 1e-4)
}

// matrix is a row-major float32 matrix stored with padded rows at an
// offset in its own buffer.
type matrix struct {
	rows, cols, ld, off int
	v                   []float32 // the whole buffer's contents
}

func newMatrix(seed uint64, rows, cols, pad, off int) matrix {
	m := matrix{rows: rows, cols: cols, ld: cols + pad, off: off}
	m.v = random(seed, off/4+rows*m.ld)
	return m
}

func (m matrix) at(i, j int) float32 { return m.v[m.off/4+i*m.ld+j] }

// gemmReference computes C = alpha·op(A)·op(B) + beta·C in float64.
func gemmReference(ta, tb bool, M, N, K int, alpha, beta float32, a, b, c matrix) []float32 {
	out := append([]float32(nil), c.v...)
	for i := range M {
		for j := range N {
			var s float64
			for l := range K {
				var av, bv float32
				if ta {
					av = a.at(l, i)
				} else {
					av = a.at(i, l)
				}
				if tb {
					bv = b.at(j, l)
				} else {
					bv = b.at(l, j)
				}
				s += float64(av) * float64(bv)
			}
			p := c.off/4 + i*c.ld + j
			out[p] = float32(float64(alpha)*s + float64(beta)*float64(c.v[p]))
		}
	}
	return out
}

// roundedReference is gemmReference on copies of A and B whose elements
// are rounded to p's mantissa (to nearest, ties to even) with its own
// bit arithmetic (not gpuhost's Round, which a device may share), summed
// in float64: a device that sums in float32 differs from it by float32's
// rounding only.
func roundedReference(p gpuhost.Precision, ta, tb bool, M, N, K int, alpha, beta float32, a, b, c matrix) []float32 {
	drop := map[gpuhost.Precision]uint{gpuhost.PrecisionBF16: 16, gpuhost.PrecisionTF32: 13}[p]
	round := func(m matrix) matrix {
		r := m
		r.v = make([]float32, len(m.v))
		for i, x := range m.v {
			u := math.Float32bits(x)
			if drop > 0 && u&0x7fffffff < 0x7f800000 {
				half, keep := uint32(1)<<(drop-1), uint32(1)<<drop
				if rest := u & (keep - 1); rest > half || rest == half && u&keep != 0 {
					u += keep
				}
				u &^= keep - 1
			}
			r.v[i] = math.Float32frombits(u)
		}
		return r
	}
	return gemmReference(ta, tb, M, N, K, alpha, beta, round(a), round(b), c)
}

// testGemmPrecision: on a device that RoundsOperands, a GEMM in a fast
// precision (one product and a strided batched one) matches the reference
// that rounds A and B to that precision and sums exactly, within float32's
// summation error (1e-5 of values about 1 for K = 65), and differs from
// the exact float32 product by more than 10 times that on the same data
// (random values use all 23 bits of their mantissa, so rounding to 8 or
// 11 bits moves each product by about 2^-9 or 2^-12 of itself, and K = 65
// such errors by about 1e-3 or 1e-4): a fake that ignores the precision
// fails. On another device (cuBLAS) the result is within the precision's
// bound of the exact product (2·u·sqrt(K) for values about 1). A precision
// the device does not list must be refused when it is encoded.
func testGemmPrecision(t *testing.T, s Suite) {
	d := open(t, s)
	const M, N, K, batch = 9, 11, 65, 2
	for _, p := range []gpuhost.Precision{gpuhost.PrecisionBF16, gpuhost.PrecisionTF32} {
		t.Run(p.String(), func(t *testing.T) {
			a := newMatrix(uint64(60+p), batch*M, K, 1, 0)
			b := newMatrix(uint64(70+p), batch*N, K, 0, 0) // op(B) = Bᵀ: N×K stored
			c := newMatrix(uint64(80+p), batch*M, N, 0, 0)
			bufs := make([]gpuhost.Buffer, 3)
			for i, m := range []matrix{a, b, c} {
				bufs[i] = alloc(t, d, "abc"[i:i+1], 4*len(m.v))
				upload(t, d, bufs[i], 0, m.v)
			}
			const alpha, beta = 1, 0.5
			err := run(d, "gemm "+p.String(), func(e gpuhost.Encoder) error {
				return e.Gemm(gpuhost.Gemm{TransB: true, M: M, N: N, K: K, Batch: batch, Alpha: alpha, Beta: beta, Precision: p,
					A: gpuhost.Operand{Buf: bufs[0], RowBytes: 4 * a.ld, MatrixBytes: 4 * M * a.ld},
					B: gpuhost.Operand{Buf: bufs[1], MatrixBytes: 4 * N * K},
					C: gpuhost.Operand{Buf: bufs[2], MatrixBytes: 4 * M * N}})
			})
			if !slices.Contains(s.Precisions, p) {
				if err == nil {
					t.Fatalf("a %v GEMM on a device that does not list %v was accepted: it must be refused, never run in another precision", p, p)
				}
				if !strings.Contains(err.Error(), p.String()) {
					t.Errorf("the refusal of a %v GEMM does not name it: %v", p, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := download(t, d, bufs[2], 0, len(c.v))
			want, exact := append([]float32(nil), c.v...), append([]float32(nil), c.v...)
			for i := range batch {
				ai := matrix{rows: M, cols: K, ld: a.ld, off: 4 * i * M * a.ld, v: a.v}
				bi := matrix{rows: N, cols: K, ld: K, off: 4 * i * N * K, v: b.v}
				want = roundedReference(p, false, true, M, N, K, alpha, beta, ai, bi, matrix{rows: M, cols: N, ld: N, off: 4 * i * M * N, v: want})
				exact = gemmReference(false, true, M, N, K, alpha, beta, ai, bi, matrix{rows: M, cols: N, ld: N, off: 4 * i * M * N, v: exact})
			}
			if !s.RoundsOperands {
				// 2·u·sqrt(K) of values about 1 (gpuhost's selftest allows u·sqrt(K) of the outputs' scale).
				bound := map[gpuhost.Precision]float64{gpuhost.PrecisionBF16: 0x1p-8, gpuhost.PrecisionTF32: 0x1p-11}[p] * math.Sqrt(K) * 2
				near(t, "C of the "+p.String()+" products against the exact product", got, exact, bound)
				return
			}
			near(t, "C of the "+p.String()+" products", got, want, 1e-5)
			var far float64
			for i := range got {
				far = math.Max(far, math.Abs(float64(got[i])-float64(exact[i])))
			}
			if far < 1e-4 {
				t.Errorf("the %v GEMM is within %.2g of the exact float32 product: the device did not round its operands", p, far)
			}
		})
	}
}

// bf16Matrix is m's elements rounded to bfloat16 with the suite's own bit
// arithmetic (to nearest, ties to even), as the device reads them: the
// values (for the reference) and their bytes, each row ld elements apart
// (2 bytes each).
func bf16Matrix(m matrix) (matrix, []byte) {
	r := m
	v, b := bf16Values(m.v)
	r.v = v
	return r, b
}

// testGemmBF16Operands: a device that reads bfloat16 A and B computes the
// product of the stored bfloat16 values in float32 (one GEMM for each
// transpose, with padded rows and an offset, in buffers that end where
// the last bfloat16 element does, so that a device sizing the operands
// as float32 refuses or reads past them; and one strided batched GEMM),
// within float32's summation error of the product of the rounded values.
// It refuses what the contract forbids: A and B of different types, a
// bfloat16 C, bfloat16 operands in precision f32, a bfloat16 offset or
// row stride that is not whole elements. A device that does not read
// them refuses every bfloat16 GEMM, naming the type.
func testGemmBF16Operands(t *testing.T, s Suite) {
	d := open(t, s)
	// bf16 stores a matrix's bytes in a buffer of exactly that size.
	bf16 := func(name string, m matrix) (gpuhost.Buffer, matrix) {
		r, b := bf16Matrix(m)
		buf := alloc(t, d, name, len(b))
		if err := d.Upload(buf, 0, b); err != nil {
			t.Fatalf("Upload of %d bfloat16 bytes: %v", len(b), err)
		}
		return buf, r
	}
	if !s.BF16Operands {
		a, _ := bf16("a", newMatrix(90, 4, 4, 0, 0))
		c := alloc(t, d, "c", 64)
		err := run(d, "bf16 operands", func(e gpuhost.Encoder) error {
			return e.Gemm(gpuhost.Gemm{M: 4, N: 4, K: 4, Alpha: 1, Precision: gpuhost.PrecisionBF16,
				A: gpuhost.Operand{Buf: a, Elem: gpuhost.ElemBF16}, B: gpuhost.Operand{Buf: a, Elem: gpuhost.ElemBF16}, C: gpuhost.Operand{Buf: c}})
		})
		if err == nil || !strings.Contains(err.Error(), "bfloat16") {
			t.Fatalf("a GEMM of bfloat16 operands on a device that does not read them: %v, want a refusal that names bfloat16", err)
		}
		return
	}
	const M, N, K = 9, 11, 65
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			t.Run(fmt.Sprintf("transA=%v/transB=%v", ta, tb), func(t *testing.T) {
				ar, ac, br, bc := M, K, K, N
				if ta {
					ar, ac = K, M
				}
				if tb {
					br, bc = N, K
				}
				// A: rows 3 elements longer than the matrix, from element 8.
				abuf, a := bf16("a", newMatrix(91, ar, ac, 3, 4*8))
				bbuf, b := bf16("b", newMatrix(92, br, bc, 0, 0))
				c := newMatrix(93, M, N, 0, 0)
				cbuf := alloc(t, d, "c", 4*len(c.v))
				upload(t, d, cbuf, 0, c.v)
				const alpha, beta = 1.25, -0.5
				err := run(d, "bf16 gemm", func(e gpuhost.Encoder) error {
					return e.Gemm(gpuhost.Gemm{TransA: ta, TransB: tb, M: M, N: N, K: K, Alpha: alpha, Beta: beta, Precision: gpuhost.PrecisionBF16,
						A: gpuhost.Operand{Buf: abuf, Offset: 2 * 8, RowBytes: 2 * a.ld, Elem: gpuhost.ElemBF16},
						B: gpuhost.Operand{Buf: bbuf, Elem: gpuhost.ElemBF16},
						C: gpuhost.Operand{Buf: cbuf}})
				})
				if err != nil {
					t.Fatal(err)
				}
				want := gemmReference(ta, tb, M, N, K, alpha, beta, a, b, c)
				near(t, "C of the bfloat16 operands", download(t, d, cbuf, 0, len(c.v)), want, 1e-5)
			})
		}
	}
	t.Run("batched", func(t *testing.T) {
		const batch = 3
		// Matrices of A 2 elements apart beyond their size; B transposed, packed.
		aStride, bStride := M*K+2, N*K
		abuf, a := bf16("a", newMatrix(94, 1, batch*aStride, 0, 0))
		bbuf, b := bf16("b", newMatrix(95, 1, batch*bStride, 0, 0))
		c := newMatrix(96, 1, batch*M*N, 0, 0)
		cbuf := alloc(t, d, "c", 4*len(c.v))
		upload(t, d, cbuf, 0, c.v)
		err := run(d, "bf16 batched gemm", func(e gpuhost.Encoder) error {
			return e.Gemm(gpuhost.Gemm{TransB: true, M: M, N: N, K: K, Batch: batch, Alpha: 1, Beta: 1, Precision: gpuhost.PrecisionBF16,
				A: gpuhost.Operand{Buf: abuf, MatrixBytes: 2 * aStride, Elem: gpuhost.ElemBF16},
				B: gpuhost.Operand{Buf: bbuf, MatrixBytes: 2 * bStride, Elem: gpuhost.ElemBF16},
				C: gpuhost.Operand{Buf: cbuf, MatrixBytes: 4 * M * N}})
		})
		if err != nil {
			t.Fatal(err)
		}
		want := append([]float32(nil), c.v...)
		for i := range batch {
			ai := matrix{rows: M, cols: K, ld: K, off: 4 * i * aStride, v: a.v}
			bi := matrix{rows: N, cols: K, ld: K, off: 4 * i * bStride, v: b.v}
			want = gemmReference(false, true, M, N, K, 1, 1, ai, bi, matrix{rows: M, cols: N, ld: N, off: 4 * i * M * N, v: want})
		}
		near(t, "C of the batched bfloat16 operands", download(t, d, cbuf, 0, len(c.v)), want, 1e-5)
	})
	t.Run("refused", func(t *testing.T) {
		x, _ := bf16("x", newMatrix(97, 8, 8, 0, 0))
		f := alloc(t, d, "f", 4*64)
		g := func(a, b, c gpuhost.Operand, p gpuhost.Precision) func(gpuhost.Encoder) error {
			return func(e gpuhost.Encoder) error {
				return e.Gemm(gpuhost.Gemm{M: 4, N: 4, K: 4, Alpha: 1, Precision: p, A: a, B: b, C: c})
			}
		}
		b16, f32 := gpuhost.Operand{Buf: x, Elem: gpuhost.ElemBF16}, gpuhost.Operand{Buf: f}
		for _, c := range []struct {
			name   string
			encode func(gpuhost.Encoder) error
			want   string
		}{
			{"A bfloat16, B float32", g(b16, f32, f32, gpuhost.PrecisionBF16), "bfloat16"},
			{"A float32, B bfloat16", g(f32, b16, f32, gpuhost.PrecisionBF16), "bfloat16"},
			{"C bfloat16", g(b16, b16, b16, gpuhost.PrecisionBF16), "bfloat16"},
			{"bfloat16 operands in f32", g(b16, b16, f32, gpuhost.PrecisionF32), "f32"},
			{"bfloat16 operands in tf32", g(b16, b16, f32, gpuhost.PrecisionTF32), "tf32"},
			{"an odd byte offset", g(gpuhost.Operand{Buf: x, Offset: 3, Elem: gpuhost.ElemBF16}, b16, f32, gpuhost.PrecisionBF16), "offset"},
			{"an unknown element type", g(gpuhost.Operand{Buf: x, Elem: 7}, b16, f32, gpuhost.PrecisionBF16), "element type"},
		} {
			if err := run(d, c.name, c.encode); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a refusal containing %q", c.name, err, c.want)
			}
		}
	})
}

// testGemmBatched: a strided batched GEMM is its products one by one, each
// on its own matrices (strides with a gap between matrices, padded rows),
// and nothing between the matrices is written.
func testGemmBatched(t *testing.T, s Suite) {
	d := open(t, s)
	const batch, M, N, K = 3, 6, 5, 7
	for _, tb := range []bool{false, true} {
		br, bc := K, N
		if tb {
			br, bc = N, K
		}
		// Each operand buffer holds batch matrices, matStride floats apart.
		aStride, bStride, cStride := M*(K+1)+4, br*bc+8, M*(N+2)+12
		abuf, bbuf, cbuf := random(50, batch*aStride), random(51, batch*bStride), random(52, batch*cStride)
		bufs := make([]gpuhost.Buffer, 3)
		for i, v := range [][]float32{abuf, bbuf, cbuf} {
			bufs[i] = alloc(t, d, "abc"[i:i+1], 4*len(v))
			upload(t, d, bufs[i], 0, v)
		}
		const alpha, beta = 0.75, 0.25
		err := run(d, "batched gemm", func(e gpuhost.Encoder) error {
			return e.Gemm(gpuhost.Gemm{TransB: tb, M: M, N: N, K: K, Batch: batch, Alpha: alpha, Beta: beta,
				A: gpuhost.Operand{Buf: bufs[0], RowBytes: 4 * (K + 1), MatrixBytes: 4 * aStride},
				B: gpuhost.Operand{Buf: bufs[1], MatrixBytes: 4 * bStride},
				C: gpuhost.Operand{Buf: bufs[2], RowBytes: 4 * (N + 2), MatrixBytes: 4 * cStride}})
		})
		if err != nil {
			t.Fatal(err)
		}
		want := append([]float32(nil), cbuf...)
		for i := range batch {
			a := matrix{rows: M, cols: K, ld: K + 1, off: 4 * i * aStride, v: abuf}
			b := matrix{rows: br, cols: bc, ld: bc, off: 4 * i * bStride, v: bbuf}
			c := matrix{rows: M, cols: N, ld: N + 2, off: 4 * i * cStride, v: want}
			want = gemmReference(false, tb, M, N, K, alpha, beta, a, b, c)
		}
		near(t, fmt.Sprintf("C of %d batched products, transB=%v", batch, tb), download(t, d, bufs[2], 0, len(cbuf)), want, 1e-5)
	}
}

func testGemm(t *testing.T, s Suite) {
	d := open(t, s)
	for _, sz := range []struct{ M, N, K int }{{5, 7, 3}, {33, 17, 65}} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				name := fmt.Sprintf("%dx%dx%d/transA=%v/transB=%v", sz.M, sz.N, sz.K, ta, tb)
				t.Run(name, func(t *testing.T) {
					M, N, K := sz.M, sz.N, sz.K
					ar, ac := M, K
					if ta {
						ar, ac = K, M
					}
					br, bc := K, N
					if tb {
						br, bc = N, K
					}
					a := newMatrix(10, ar, ac, 3, 16)
					b := newMatrix(11, br, bc, 0, 0)
					c := newMatrix(12, M, N, 5, 32)
					bufs := make([]gpuhost.Buffer, 3)
					for i, m := range []matrix{a, b, c} {
						bufs[i] = alloc(t, d, "abc"[i:i+1], 4*len(m.v))
						upload(t, d, bufs[i], 0, m.v)
					}
					const alpha, beta = 1.5, -0.5
					err := run(d, "gemm "+name, func(e gpuhost.Encoder) error {
						return e.Gemm(gpuhost.Gemm{TransA: ta, TransB: tb, M: M, N: N, K: K, Alpha: alpha, Beta: beta,
							A: gpuhost.Operand{Buf: bufs[0], Offset: a.off, RowBytes: 4 * a.ld},
							B: gpuhost.Operand{Buf: bufs[1], Offset: b.off}, // packed rows
							C: gpuhost.Operand{Buf: bufs[2], Offset: c.off, RowBytes: 4 * c.ld}})
					})
					if err != nil {
						t.Fatal(err)
					}
					want := gemmReference(ta, tb, M, N, K, alpha, beta, a, b, c)
					// The whole buffer: C's padding must be left alone.
					near(t, "C", download(t, d, bufs[2], 0, len(c.v)), want, 1e-5)
				})
			}
		}
	}
}

func testKernelThenGemm(t *testing.T, s Suite) {
	d := loaded(t, s)
	k := kernel("conf_accumulate")
	// acc (16x16) += x, then C = acc·B: the GEMM must see the kernel's result.
	x, acc0 := random(20, accN), random(21, accN)
	bm := newMatrix(22, 16, 16, 0, 0)
	bx := alloc(t, d, "x", 4*accN)
	bacc := alloc(t, d, "acc", 4*accN)
	bb := alloc(t, d, "B", 4*len(bm.v))
	bc := alloc(t, d, "C", 4*256)
	upload(t, d, bx, 0, x)
	upload(t, d, bacc, 0, acc0)
	upload(t, d, bb, 0, bm.v)
	err := run(d, "kernel then GEMM", func(e gpuhost.Encoder) error {
		if err := e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: bx, Bytes: 4 * accN}, {Buf: bacc, Bytes: 4 * accN}}, k.Groups, k.Threadgroup); err != nil {
			return err
		}
		return e.Gemm(gpuhost.Gemm{M: 16, N: 16, K: 16, Alpha: 1, A: gpuhost.Operand{Buf: bacc}, B: gpuhost.Operand{Buf: bb}, C: gpuhost.Operand{Buf: bc}})
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := make([]float32, accN)
	for i := range sum {
		sum[i] = acc0[i] + x[i]
	}
	am := matrix{rows: 16, cols: 16, ld: 16, v: sum}
	cm := matrix{rows: 16, cols: 16, ld: 16, v: make([]float32, 256)}
	near(t, "C", download(t, d, bc, 0, 256), gemmReference(false, false, 16, 16, 16, 1, 0, am, bm, cm), 1e-5)
}

func testReplay(t *testing.T, s Suite) {
	d := loaded(t, s)
	k := kernel("conf_accumulate")
	x1, x2 := random(30, accN), random(31, accN)
	bx := alloc(t, d, "x", 4*accN)
	bacc := alloc(t, d, "acc", 4*accN)
	upload(t, d, bx, 0, x1)
	seq, err := d.Record("accumulate", func(e gpuhost.Encoder) error {
		return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: bx, Bytes: 4 * accN}, {Buf: bacc, Bytes: 4 * accN}}, k.Groups, k.Threadgroup)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := download(t, d, bacc, 0, accN); !allZero(got) {
		t.Fatal("Record ran the sequence: acc changed before any Launch")
	}
	launch := func(n int) {
		t.Helper()
		for range n {
			if err := seq.Launch(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	launch(3)
	want := make([]float32, accN)
	for i := range want {
		want[i] = x1[i] + x1[i] + x1[i]
	}
	near(t, "acc after 3 launches", download(t, d, bacc, 0, accN), want, 1e-6)
	// New values uploaded between launches are what the replays read.
	upload(t, d, bx, 0, x2)
	launch(2)
	for i := range want {
		want[i] = want[i] + x2[i] + x2[i]
	}
	near(t, "acc after 2 more launches with new x", download(t, d, bacc, 0, accN), want, 1e-6)
}

// testCall: Call uploads, runs the sequence and downloads in one call, so
// that each call's outputs are of its own inputs; transfers outside a
// buffer are refused.
func testCall(t *testing.T, s Suite) {
	d := loaded(t, s)
	c, ok := d.(gpuhost.Caller)
	if !ok {
		t.Fatalf("%T does not implement gpuhost.Caller", d)
	}
	k := kernel("conf_accumulate")
	bx := alloc(t, d, "x", 4*accN)
	bacc := alloc(t, d, "acc", 4*accN)
	seq, err := d.Record("accumulate", func(e gpuhost.Encoder) error {
		return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: bx, Bytes: 4 * accN}, {Buf: bacc, Bytes: 4 * accN}}, k.Groups, k.Threadgroup)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, accN)
	for i, x := range [][]float32{random(40, accN), random(41, accN), random(42, accN)} {
		// Upload the second half only through Call, the first half before.
		half := accN / 2
		upload(t, d, bx, 0, x[:half])
		got := make([]byte, 4*accN)
		if err := c.Call(seq, []gpuhost.Transfer{{Buf: bx, Off: 4 * half, Host: toBytes(x[half:])}},
			[]gpuhost.Transfer{{Buf: bacc, Host: got}}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		for j := range want {
			want[j] += x[j]
		}
		near(t, fmt.Sprintf("acc after call %d", i), toFloats(got), want, 1e-6)
	}
	over := []gpuhost.Transfer{{Buf: bacc, Off: 4, Host: make([]byte, 4*accN)}}
	if err := c.Call(seq, nil, over); err == nil || !strings.Contains(err.Error(), "acc") {
		t.Errorf("a copy out past the buffer's end: %v, want an error naming the buffer", err)
	}
	if err := c.Call(seq, over, nil); err == nil {
		t.Error("a copy in past the buffer's end: no error")
	}
	near(t, "acc after the refused calls", download(t, d, bacc, 0, accN), want, 1e-6)
}

func testSyncFailure(t *testing.T, s Suite) {
	if s.FailNextLaunch == nil {
		t.Skip("this device cannot be made to fail on demand (Suite.FailNextLaunch is nil)")
	}
	d := s.Open(t)
	defer d.Close() // a failed GPU may refuse to close cleanly; Close must not panic
	src, infos, err := Source(s.Language)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadKernels(src, infos); err != nil {
		t.Fatal(err)
	}
	k := kernel("conf_accumulate")
	bx := alloc(t, d, "x", 4*accN)
	bacc := alloc(t, d, "acc", 4*accN)
	seq, err := d.Record("doomed step", func(e gpuhost.Encoder) error {
		return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: bx, Bytes: 4 * accN}, {Buf: bacc, Bytes: 4 * accN}}, k.Groups, k.Threadgroup)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.FailNextLaunch(d)
	err = seq.Launch()
	if err == nil {
		err = d.Sync()
	}
	if err == nil {
		t.Fatal("a failed launch: Launch and Sync returned no error")
	}
	if !strings.Contains(err.Error(), "doomed step") {
		t.Errorf("the error does not name the failed sequence %q: %v", "doomed step", err)
	}
}

func testBoundsRefused(t *testing.T, s Suite) {
	d := loaded(t, s)
	acc := kernel("conf_accumulate")
	small := alloc(t, d, "small", 4*accN)
	big := alloc(t, d, "big", 8*accN)
	dispatch := func(args ...gpuhost.Arg) func(gpuhost.Encoder) error {
		return func(e gpuhost.Encoder) error {
			return e.Dispatch(acc.Info.Name, args, acc.Groups, acc.Threadgroup)
		}
	}
	gemm := func(g gpuhost.Gemm) func(gpuhost.Encoder) error {
		return func(e gpuhost.Encoder) error { return e.Gemm(g) }
	}
	n := 4 * accN
	for _, c := range []struct {
		what   string
		encode func(gpuhost.Encoder) error
	}{
		{"binding past the end of its buffer", dispatch(gpuhost.Arg{Buf: big, Bytes: n}, gpuhost.Arg{Buf: small, Offset: 4, Bytes: n})},
		{"kernel touching more than the buffer holds from the offset", dispatch(gpuhost.Arg{Buf: big, Bytes: n}, gpuhost.Arg{Buf: small, Offset: 512})},
		{"negative offset", dispatch(gpuhost.Arg{Buf: big, Bytes: n}, gpuhost.Arg{Buf: big, Offset: -4, Bytes: n})},
		{"too few arguments", dispatch(gpuhost.Arg{Buf: big, Bytes: n})},
		{"unknown kernel", func(e gpuhost.Encoder) error {
			return e.Dispatch("conf_no_such_kernel", []gpuhost.Arg{{Buf: big, Bytes: 4}}, 1, 1)
		}},
		{"GEMM C past the end", gemm(gpuhost.Gemm{M: 16, N: 17, K: 16, Alpha: 1, A: gpuhost.Operand{Buf: big}, B: gpuhost.Operand{Buf: big}, C: gpuhost.Operand{Buf: small}})},
		{"GEMM A rows too short", gemm(gpuhost.Gemm{M: 8, N: 8, K: 8, Alpha: 1, A: gpuhost.Operand{Buf: big, RowBytes: 16}, B: gpuhost.Operand{Buf: big}, C: gpuhost.Operand{Buf: small}})},
		{"GEMM of size 0", gemm(gpuhost.Gemm{M: 0, N: 8, K: 8, Alpha: 1, A: gpuhost.Operand{Buf: big}, B: gpuhost.Operand{Buf: big}, C: gpuhost.Operand{Buf: small}})},
	} {
		if err := run(d, c.what, c.encode); err == nil {
			t.Errorf("%s: no error", c.what)
		} else {
			t.Logf("%s: %v", c.what, err)
		}
	}
	// The device still works after the refusals.
	x := random(40, accN)
	upload(t, d, big, 0, x)
	if err := run(d, "after refusals", dispatch(gpuhost.Arg{Buf: big, Bytes: n}, gpuhost.Arg{Buf: small, Bytes: n})); err != nil {
		t.Fatalf("a good sequence after refused ones: %v", err)
	}
	near(t, "acc", download(t, d, small, 0, accN), x, 1e-6)
}

func testMissingKernel(t *testing.T, s Suite) {
	d := open(t, s)
	src, infos, err := Source(s.Language)
	if err != nil {
		t.Fatal(err)
	}
	infos = append(infos, gpuhost.KernelInfo{Name: "conf_missing", ArgBytes: []int{4}})
	err = d.LoadKernels(src, infos)
	if err == nil {
		t.Fatal("LoadKernels with a kernel the source lacks: no error")
	}
	if !strings.Contains(err.Error(), "conf_missing") {
		t.Errorf("the error does not name the missing kernel: %v", err)
	}
}

func testClose(t *testing.T, s Suite) {
	d := s.Open(t)
	src, infos, err := Source(s.Language)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadKernels(src, infos); err != nil {
		t.Fatal(err)
	}
	k := kernel("conf_accumulate")
	bx := alloc(t, d, "x", 4*accN)
	bacc := alloc(t, d, "acc", 4*accN)
	seq, err := d.Record("before close", func(e gpuhost.Encoder) error {
		return e.Dispatch(k.Info.Name, []gpuhost.Arg{{Buf: bx, Bytes: 4 * accN}, {Buf: bacc, Bytes: 4 * accN}}, k.Groups, k.Threadgroup)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := seq.Launch(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the launched work and frees everything.
	if err := d.Close(); err != nil {
		t.Fatalf("Close with a launched sequence: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
