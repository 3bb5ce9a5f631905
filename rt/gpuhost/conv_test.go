package gpuhost

import (
	"strings"
	"testing"
)

// TestConvCheckElems: Conv.Check takes float32 tensors in f32 and tf32,
// and bfloat16 ones in bf16 on a device that reads them; it refuses every
// other combination with an error that names each tensor's type (a mix),
// the device's (bfloat16 on one that does not read it) or the precision
// (bfloat16 tensors in f32 or tf32, float32 ones in bf16).
func TestConvCheckElems(t *testing.T) {
	g := ConvGeom{N: 2, C: 4, H: 5, W: 5, OC: 6, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 2, OH: 5, OW: 5}
	f32, b16 := ElemF32, ElemBF16
	for _, c := range []struct {
		name      string
		x, w, y   Elem
		prec      Precision
		readsBF16 bool
		want      []string // "" for none: accepted
	}{
		{"float32 in f32", f32, f32, f32, PrecisionF32, false, nil},
		{"float32 in tf32", f32, f32, f32, PrecisionTF32, true, nil},
		{"bfloat16 in bf16", b16, b16, b16, PrecisionBF16, true, nil},
		{"bfloat16 on a device that does not read it", b16, b16, b16, PrecisionBF16, false, []string{"bfloat16", "does not read"}},
		{"X bfloat16 alone", b16, f32, f32, PrecisionBF16, true, []string{"X bfloat16, W float32 and Y float32"}},
		{"W bfloat16 alone", f32, b16, f32, PrecisionBF16, true, []string{"X float32, W bfloat16 and Y float32"}},
		{"Y bfloat16 alone", f32, f32, b16, PrecisionBF16, true, []string{"X float32, W float32 and Y bfloat16"}},
		{"Y float32 alone", b16, b16, f32, PrecisionBF16, true, []string{"X bfloat16, W bfloat16 and Y float32"}},
		{"bfloat16 in f32", b16, b16, b16, PrecisionF32, true, []string{"bfloat16", "precision f32"}},
		{"bfloat16 in tf32", b16, b16, b16, PrecisionTF32, true, []string{"bfloat16", "precision tf32"}},
		{"float32 in bf16", f32, f32, f32, PrecisionBF16, true, []string{"float32", "precision bf16"}},
		{"float32 in bf16 on a float32 device", f32, f32, f32, PrecisionBF16, false, []string{"float32", "precision bf16"}},
		{"an unknown element type", f32, 7, f32, PrecisionF32, true, []string{"tensor W", "element type 7"}},
		{"an unknown precision", f32, f32, f32, 9, true, []string{"precision 9"}},
	} {
		cv := Conv{Geom: g, Alpha: 1, X: Tensor{Elem: c.x}, W: Tensor{Elem: c.w}, Y: Tensor{Elem: c.y}, Precision: c.prec}
		err := cv.Check(ConvSupport{BF16: c.readsBF16})
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted, want a refusal", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

// TestConvCheckNHWC: Conv.Check takes channels-last tensors, in every
// element type and precision it takes NCHW ones in, on a device that
// reads them, and refuses them, naming the layout, on one that does not;
// NCHW Convs are taken by both.
func TestConvCheckNHWC(t *testing.T) {
	g := ConvGeom{N: 2, C: 4, H: 5, W: 5, OC: 6, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 2, OH: 5, OW: 5}
	for _, c := range []struct {
		e    Elem
		prec Precision
	}{{ElemF32, PrecisionF32}, {ElemF32, PrecisionTF32}, {ElemBF16, PrecisionBF16}} {
		for _, nhwc := range []bool{false, true} {
			for _, reads := range []bool{false, true} {
				cv := Conv{Geom: g, Alpha: 1, X: Tensor{Elem: c.e}, W: Tensor{Elem: c.e}, Y: Tensor{Elem: c.e}, Precision: c.prec, NHWC: nhwc}
				err := cv.Check(ConvSupport{BF16: true, NHWC: reads})
				switch {
				case nhwc && !reads && (err == nil || !strings.Contains(err.Error(), "NHWC")):
					t.Errorf("%v in %v, NHWC, on a device that does not read it: %v, want a refusal naming NHWC", c.e, c.prec, err)
				case (!nhwc || reads) && err != nil:
					t.Errorf("%v in %v, NHWC %v, on a device that reads NHWC %v: %v, want it accepted", c.e, c.prec, nhwc, reads, err)
				}
			}
		}
	}
}

// convRecorder is an Encoder that keeps the Convs it is given.
type convRecorder struct{ convs []Conv }

func (r *convRecorder) Dispatch(string, []Arg, int, int) error { return nil }
func (r *convRecorder) Gemm(Gemm) error                        { return nil }
func (r *convRecorder) Conv(c Conv) error                      { r.convs = append(r.convs, c); return nil }

// TestEncodeConvElem: a ConvOp's element type and layout reach its Conv
// (the type each of its three tensors'), with the arenas' buffers and
// the byte offsets; the zero values (a program generated before ConvOp
// had Elem or NHWC) are float32 and NCHW.
func TestEncodeConvElem(t *testing.T) {
	var m Model
	for a := range m.bufs {
		m.bufs[a] = &testBuf{arenaNames[a], 1 << 20}
	}
	g := ConvGeom{N: 1, C: 2, H: 3, W: 3, OC: 2, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1, OH: 3, OW: 3}
	for i, e := range []Elem{ElemF32, ElemBF16, ElemF32, ElemBF16} {
		nhwc := i >= 2
		op := &ConvOp{Geom: g, Product: ConvWeightGrad, X: Bind{ArenaTrainWork, 32, 36}, W: Bind{ArenaState, 64, 8}, Y: Bind{ArenaTrainWork, 128, 36},
			Alpha: 1, Beta: 1, Precision: PrecisionBF16, Elem: e, NHWC: nhwc}
		var r convRecorder
		if err := m.encode(&r, &Op{Conv: op}); err != nil {
			t.Fatal(err)
		}
		if len(r.convs) != 1 {
			t.Fatalf("%v: %d Convs encoded, want 1", e, len(r.convs))
		}
		c := r.convs[0]
		for _, x := range []struct {
			name string
			t    Tensor
			b    Bind
		}{{"X", c.X, op.X}, {"W", c.W, op.W}, {"Y", c.Y, op.Y}} {
			if x.t.Elem != e || x.t.Offset != x.b.Offset || x.t.Buf != m.bufs[x.b.Arena] {
				t.Errorf("%v: tensor %s is %v at %d of %v, want %v at %d of the %s arena", e, x.name, x.t.Elem, x.t.Offset, x.t.Buf, e, x.b.Offset, arenaNames[x.b.Arena])
			}
		}
		if c.Product != op.Product || c.Precision != op.Precision || c.Beta != 1 || c.Geom != g || c.NHWC != nhwc {
			t.Errorf("%v, NHWC %v: encoded %+v, want the op's product, precision, Beta, geometry and layout", e, nhwc, c)
		}
	}
	if (ConvOp{}).Elem != ElemF32 || (ConvOp{}).NHWC {
		t.Errorf("ConvOp's zero Elem is %v and NHWC %v, want float32 and NCHW", (ConvOp{}).Elem, (ConvOp{}).NHWC)
	}
}

// TestConvCheckEpilogue: Conv.Check takes a forward's epilogue (a Bias,
// with or without Z, with or without ReLU) on a device that computes
// one, in float32 and bfloat16, NCHW and NHWC, and refuses, with an
// error that names what disagrees: an epilogue on a device without
// them, on either gradient, with Beta not 0, Z or an activation without
// Bias, an unknown activation (even without Bias), and a Bias or Z of
// another element type than Y's.
func TestConvCheckEpilogue(t *testing.T) {
	g := ConvGeom{N: 2, C: 4, H: 5, W: 5, OC: 6, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 2, OH: 5, OW: 5}
	buf := &testBuf{"b", 1 << 10}
	conv := func(e Elem, prec Precision, nhwc bool) Conv {
		return Conv{Geom: g, Alpha: 1, X: Tensor{Elem: e}, W: Tensor{Elem: e}, Y: Tensor{Elem: e}, Precision: prec, NHWC: nhwc}
	}
	all := ConvSupport{BF16: true, NHWC: true, Epilogue: true}
	for _, k := range []struct {
		e    Elem
		prec Precision
	}{{ElemF32, PrecisionF32}, {ElemF32, PrecisionTF32}, {ElemBF16, PrecisionBF16}} {
		for _, nhwc := range []bool{false, true} {
			for _, z := range []bool{false, true} {
				for _, act := range []ConvAct{ConvActNone, ConvActReLU} {
					c := conv(k.e, k.prec, nhwc)
					c.Bias, c.Act = Tensor{Buf: buf, Elem: k.e}, act
					if z {
						c.Z = Tensor{Buf: buf, Offset: 64, Elem: k.e}
					}
					if err := c.Check(all); err != nil {
						t.Errorf("%v in %v, NHWC %v, Z %v, act %v: %v, want it accepted", k.e, k.prec, nhwc, z, act, err)
					}
					// A device that computes no epilogue refuses it.
					err := c.Check(ConvSupport{BF16: true, NHWC: true})
					if err == nil || !strings.Contains(err.Error(), "epilogue") || !strings.Contains(err.Error(), "do not compute") {
						t.Errorf("%v in %v, NHWC %v, Z %v, act %v, on a device without epilogues: %v, want a refusal naming the epilogue", k.e, k.prec, nhwc, z, act, err)
					}
				}
			}
		}
	}
	for _, c := range []struct {
		name string
		edit func(c *Conv)
		want []string
	}{
		{"the input gradient", func(c *Conv) { c.Product = ConvInputGrad }, []string{"input gradient", "only a forward"}},
		{"the weight gradient", func(c *Conv) { c.Product = ConvWeightGrad }, []string{"weight gradient", "only a forward"}},
		{"Beta 1", func(c *Conv) { c.Beta = 1 }, []string{"Beta 1", "Beta 0"}},
		{"Z without Bias", func(c *Conv) { c.Bias = Tensor{}; c.Z = Tensor{Buf: buf, Elem: ElemBF16} }, []string{"Z but no Bias"}},
		{"ReLU without Bias", func(c *Conv) { c.Bias = Tensor{}; c.Act = ConvActReLU }, []string{"relu but no Bias"}},
		{"an unknown activation", func(c *Conv) { c.Act = 2 }, []string{"activation 2"}},
		{"an unknown activation without Bias", func(c *Conv) { c.Bias = Tensor{}; c.Act = 7 }, []string{"activation 7"}},
		{"a float32 bias on bfloat16 tensors", func(c *Conv) { c.Bias.Elem = ElemF32 }, []string{"Bias is float32 and Y bfloat16"}},
		{"a float32 Z on bfloat16 tensors", func(c *Conv) { c.Z = Tensor{Buf: buf, Elem: ElemF32} }, []string{"Z is float32 and Y bfloat16"}},
	} {
		cv := conv(ElemBF16, PrecisionBF16, true)
		cv.Bias, cv.Act = Tensor{Buf: buf, Elem: ElemBF16}, ConvActReLU
		c.edit(&cv)
		err := cv.Check(all)
		if err == nil {
			t.Errorf("%s: accepted, want a refusal", c.name)
			continue
		}
		for _, w := range append(c.want, "epilogue") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

// TestEncodeConvEpilogue: a ConvOp's Bias and Z reach its Conv as
// tensors of the op's element type at their arenas' buffers and
// offsets, and its Act as it is; nil ones are tensors without a buffer
// (none), so that a program without epilogues encodes plain forwards.
func TestEncodeConvEpilogue(t *testing.T) {
	var m Model
	for a := range m.bufs {
		m.bufs[a] = &testBuf{arenaNames[a], 1 << 20}
	}
	g := ConvGeom{N: 1, C: 2, H: 3, W: 3, OC: 2, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1, OH: 3, OW: 3}
	bias, z := Bind{ArenaState, 256, 4}, Bind{ArenaTrainWork, 512, 36}
	for _, c := range []struct {
		bias, z *Bind
		act     ConvAct
	}{{nil, nil, ConvActNone}, {&bias, nil, ConvActNone}, {&bias, &z, ConvActReLU}, {&bias, nil, ConvActReLU}} {
		op := &ConvOp{Geom: g, X: Bind{ArenaTrainWork, 32, 36}, W: Bind{ArenaState, 64, 8}, Y: Bind{ArenaTrainWork, 128, 36},
			Alpha: 1, Precision: PrecisionBF16, Elem: ElemBF16, NHWC: true, Bias: c.bias, Z: c.z, Act: c.act}
		var r convRecorder
		if err := m.encode(&r, &Op{Conv: op}); err != nil {
			t.Fatal(err)
		}
		if len(r.convs) != 1 {
			t.Fatalf("%d Convs encoded, want 1", len(r.convs))
		}
		cv := r.convs[0]
		for _, x := range []struct {
			name string
			t    Tensor
			b    *Bind
		}{{"Bias", cv.Bias, c.bias}, {"Z", cv.Z, c.z}} {
			switch {
			case x.b == nil && x.t != (Tensor{}):
				t.Errorf("no %s in the op: encoded %+v, want none", x.name, x.t)
			case x.b != nil && (x.t.Buf != m.bufs[x.b.Arena] || x.t.Offset != x.b.Offset || x.t.Elem != ElemBF16):
				t.Errorf("%s: encoded %v at %d of %v, want bfloat16 at %d of the %s arena", x.name, x.t.Elem, x.t.Offset, x.t.Buf, x.b.Offset, arenaNames[x.b.Arena])
			}
		}
		if cv.Act != c.act {
			t.Errorf("Act %v encoded as %v", c.act, cv.Act)
		}
	}
}
