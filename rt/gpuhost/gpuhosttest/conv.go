package gpuhosttest

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// convGeoms are the geometries of the Conv cases: every feature of the
// window once, on sizes that are no multiples of anything.
var convGeoms = []struct {
	name string
	g    gpuhost.ConvGeom
}{
	{"3x3 pad 1", convGeom(2, 3, 7, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1)},
	{"stride 2", convGeom(2, 4, 9, 8, 3, 3, 3, 1, 0, 2, 2, 1, 1, 1)},
	{"1x1", convGeom(3, 5, 4, 5, 6, 1, 1, 0, 0, 1, 1, 1, 1, 1)},
	{"dilation 2", convGeom(1, 3, 9, 9, 4, 3, 2, 2, 1, 1, 1, 2, 2, 1)},
	{"groups 2", convGeom(2, 4, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2)},
	{"depthwise", convGeom(2, 4, 5, 5, 4, 3, 3, 1, 1, 2, 1, 1, 1, 4)},
}

// convGeom is a ConvGeom with its output size computed.
func convGeom(n, c, h, w, oc, kh, kw, ph, pw, sh, sw, dh, dw, groups int) gpuhost.ConvGeom {
	g := gpuhost.ConvGeom{N: n, C: c, H: h, W: w, OC: oc, KH: kh, KW: kw, PH: ph, PW: pw, SH: sh, SW: sw, DH: dh, DW: dw, Groups: groups}
	g.OH = (h+2*ph-dh*(kh-1)-1)/sh + 1
	g.OW = (w+2*pw-dw*(kw-1)-1)/sw + 1
	return g
}

// ConvReference is the product p of g on x, w, y in float64, written into
// a copy of the output's tensor as alpha·product + beta·output (the
// output not read when beta is 0, as cuDNN does), with the inputs rounded
// to drop low mantissa bits first (0: none; 13: TF32; 16: bfloat16) by
// the suite's own bit arithmetic. emit/gpu's tests run their lowered
// library convolutions through it too.
func ConvReference(g gpuhost.ConvGeom, p gpuhost.ConvProduct, x, w, y []float32, alpha, beta float32, drop uint) []float32 {
	round := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for i, f := range v {
			u := math.Float32bits(f)
			if drop > 0 && u&0x7fffffff < 0x7f800000 {
				half, keep := uint32(1)<<(drop-1), uint32(1)<<drop
				if rest := u & (keep - 1); rest > half || rest == half && u&keep != 0 {
					u += keep
				}
				u &^= keep - 1
			}
			out[i] = math.Float32frombits(u)
		}
		return out
	}
	rx, rw, ry := round(x), round(w), round(y)
	var outv []float32
	switch p {
	case gpuhost.ConvForward:
		outv = y
	case gpuhost.ConvInputGrad:
		outv = x
	default:
		outv = w
	}
	acc := make([]float64, len(outv))
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	for n := range g.N {
		for o := range g.OC {
			for i := range g.OH {
				for j := range g.OW {
					yi := ((n*g.OC+o)*g.OH+i)*g.OW + j
					for c0 := range cg {
						ci := o/ocg*cg + c0
						for kh := range g.KH {
							for kw := range g.KW {
								h, v := i*g.SH-g.PH+kh*g.DH, j*g.SW-g.PW+kw*g.DW
								if h < 0 || h >= g.H || v < 0 || v >= g.W {
									continue
								}
								xi, wi := ((n*g.C+ci)*g.H+h)*g.W+v, ((o*cg+c0)*g.KH+kh)*g.KW+kw
								switch p {
								case gpuhost.ConvForward:
									acc[yi] += float64(rx[xi]) * float64(rw[wi])
								case gpuhost.ConvInputGrad:
									acc[xi] += float64(ry[yi]) * float64(rw[wi])
								default:
									acc[wi] += float64(ry[yi]) * float64(rx[xi])
								}
							}
						}
					}
				}
			}
		}
	}
	out := make([]float32, len(outv))
	for i := range out {
		v := float64(alpha) * acc[i]
		if beta != 0 {
			v += float64(beta) * float64(outv[i])
		}
		out[i] = float32(v)
	}
	return out
}

// convRun uploads x, w, y (at byte offset off of their own buffers),
// records and runs one Conv, and returns the output tensor and the error.
func convRun(t *testing.T, d gpuhost.Device, c gpuhost.Conv, off int, x, w, y []float32) ([]float32, error) {
	t.Helper()
	var bufs [3]gpuhost.Buffer
	for i, v := range [][]float32{x, w, y} {
		bufs[i] = alloc(t, d, "xwy"[i:i+1], off+4*len(v))
		upload(t, d, bufs[i], off, v)
	}
	c.X = gpuhost.Tensor{Buf: bufs[0], Offset: off}
	c.W = gpuhost.Tensor{Buf: bufs[1], Offset: off}
	c.Y = gpuhost.Tensor{Buf: bufs[2], Offset: off}
	if err := run(d, fmt.Sprintf("%v convolution", c.Product), func(e gpuhost.Encoder) error { return e.Conv(c) }); err != nil {
		return nil, err
	}
	i := map[gpuhost.ConvProduct]int{gpuhost.ConvForward: 2, gpuhost.ConvInputGrad: 0, gpuhost.ConvWeightGrad: 1}[c.Product]
	return download(t, d, bufs[i], off, len([][]float32{x, w, y}[i])), nil
}

var convProducts = []gpuhost.ConvProduct{gpuhost.ConvForward, gpuhost.ConvInputGrad, gpuhost.ConvWeightGrad}

// testConv: a device with library convolutions (Suite.Conv) computes each
// product of each geometry in f32 within float32's summation error of the
// float64 reference (tensors at an offset in their buffers, Alpha 1.5 and
// Beta 1, which adds to the output, and Beta 0 over an output of NaNs,
// which must not be read); in each fast precision it lists (ConvPrecisions)
// as Gemm's precisions are held (the rounded reference and a visible
// difference from f32 on a device that RoundsOperands, else the error
// bound); and it refuses the precisions it does not list, float32
// tensors in precision bf16 (a bf16 Conv reads bfloat16 tensors:
// testConvBF16), bfloat16 tensors beside a float32 one, a geometry whose
// output size disagrees with its window, and a tensor past its buffer. A
// device without them refuses every Conv with an error that says so.
func testConv(t *testing.T, s Suite) {
	d := open(t, s)
	g0 := convGeoms[0].g
	xs, ws, ys := g0.Sizes()
	if !s.Conv {
		_, err := convRun(t, d, gpuhost.Conv{Geom: g0, Alpha: 1}, 0, random(1, xs), random(2, ws), random(3, ys))
		if err == nil || !strings.Contains(err.Error(), "convolution") {
			t.Fatalf("a Conv on a device without library convolutions: %v, want a refusal that names convolutions", err)
		}
		return
	}
	for _, cg := range convGeoms {
		g := cg.g
		xs, ws, ys := g.Sizes()
		for _, p := range convProducts {
			t.Run(cg.name+"/"+p.String(), func(t *testing.T) {
				x, w, y := random(11, xs), random(12, ws), random(13, ys)
				got, err := convRun(t, d, gpuhost.Conv{Geom: g, Product: p, Alpha: 1.5, Beta: 1}, 16, x, w, y)
				if err != nil {
					t.Fatal(err)
				}
				near(t, p.String(), got, ConvReference(g, p, x, w, y, 1.5, 1, 0), 1e-5)
				// Beta 0: the output's old values (NaN) are not read.
				nan := func(n int) []float32 {
					v := make([]float32, n)
					for i := range v {
						v[i] = float32(math.NaN())
					}
					return v
				}
				ins := [][]float32{x, w, y}
				oi := map[gpuhost.ConvProduct]int{gpuhost.ConvForward: 2, gpuhost.ConvInputGrad: 0, gpuhost.ConvWeightGrad: 1}[p]
				ins[oi] = nan(len(ins[oi]))
				got, err = convRun(t, d, gpuhost.Conv{Geom: g, Product: p, Alpha: 1}, 0, ins[0], ins[1], ins[2])
				if err != nil {
					t.Fatal(err)
				}
				zero := [][]float32{x, w, y}
				zero[oi] = make([]float32, len(zero[oi]))
				near(t, p.String()+" with Beta 0", got, ConvReference(g, p, zero[0], zero[1], zero[2], 1, 0, 0), 1e-5)
			})
		}
	}
	for _, p := range []gpuhost.Precision{gpuhost.PrecisionTF32} {
		t.Run("precision "+p.String(), func(t *testing.T) {
			// Long sums (C·KH·KW = 72 and N·OH·OW = 98) so that rounding
			// shows, as in GemmPrecision.
			g := convGeom(2, 8, 7, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1)
			xs, ws, ys := g.Sizes()
			x, w, y := random(21, xs), random(22, ws), random(23, ys)
			for _, pr := range convProducts {
				got, err := convRun(t, d, gpuhost.Conv{Geom: g, Product: pr, Alpha: 1, Precision: p}, 0, x, w, y)
				if !slices.Contains(s.ConvPrecisions, p) {
					if err == nil || !strings.Contains(err.Error(), p.String()) {
						t.Fatalf("a %v %v convolution on a device that does not list %v: %v, want a refusal naming it", p, pr, p, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				drop := map[gpuhost.Precision]uint{gpuhost.PrecisionBF16: 16, gpuhost.PrecisionTF32: 13}[p]
				exact := ConvReference(g, pr, x, w, y, 1, 0, 0)
				if !s.RoundsOperands {
					bound := map[gpuhost.Precision]float64{gpuhost.PrecisionBF16: 0x1p-8, gpuhost.PrecisionTF32: 0x1p-11}[p] * math.Sqrt(98) * 2
					near(t, pr.String()+" against the exact product", got, exact, bound)
					continue
				}
				near(t, pr.String(), got, ConvReference(g, pr, x, w, y, 1, 0, drop), 1e-5)
				var far float64
				for i := range got {
					far = math.Max(far, math.Abs(float64(got[i])-float64(exact[i])))
				}
				if far < 1e-4 {
					t.Errorf("the %v %v convolution is within %.2g of the exact float32 one: the device did not round its operands", p, pr, far)
				}
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		bad := g0
		bad.OH++
		small := alloc(t, d, "small", 64)
		x, w, y := alloc(t, d, "x", 4*xs), alloc(t, d, "w", 4*ws), alloc(t, d, "y", 4*ys)
		ok := gpuhost.Conv{Geom: g0, Alpha: 1, X: gpuhost.Tensor{Buf: x}, W: gpuhost.Tensor{Buf: w}, Y: gpuhost.Tensor{Buf: y}}
		for _, c := range []struct {
			name string
			edit func(c *gpuhost.Conv)
			want string
		}{
			{"an output size the window does not give", func(c *gpuhost.Conv) { c.Geom = bad }, "window"},
			{"channels that do not split into the groups", func(c *gpuhost.Conv) { c.Geom.Groups = 2 }, "groups"},
			{"bfloat16 tensors beside a float32 one", func(c *gpuhost.Conv) { c.X.Elem, c.W.Elem = gpuhost.ElemBF16, gpuhost.ElemBF16 }, "bfloat16"},
			{"float32 tensors in precision bf16", func(c *gpuhost.Conv) { c.Precision = gpuhost.PrecisionBF16 }, "bf16"},
			{"an unknown product", func(c *gpuhost.Conv) { c.Product = 9 }, "product"},
			{"x past its buffer", func(c *gpuhost.Conv) { c.X.Buf = small }, "small"},
			{"y at an offset past its buffer", func(c *gpuhost.Conv) { c.Y.Offset = 4 }, "offset"},
		} {
			cv := ok
			c.edit(&cv)
			err := run(d, c.name, func(e gpuhost.Encoder) error { return e.Conv(cv) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a refusal containing %q", c.name, err, c.want)
			}
		}
	})
}

// bf16Values is v rounded to bfloat16 with the suite's own bit arithmetic
// (to nearest, ties to even; a quiet NaN stays one), as the values (for
// the reference) and as the bytes a device reads, 2 an element.
func bf16Values(v []float32) ([]float32, []byte) {
	r := make([]float32, len(v))
	b := make([]byte, 2*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		if rest := u & 0xffff; rest > 0x8000 || rest == 0x8000 && u&0x10000 != 0 {
			u += 0x10000
		}
		binary.LittleEndian.PutUint16(b[2*i:], uint16(u>>16))
		r[i] = math.Float32frombits(u &^ 0xffff)
	}
	return r, b
}

// convRunBF16 stores x, w, y as bfloat16 at byte offset off of buffers
// that end where their last element does (a device that sized them as
// float32 refuses them or reads past them), records and runs one Conv of
// bfloat16 tensors, and returns its output tensor decoded, and the error.
func convRunBF16(t *testing.T, d gpuhost.Device, c gpuhost.Conv, off int, x, w, y []float32) ([]float32, error) {
	t.Helper()
	var bufs [3]gpuhost.Buffer
	for i, v := range [][]float32{x, w, y} {
		_, b := bf16Values(v)
		bufs[i] = alloc(t, d, "xwy"[i:i+1], off+len(b))
		if err := d.Upload(bufs[i], off, b); err != nil {
			t.Fatalf("Upload of %d bfloat16 bytes at byte %d: %v", len(b), off, err)
		}
	}
	c.X = gpuhost.Tensor{Buf: bufs[0], Offset: off, Elem: gpuhost.ElemBF16}
	c.W = gpuhost.Tensor{Buf: bufs[1], Offset: off, Elem: gpuhost.ElemBF16}
	c.Y = gpuhost.Tensor{Buf: bufs[2], Offset: off, Elem: gpuhost.ElemBF16}
	if err := run(d, fmt.Sprintf("bf16 %v convolution", c.Product), func(e gpuhost.Encoder) error { return e.Conv(c) }); err != nil {
		return nil, err
	}
	i := map[gpuhost.ConvProduct]int{gpuhost.ConvForward: 2, gpuhost.ConvInputGrad: 0, gpuhost.ConvWeightGrad: 1}[c.Product]
	raw := make([]byte, 2*len([][]float32{x, w, y}[i]))
	if err := d.Download(raw, bufs[i], off); err != nil {
		t.Fatalf("Download of %d bfloat16 bytes at byte %d: %v", len(raw), off, err)
	}
	out := make([]float32, len(raw)/2)
	for j := range out {
		out[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*j:])) << 16)
	}
	return out, nil
}

// bf16Violations counts the elements of got farther from want than a
// bfloat16 output allows: half a bfloat16 unit in the last place of want
// (2⁻⁸ of it), for the rounding of the stored result, plus 1e-5·(1+|want|)
// for float32 sums in another order, plus, where product is not nil,
// half a unit of the product's element (Alpha·product rounded to
// bfloat16 before Beta·output is added, which the contract allows); it
// reports the first few when report is set.
func bf16Violations(t *testing.T, what string, got, want, product []float32, report bool) int {
	t.Helper()
	return violations(t, what, got, want, report, func(w float64, i int) float64 {
		bound := 0x1p-8*w + 1e-5*(1+w)
		if product != nil {
			bound += 0x1p-8 * math.Abs(float64(product[i]))
		}
		return bound
	})
}

// testConvBF16: a device whose library convolutions read bfloat16 tensors
// (Suite.ConvBF16) computes each product of each geometry on packed
// bfloat16 X, W and Y in precision bf16 as the product of the stored
// values summed in float32, Alpha·product + Beta·output stored rounded
// to bfloat16: within half a bfloat16 unit of the float64 reference on
// the rounded operands plus float32's summation error, with Beta 1 (the
// old output read as bfloat16, tensors at an offset in buffers that end
// where they do; half a unit of Alpha·product more, as on an H200
// cuDNN's input gradient rounds the product before the sum) and with
// Beta 0 over an output of NaNs, which must not be read. On long sums its result is NOT, within that tolerance, the
// float32 product of the operands before they were rounded (so the case
// tells a bfloat16 convolution from a float32 one). It refuses what the
// contract forbids: a mix of bfloat16 and float32 tensors, bfloat16
// tensors in f32 or tf32, an unknown element type, an offset that is not
// whole elements, and a bfloat16 tensor past its buffer. A device with
// library convolutions that does not read bfloat16 refuses every
// bfloat16 Conv, naming the type; one without library convolutions
// refuses it as every Conv.
func testConvBF16(t *testing.T, s Suite) {
	d := open(t, s)
	g0 := convGeoms[0].g
	xs, ws, ys := g0.Sizes()
	if !s.Conv || !s.ConvBF16 {
		_, err := convRunBF16(t, d, gpuhost.Conv{Geom: g0, Alpha: 1, Precision: gpuhost.PrecisionBF16}, 0, random(1, xs), random(2, ws), random(3, ys))
		refused(t, s, err, "bfloat16", "a bfloat16 Conv on a device that does not read bfloat16 tensors")
		return
	}
	nan := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(0x7fc00000) // a quiet NaN, exact in bfloat16
		}
		return v
	}
	outIndex := map[gpuhost.ConvProduct]int{gpuhost.ConvForward: 2, gpuhost.ConvInputGrad: 0, gpuhost.ConvWeightGrad: 1}
	for _, cg := range convGeoms {
		g := cg.g
		xs, ws, ys := g.Sizes()
		for _, p := range convProducts {
			t.Run(cg.name+"/"+p.String(), func(t *testing.T) {
				x, _ := bf16Values(random(31, xs))
				w, _ := bf16Values(random(32, ws))
				y, _ := bf16Values(random(33, ys))
				got, err := convRunBF16(t, d, gpuhost.Conv{Geom: g, Product: p, Alpha: 1.5, Beta: 1, Precision: gpuhost.PrecisionBF16}, 16, x, w, y)
				if err != nil {
					t.Fatal(err)
				}
				bf16Violations(t, p.String()+" with Beta 1", got, ConvReference(g, p, x, w, y, 1.5, 1, 0), ConvReference(g, p, x, w, y, 1.5, 0, 0), true)
				ins := [][]float32{x, w, y}
				ins[outIndex[p]] = nan(len(ins[outIndex[p]]))
				got, err = convRunBF16(t, d, gpuhost.Conv{Geom: g, Product: p, Alpha: 1, Precision: gpuhost.PrecisionBF16}, 0, ins[0], ins[1], ins[2])
				if err != nil {
					t.Fatal(err)
				}
				bf16Violations(t, p.String()+" with Beta 0", got, ConvReference(g, p, ins[0], ins[1], ins[2], 1, 0, 0), nil, true)
			})
		}
	}
	t.Run("not float32", func(t *testing.T) {
		// Long sums (C·KH·KW = 72 and N·OH·OW = 98), as in testConv's
		// precisions: the operands' rounding to bfloat16 shows.
		g := convGeom(2, 8, 7, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1)
		xs, ws, ys := g.Sizes()
		x, w, y := random(41, xs), random(42, ws), random(43, ys)
		rx, _ := bf16Values(x)
		rw, _ := bf16Values(w)
		ry, _ := bf16Values(y)
		for _, p := range convProducts {
			got, err := convRunBF16(t, d, gpuhost.Conv{Geom: g, Product: p, Alpha: 1, Precision: gpuhost.PrecisionBF16}, 0, x, w, y)
			if err != nil {
				t.Fatal(err)
			}
			bf16Violations(t, p.String(), got, ConvReference(g, p, rx, rw, ry, 1, 0, 0), nil, true)
			if bf16Violations(t, p.String(), got, ConvReference(g, p, x, w, y, 1, 0, 0), nil, false) == 0 {
				t.Errorf("the bf16 %v convolution is within a bfloat16 output's tolerance of the float32 one of the unrounded operands: the case cannot tell them apart", p)
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		b16 := func(label string, n int) gpuhost.Tensor {
			return gpuhost.Tensor{Buf: alloc(t, d, label, 2*n), Elem: gpuhost.ElemBF16}
		}
		x, w, y := b16("x", xs), b16("w", ws), b16("y", ys)
		f32 := gpuhost.Tensor{Buf: alloc(t, d, "f", 4*max(xs, ws, ys))}
		short := b16("short", ws-1)
		ok := gpuhost.Conv{Geom: g0, Alpha: 1, Precision: gpuhost.PrecisionBF16, X: x, W: w, Y: y}
		for _, c := range []struct {
			name string
			edit func(c *gpuhost.Conv)
			want string
		}{
			{"X bfloat16, W and Y float32", func(c *gpuhost.Conv) { c.W, c.Y = f32, f32 }, "X bfloat16"},
			{"Y float32", func(c *gpuhost.Conv) { c.Y = f32 }, "Y float32"},
			{"bfloat16 tensors in f32", func(c *gpuhost.Conv) { c.Precision = gpuhost.PrecisionF32 }, "f32"},
			{"bfloat16 tensors in tf32", func(c *gpuhost.Conv) { c.Precision = gpuhost.PrecisionTF32 }, "tf32"},
			{"an unknown element type", func(c *gpuhost.Conv) { c.W.Elem = 7 }, "element type"},
			{"an odd byte offset", func(c *gpuhost.Conv) { c.X.Offset = 3 }, "offset"},
			{"w past its buffer", func(c *gpuhost.Conv) { c.W = short }, "short"},
		} {
			cv := ok
			c.edit(&cv)
			err := run(d, c.name, func(e gpuhost.Encoder) error { return e.Conv(cv) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a refusal containing %q", c.name, err, c.want)
			}
		}
	})
}

// NCHWToNHWC is v, a packed NCHW tensor of n images of c channels h×w,
// stored channels-last (element (i, ci, y, x) at ((i·h + y)·w + x)·c +
// ci); NHWCToNCHW is its inverse. A channels-last Conv is held to
// ConvReference on its tensors so transposed. A filter is such a tensor
// of OC images of C/Groups channels KH×KW: KCRSToKRSC and KRSCToKCRS
// transpose it so.
func NCHWToNHWC(v []float32, n, c, h, w int) []float32 {
	out := make([]float32, len(v))
	for i := range n {
		for ci := range c {
			for y := range h {
				for x := range w {
					out[((i*h+y)*w+x)*c+ci] = v[((i*c+ci)*h+y)*w+x]
				}
			}
		}
	}
	return out
}

// NHWCToNCHW is NCHWToNHWC's inverse: v, a packed channels-last tensor
// of n images of c channels h×w, stored NCHW.
func NHWCToNCHW(v []float32, n, c, h, w int) []float32 {
	out := make([]float32, len(v))
	for i := range n {
		for ci := range c {
			for y := range h {
				for x := range w {
					out[((i*c+ci)*h+y)*w+x] = v[((i*h+y)*w+x)*c+ci]
				}
			}
		}
	}
	return out
}

// KCRSToKRSC is w, a packed KCRS filter of geometry g
// [OC, C/Groups, KH, KW], stored KRSC [OC, KH, KW, C/Groups] (element
// (o, c, kh, kw) at ((o·KH + kh)·KW + kw)·(C/Groups) + c), the filter
// of a channels-last Conv; KRSCToKCRS is its inverse.
func KCRSToKRSC(w []float32, g gpuhost.ConvGeom) []float32 {
	return NCHWToNHWC(w, g.OC, g.C/g.Groups, g.KH, g.KW)
}

// KRSCToKCRS is KCRSToKRSC's inverse: w, a KRSC filter of geometry g,
// stored KCRS.
func KRSCToKCRS(w []float32, g gpuhost.ConvGeom) []float32 {
	return NHWCToNCHW(w, g.OC, g.C/g.Groups, g.KH, g.KW)
}

// ConvReferenceNHWC is ConvReference of a channels-last Conv
// (Conv.NHWC): x and y are channels-last, w is KRSC, and so is the
// output's tensor it returns. It is ConvReference on the three
// transposed to NCHW and KCRS, its output transposed back.
func ConvReferenceNHWC(g gpuhost.ConvGeom, p gpuhost.ConvProduct, x, w, y []float32, alpha, beta float32, drop uint) []float32 {
	return convReferenceLayout(g, p, true, true, x, w, y, alpha, beta, drop)
}

// convReferenceLayout is ConvReference of tensors stored channels-last
// where nhwc (x and y, else NCHW) and krsc (w, else KCRS), its output in
// its own tensor's layout: ConvReferenceNHWC where both are set,
// ConvReference where neither is, and what a device that reads one
// tensor in the wrong layout computes otherwise.
func convReferenceLayout(g gpuhost.ConvGeom, p gpuhost.ConvProduct, nhwc, krsc bool, x, w, y []float32, alpha, beta float32, drop uint) []float32 {
	if nhwc {
		x, y = NHWCToNCHW(x, g.N, g.C, g.H, g.W), NHWCToNCHW(y, g.N, g.OC, g.OH, g.OW)
	}
	if krsc {
		w = KRSCToKCRS(w, g)
	}
	out := ConvReference(g, p, x, w, y, alpha, beta, drop)
	switch {
	case p == gpuhost.ConvForward && nhwc:
		return NCHWToNHWC(out, g.N, g.OC, g.OH, g.OW)
	case p == gpuhost.ConvInputGrad && nhwc:
		return NCHWToNHWC(out, g.N, g.C, g.H, g.W)
	case p == gpuhost.ConvWeightGrad && krsc:
		return KCRSToKRSC(out, g)
	}
	return out
}

// convViolations counts the elements of got outside the tolerance of
// their element type e around want: float32 within 1e-5·(1+|want|), as
// testConv holds f32 products; bfloat16 as bf16Violations allows (with
// product, half a unit of it more). It reports the first few when
// report is set.
func convViolations(t *testing.T, e gpuhost.Elem, what string, got, want, product []float32, report bool) int {
	t.Helper()
	if e == gpuhost.ElemBF16 {
		return bf16Violations(t, what, got, want, product, report)
	}
	return violations(t, what, got, want, report, func(w float64, _ int) float64 { return 1e-5 * (1 + w) })
}

// violations counts the elements of got farther from want than bound(|want
// element|, its index) allows, reporting the first few when report is
// set.
func violations(t *testing.T, what string, got, want []float32, report bool, bound func(w float64, i int) float64) int {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		w := math.Abs(float64(want[i]))
		if diff := math.Abs(float64(got[i]) - float64(want[i])); !(diff <= bound(w, i)) {
			if report && bad < 5 {
				t.Errorf("%s[%d] = %g, want %g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	return bad
}

// refused fails the test unless err is a refusal naming feature, the
// Conv feature the device lacks, or "convolution" on a device without
// library convolutions (what: the call, for the message).
func refused(t *testing.T, s Suite, err error, feature, what string) {
	t.Helper()
	want := feature
	if !s.Conv {
		want = "convolution"
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %v, want a refusal naming %q", what, err, want)
	}
}

// testConvNHWC: a device whose library convolutions read channels-last
// tensors (Suite.ConvNHWC) computes each product of each geometry on
// packed NHWC X and Y and a KRSC W, float32 in f32 and, where it reads
// them (Suite.ConvBF16), bfloat16 in bf16, as ConvReference computes it
// on the tensors transposed to NCHW and KCRS (ConvReferenceNHWC), with
// testConv's and testConvBF16's tolerances: with Alpha 1.5 and Beta 1
// (tensors at an offset in their buffers) and with Beta 0 over an
// output of NaNs, which must not be read. On one device it runs each
// product NCHW and then NHWC on the same values and geometry: each is
// its own layout's product, and the NHWC one is NOT within tolerance of
// the products of the same memory read in another layout: all NCHW,
// X and Y NHWC with W KCRS, or X and Y NCHW with W KRSC (so that a
// device that ignores the flag, keeps one set of descriptors for both
// layouts, or reads one of the tensors in the wrong layout, fails: the
// first check, against the right layout, is then out of tolerance). It
// refuses what it refuses in NCHW: a tensor past its buffer (the bytes
// are the same in both layouts), an output size the window does not
// give, bfloat16 tensors in f32. A device with library convolutions
// that does not read NHWC refuses every channels-last Conv, naming
// NHWC; one without them refuses it as every Conv.
func testConvNHWC(t *testing.T, s Suite) {
	d := open(t, s)
	g0 := convGeoms[0].g
	xs, ws, ys := g0.Sizes()
	if !s.Conv || !s.ConvNHWC {
		_, err := convRun(t, d, gpuhost.Conv{Geom: g0, Alpha: 1, NHWC: true}, 0, random(1, xs), random(2, ws), random(3, ys))
		refused(t, s, err, "NHWC", "a channels-last Conv on a device that does not read NHWC tensors")
		return
	}
	type kind struct {
		e    gpuhost.Elem
		prec gpuhost.Precision
	}
	kinds := []kind{{gpuhost.ElemF32, gpuhost.PrecisionF32}}
	if s.ConvBF16 {
		kinds = append(kinds, kind{gpuhost.ElemBF16, gpuhost.PrecisionBF16})
	}
	// values are n random values, rounded to bfloat16 for bfloat16
	// tensors (the reference then reads what the device stores).
	values := func(k kind, seed uint64, n int) []float32 {
		v := random(seed, n)
		if k.e == gpuhost.ElemBF16 {
			v, _ = bf16Values(v)
		}
		return v
	}
	convRunElem := func(t *testing.T, k kind, c gpuhost.Conv, off int, x, w, y []float32) ([]float32, error) {
		t.Helper()
		c.Precision = k.prec
		if k.e == gpuhost.ElemBF16 {
			return convRunBF16(t, d, c, off, x, w, y)
		}
		return convRun(t, d, c, off, x, w, y)
	}
	nan := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(0x7fc00000) // a quiet NaN, exact in bfloat16
		}
		return v
	}
	outIndex := map[gpuhost.ConvProduct]int{gpuhost.ConvForward: 2, gpuhost.ConvInputGrad: 0, gpuhost.ConvWeightGrad: 1}
	for _, k := range kinds {
		for _, cg := range convGeoms {
			g := cg.g
			xs, ws, ys := g.Sizes()
			for _, p := range convProducts {
				t.Run(fmt.Sprintf("%v/%s/%v", k.e, cg.name, p), func(t *testing.T) {
					x, w, y := values(k, 51, xs), values(k, 52, ws), values(k, 53, ys)
					got, err := convRunElem(t, k, gpuhost.Conv{Geom: g, Product: p, Alpha: 1.5, Beta: 1, NHWC: true}, 16, x, w, y)
					if err != nil {
						t.Fatal(err)
					}
					convViolations(t, k.e, p.String()+" with Beta 1", got, ConvReferenceNHWC(g, p, x, w, y, 1.5, 1, 0), ConvReferenceNHWC(g, p, x, w, y, 1.5, 0, 0), true)
					ins := [][]float32{x, w, y}
					ins[outIndex[p]] = nan(len(ins[outIndex[p]]))
					got, err = convRunElem(t, k, gpuhost.Conv{Geom: g, Product: p, Alpha: 1, NHWC: true}, 0, ins[0], ins[1], ins[2])
					if err != nil {
						t.Fatal(err)
					}
					convViolations(t, k.e, p.String()+" with Beta 0", got, ConvReferenceNHWC(g, p, ins[0], ins[1], ins[2], 1, 0, 0), nil, true)
				})
			}
		}
	}
	t.Run("not NCHW", func(t *testing.T) {
		xs, ws, ys := g0.Sizes()
		for _, k := range kinds {
			x, w, y := values(k, 61, xs), values(k, 62, ws), values(k, 63, ys)
			for _, p := range convProducts {
				what := fmt.Sprintf("%v %v", k.e, p)
				nchw, err := convRunElem(t, k, gpuhost.Conv{Geom: g0, Product: p, Alpha: 1}, 0, x, w, y)
				if err != nil {
					t.Fatal(err)
				}
				convViolations(t, k.e, what+" NCHW", nchw, ConvReference(g0, p, x, w, y, 1, 0, 0), nil, true)
				nhwc, err := convRunElem(t, k, gpuhost.Conv{Geom: g0, Product: p, Alpha: 1, NHWC: true}, 0, x, w, y)
				if err != nil {
					t.Fatal(err)
				}
				convViolations(t, k.e, what+" NHWC after NCHW", nhwc, ConvReferenceNHWC(g0, p, x, w, y, 1, 0, 0), nil, true)
				for _, l := range []struct {
					name       string
					nhwc, krsc bool
				}{
					{"NCHW with a KCRS filter", false, false},
					{"NHWC with a KCRS filter", true, false},
					{"NCHW with a KRSC filter", false, true},
				} {
					if convViolations(t, k.e, what, nhwc, convReferenceLayout(g0, p, l.nhwc, l.krsc, x, w, y, 1, 0, 0), nil, false) == 0 {
						t.Errorf("the channels-last %s convolution is within tolerance of the product of the same memory read %s: the device reads it so, or the case cannot tell the layouts apart", what, l.name)
					}
				}
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		bad := g0
		bad.OH++
		small := alloc(t, d, "small", 64)
		x, w, y := alloc(t, d, "x", 4*xs), alloc(t, d, "w", 4*ws), alloc(t, d, "y", 4*ys)
		ok := gpuhost.Conv{Geom: g0, Alpha: 1, NHWC: true, X: gpuhost.Tensor{Buf: x}, W: gpuhost.Tensor{Buf: w}, Y: gpuhost.Tensor{Buf: y}}
		for _, c := range []struct {
			name string
			edit func(c *gpuhost.Conv)
			want string
		}{
			{"an output size the window does not give", func(c *gpuhost.Conv) { c.Geom = bad }, "window"},
			{"x past its buffer", func(c *gpuhost.Conv) { c.X.Buf = small }, "small"},
			{"y at an offset past its buffer", func(c *gpuhost.Conv) { c.Y.Offset = 4 }, "offset"},
			{"bfloat16 tensors in f32", func(c *gpuhost.Conv) {
				c.X.Elem, c.W.Elem, c.Y.Elem = gpuhost.ElemBF16, gpuhost.ElemBF16, gpuhost.ElemBF16
			}, "f32"},
		} {
			cv := ok
			c.edit(&cv)
			err := run(d, c.name, func(e gpuhost.Encoder) error { return e.Conv(cv) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a refusal containing %q", c.name, err, c.want)
			}
		}
	})
}

// ConvEpilogueReference is a forward Conv's epilogue (gpuhost.Conv.Bias,
// Z and Act) applied in float64 to conv, Alpha·conv(X, W) of geometry g
// (as ConvReference or ConvReferenceNHWC computes it with Beta 0, in
// the layout nhwc says): act(conv + z + bias[channel]) for each element,
// z nil for none. emit/gpu's tests can hold their fused convolutions to
// it too.
func ConvEpilogueReference(g gpuhost.ConvGeom, nhwc bool, conv, bias, z []float32, act gpuhost.ConvAct) []float32 {
	out := make([]float32, len(conv))
	for i, c := range conv {
		v := float64(c) + float64(bias[convChannel(g, nhwc, i)])
		if z != nil {
			v += float64(z[i])
		}
		if act == gpuhost.ConvActReLU {
			v = math.Max(v, 0)
		}
		out[i] = float32(v)
	}
	return out
}

// convChannel is the output channel of element i of Y, of geometry g,
// stored channels-last where nhwc and NCHW otherwise.
func convChannel(g gpuhost.ConvGeom, nhwc bool, i int) int {
	if nhwc {
		return i % g.OC
	}
	return i / (g.OH * g.OW) % g.OC
}

// epilogueViolations counts the elements of got farther from want than
// the epilogue's contract allows, conv (Alpha·conv) and convZ
// (Alpha·conv + Z) being the values a device may round to Y's type
// before adding the rest: for float32, 1e-5·(1 + |want| + |conv|), the
// summation error; for bfloat16, that plus half a bfloat16 unit of each
// of |want|, |conv| and |convZ| (2⁻⁸ of each). It reports the first few
// when report is set.
func epilogueViolations(t *testing.T, e gpuhost.Elem, what string, got, want, conv, convZ []float32, report bool) int {
	t.Helper()
	return violations(t, what, got, want, report, func(w float64, i int) float64 {
		c := math.Abs(float64(conv[i]))
		bound := 1e-5 * (1 + w + c)
		if e == gpuhost.ElemBF16 {
			bound += 0x1p-8 * (w + c + math.Abs(float64(convZ[i])))
		}
		return bound
	})
}

// tensorBytes is v stored as elements of e: float32, or rounded to
// bfloat16 by bf16Values.
func tensorBytes(e gpuhost.Elem, v []float32) []byte {
	if e == gpuhost.ElemBF16 {
		_, b := bf16Values(v)
		return b
	}
	return toBytes(v)
}

// convRunEpilogue stores x, w, bias and z (nil: no Z) as elements of c's
// type (X.Elem, which the caller sets on every tensor) at byte offset
// off of buffers that end where they do, over a Y of NaNs (Beta 0: not
// read), records and runs c with them, and returns Y decoded, and the
// error.
func convRunEpilogue(t *testing.T, d gpuhost.Device, c gpuhost.Conv, off int, x, w, bias, z []float32) ([]float32, error) {
	t.Helper()
	e := c.X.Elem
	_, _, ys := c.Geom.Sizes()
	nan := make([]float32, ys)
	for i := range nan {
		nan[i] = math.Float32frombits(0x7fc00000) // a quiet NaN, exact in bfloat16
	}
	put := func(label string, v []float32) gpuhost.Tensor {
		b := tensorBytes(e, v)
		buf := alloc(t, d, label, off+len(b))
		if err := d.Upload(buf, off, b); err != nil {
			t.Fatalf("Upload of %d %vs at byte %d: %v", len(v), e, off, err)
		}
		return gpuhost.Tensor{Buf: buf, Offset: off, Elem: e}
	}
	c.X, c.W, c.Y, c.Bias = put("x", x), put("w", w), put("y", nan), put("bias", bias)
	if z != nil {
		c.Z = put("z", z)
	}
	if err := run(d, "fused convolution", func(enc gpuhost.Encoder) error { return enc.Conv(c) }); err != nil {
		return nil, err
	}
	raw := make([]byte, e.Size()*ys)
	if err := d.Download(raw, c.Y.Buf, off); err != nil {
		t.Fatalf("Download of %d %vs at byte %d: %v", ys, e, off, err)
	}
	if e == gpuhost.ElemF32 {
		return toFloats(raw), nil
	}
	out := make([]float32, ys)
	for j := range out {
		out[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*j:])) << 16)
	}
	return out, nil
}

// testConvEpilogue: a device whose library convolutions compute a
// forward's epilogue (Suite.ConvEpilogue) computes, for each geometry,
// float32 in f32 and (with ConvBF16) bfloat16 in bf16, NCHW and (with
// ConvNHWC) NHWC, with Z and without, with ReLU and without,
// Y = act(1.5·conv(X, W) + Z + Bias[channel]) over a Y of NaNs (Beta 0:
// not read), tensors at an offset in buffers that end where they do,
// within the contract's tolerance of ConvReference plus the epilogue in
// float64 (ConvEpilogueReference; epilogueViolations' bounds); and its
// result is NOT within that tolerance of the same without the bias, the
// bias of the other layout's channel, without Z (where it has one),
// and without the ReLU (where it has one), so that a device that drops
// one of them fails. Every device refuses an epilogue on either
// gradient, with Beta 1, and a Z without a Bias; a device with library
// convolutions that computes no epilogue refuses every one, naming it,
// and one without library convolutions refuses them as every Conv.
func testConvEpilogue(t *testing.T, s Suite) {
	d := open(t, s)
	g0 := convGeoms[0].g
	xs, ws, ys := g0.Sizes()
	t.Run("refused", func(t *testing.T) {
		x, w, y := alloc(t, d, "x", 4*xs), alloc(t, d, "w", 4*ws), alloc(t, d, "y", 4*ys)
		bias, z := alloc(t, d, "bias", 4*g0.OC), alloc(t, d, "z", 4*ys)
		ok := gpuhost.Conv{Geom: g0, Alpha: 1, X: gpuhost.Tensor{Buf: x}, W: gpuhost.Tensor{Buf: w}, Y: gpuhost.Tensor{Buf: y},
			Bias: gpuhost.Tensor{Buf: bias}, Z: gpuhost.Tensor{Buf: z}, Act: gpuhost.ConvActReLU}
		cases := []struct {
			name string
			edit func(c *gpuhost.Conv)
			want string // on a device that computes epilogues
		}{
			{"an epilogue on the input gradient", func(c *gpuhost.Conv) { c.Product = gpuhost.ConvInputGrad }, "only a forward"},
			{"an epilogue on the weight gradient", func(c *gpuhost.Conv) { c.Product = gpuhost.ConvWeightGrad }, "only a forward"},
			{"an epilogue with Beta 1", func(c *gpuhost.Conv) { c.Beta = 1 }, "Beta"},
			{"Z without Bias", func(c *gpuhost.Conv) { c.Bias, c.Act = gpuhost.Tensor{}, gpuhost.ConvActNone }, "no Bias"},
			{"a ReLU without Bias", func(c *gpuhost.Conv) { c.Bias, c.Z = gpuhost.Tensor{}, gpuhost.Tensor{} }, "no Bias"},
		}
		if !s.ConvEpilogue {
			cases = append(cases, struct {
				name string
				edit func(c *gpuhost.Conv)
				want string
			}{"an epilogue on a device without them", func(*gpuhost.Conv) {}, ""})
		}
		for _, c := range cases {
			cv := ok
			c.edit(&cv)
			err := run(d, c.name, func(e gpuhost.Encoder) error { return e.Conv(cv) })
			want := c.want
			if !s.ConvEpilogue {
				want = "epilogue"
			}
			refused(t, s, err, want, c.name)
		}
	})
	if !s.Conv || !s.ConvEpilogue {
		return
	}
	type kind struct {
		e    gpuhost.Elem
		prec gpuhost.Precision
	}
	kinds := []kind{{gpuhost.ElemF32, gpuhost.PrecisionF32}}
	if s.ConvBF16 {
		kinds = append(kinds, kind{gpuhost.ElemBF16, gpuhost.PrecisionBF16})
	}
	layouts := []bool{false}
	if s.ConvNHWC {
		layouts = append(layouts, true)
	}
	for _, k := range kinds {
		// values are n random values, stored as the device stores them
		// (the reference then reads what the device reads).
		values := func(seed uint64, n int) []float32 {
			v := random(seed, n)
			if k.e == gpuhost.ElemBF16 {
				v, _ = bf16Values(v)
			}
			return v
		}
		for _, nhwc := range layouts {
			for _, cg := range convGeoms {
				g := cg.g
				xs, ws, ys := g.Sizes()
				x, w, bias, zv := values(71, xs), values(72, ws), values(73, g.OC), values(74, ys)
				conv := convReferenceLayout(g, gpuhost.ConvForward, nhwc, nhwc, x, w, make([]float32, ys), 1.5, 0, 0)
				convZ := make([]float32, ys)
				for i := range convZ {
					convZ[i] = conv[i] + zv[i]
				}
				for _, withZ := range []bool{false, true} {
					for _, act := range []gpuhost.ConvAct{gpuhost.ConvActNone, gpuhost.ConvActReLU} {
						t.Run(fmt.Sprintf("%v/NHWC=%v/%s/Z=%v/%v", k.e, nhwc, cg.name, withZ, act), func(t *testing.T) {
							var z []float32
							cz := conv
							if withZ {
								z, cz = zv, convZ
							}
							c := gpuhost.Conv{Geom: g, Alpha: 1.5, Precision: k.prec, NHWC: nhwc, X: gpuhost.Tensor{Elem: k.e}, Act: act}
							got, err := convRunEpilogue(t, d, c, 16, x, w, bias, z)
							if err != nil {
								t.Fatal(err)
							}
							epilogueViolations(t, k.e, "fused forward", got, ConvEpilogueReference(g, nhwc, conv, bias, z, act), conv, cz, true)
							// What a device that drops a part computes.
							wrong := []struct {
								name string
								want []float32
							}{
								{"without the bias", ConvEpilogueReference(g, nhwc, conv, make([]float32, g.OC), z, act)},
								{"with the bias of the other layout's channels", ConvEpilogueReference(g, !nhwc, conv, bias, z, act)},
							}
							if withZ {
								wrong = append(wrong, struct {
									name string
									want []float32
								}{"without Z", ConvEpilogueReference(g, nhwc, conv, bias, nil, act)})
							}
							if act == gpuhost.ConvActReLU {
								wrong = append(wrong, struct {
									name string
									want []float32
								}{"without the ReLU", ConvEpilogueReference(g, nhwc, conv, bias, z, gpuhost.ConvActNone)})
							}
							for _, o := range wrong {
								if epilogueViolations(t, k.e, o.name, got, o.want, conv, cz, false) == 0 {
									t.Errorf("the fused forward is within tolerance of the one %s: the device computes that, or the case cannot tell them apart", o.name)
								}
							}
						})
					}
				}
			}
		}
	}
}
