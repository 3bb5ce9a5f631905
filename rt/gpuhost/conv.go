package gpuhost

import "fmt"

// ConvGeom is the geometry of a 2-D convolution (Conv): a batch of N
// images of C channels H×W, OC filters of C/Groups channels KH×KW,
// padding PH, PW, strides SH, SW, dilations DH, DW, and the output's
// OH×OW. Strides, dilations and groups are at least 1 (no zero means 1
// here, unlike the planner's geometry).
type ConvGeom struct {
	N, C, H, W, OC, KH, KW int
	PH, PW, SH, SW, DH, DW int
	Groups, OH, OW         int
}

// ConvProduct is the product of a convolution a Conv computes.
type ConvProduct uint8

// The products of a convolution.
const (
	// ConvForward writes Y from X and W.
	ConvForward ConvProduct = iota
	// ConvInputGrad writes X (dx) from Y (dy) and W.
	ConvInputGrad
	// ConvWeightGrad writes W (dw) from X and Y (dy).
	ConvWeightGrad
	convProductCount
)

var convProductNames = [convProductCount]string{"forward", "input gradient", "weight gradient"}

// String names p for errors ("forward", "input gradient", …).
func (p ConvProduct) String() string {
	if p < convProductCount {
		return convProductNames[p]
	}
	return "unknown convolution product"
}

// ConvAct is the activation of a library convolution's epilogue
// (Conv.Act), applied last: what a batch norm folded into the
// convolution before it is followed by.
type ConvAct uint8

// The activations of an epilogue.
const (
	// ConvActNone applies none (the identity).
	ConvActNone ConvAct = iota
	// ConvActReLU is max(v, 0).
	ConvActReLU
	convActCount
)

var convActNames = [convActCount]string{"none", "relu"}

// String names a for errors ("none", "relu").
func (a ConvAct) String() string {
	if a < convActCount {
		return convActNames[a]
	}
	return fmt.Sprintf("unknown activation %d", uint8(a))
}

// Sizes are the elements of X, W and Y.
func (g ConvGeom) Sizes() (x, w, y int) {
	return g.N * g.C * g.H * g.W, g.OC * (g.C / max(g.Groups, 1)) * g.KH * g.KW, g.N * g.OC * g.OH * g.OW
}

// String is g in one line, for errors.
func (g ConvGeom) String() string {
	s := fmt.Sprintf("%dx%dx%dx%d → %d filters %dx%d, pad %d,%d, stride %d,%d, dilation %d,%d",
		g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.PH, g.PW, g.SH, g.SW, g.DH, g.DW)
	if g.Groups > 1 {
		s += fmt.Sprintf(", %d groups", g.Groups)
	}
	return s + fmt.Sprintf(", out %dx%d", g.OH, g.OW)
}

// Check says what is wrong with g, or nil: every size positive (padding
// at least 0), the channels divisible by the groups, and OH, OW what the
// window gives, (H + 2·PH − DH·(KH−1) − 1)/SH + 1 and its width twin.
func (g ConvGeom) Check() error {
	for _, v := range []struct {
		name string
		v    int
	}{{"N", g.N}, {"C", g.C}, {"H", g.H}, {"W", g.W}, {"OC", g.OC}, {"KH", g.KH}, {"KW", g.KW},
		{"SH", g.SH}, {"SW", g.SW}, {"DH", g.DH}, {"DW", g.DW}, {"Groups", g.Groups}, {"OH", g.OH}, {"OW", g.OW}} {
		if v.v < 1 || v.v > 1<<30 {
			return fmt.Errorf("convolution %v: %s is %d, want at least 1", g, v.name, v.v)
		}
	}
	if g.PH < 0 || g.PW < 0 {
		return fmt.Errorf("convolution %v: negative padding", g)
	}
	if g.C%g.Groups != 0 || g.OC%g.Groups != 0 {
		return fmt.Errorf("convolution %v: %d input and %d output channels do not split into %d groups", g, g.C, g.OC, g.Groups)
	}
	oh := (g.H+2*g.PH-g.DH*(g.KH-1)-1)/g.SH + 1
	ow := (g.W+2*g.PW-g.DW*(g.KW-1)-1)/g.SW + 1
	if oh != g.OH || ow != g.OW {
		return fmt.Errorf("convolution %v: the window gives an output of %dx%d, not %dx%d", g, oh, ow, g.OH, g.OW)
	}
	return nil
}

// ConvSupport is what a device's library convolutions read beyond
// float32 NCHW tensors, for Conv.Check: bfloat16 tensors (in precision
// bf16), channels-last tensors (Conv.NHWC: X and Y NHWC, W KRSC), and
// whether they compute a forward convolution's epilogue (Conv.Bias,
// Conv.Z and Conv.Act) in the same call.
type ConvSupport struct {
	BF16, NHWC bool
	Epilogue   bool
}

// Check checks c's geometry, product, precision, tensors' element types
// and layout against Conv's contract, for a device that reads what
// support says, and returns an error that says what disagrees (which
// tensor is of which type, a layout the device does not read), or nil;
// the device checks the tensors' bytes against its buffers itself.
func (c *Conv) Check(support ConvSupport) error {
	if err := c.Geom.Check(); err != nil {
		return err
	}
	if c.Product >= convProductCount {
		return fmt.Errorf("convolution product %d, which is none of forward, input gradient and weight gradient", c.Product)
	}
	if !c.Precision.Valid() {
		return fmt.Errorf("convolution in precision %d, which is none of f32, bf16 and tf32", c.Precision)
	}
	for _, o := range []struct {
		name string
		e    Elem
	}{{"X", c.X.Elem}, {"W", c.W.Elem}, {"Y", c.Y.Elem}} {
		if o.e.Size() == 0 {
			return fmt.Errorf("convolution tensor %s has element type %d, which is none of float32 and bfloat16", o.name, o.e)
		}
	}
	e := c.X.Elem
	switch {
	case c.W.Elem != e || c.Y.Elem != e:
		return fmt.Errorf("convolution tensors X %v, W %v and Y %v: all three must be float32 or all three bfloat16", c.X.Elem, c.W.Elem, c.Y.Elem)
	case e == ElemBF16 && !support.BF16:
		return fmt.Errorf("convolution tensors X, W and Y are bfloat16, which this device does not read (its library convolutions take float32 tensors)")
	case e == ElemBF16 && c.Precision != PrecisionBF16:
		return fmt.Errorf("bfloat16 convolution tensors X, W and Y in precision %v: bfloat16 tensors are multiplied in precision bf16", c.Precision)
	case e == ElemF32 && c.Precision == PrecisionBF16:
		return fmt.Errorf("float32 convolution tensors X, W and Y in precision bf16: a bf16 convolution reads bfloat16 tensors (their producers round them), float32 ones are multiplied in f32 or tf32")
	case c.NHWC && !support.NHWC:
		return fmt.Errorf("convolution tensors are channels-last (NHWC: X and Y NHWC, W KRSC), which this device does not read (its library convolutions take NCHW tensors and KCRS filters)")
	}
	return c.checkEpilogue(support)
}

// checkEpilogue checks c's epilogue (Bias, Z and Act) against Conv's
// contract, for a device that computes one where support says so.
func (c *Conv) checkEpilogue(support ConvSupport) error {
	bias, z := c.Bias.Buf != nil, c.Z.Buf != nil
	switch {
	case c.Act >= convActCount:
		return fmt.Errorf("convolution epilogue with activation %d, which is none of none and relu", c.Act)
	case !bias && z:
		return fmt.Errorf("convolution epilogue with Z but no Bias: an epilogue adds Z only beside a Bias (set Bias, of OC zeros if there is none)")
	case !bias && c.Act != ConvActNone:
		return fmt.Errorf("convolution epilogue with activation %v but no Bias: an epilogue applies Act only after a Bias (set Bias, of OC zeros if there is none)", c.Act)
	case !bias:
		return nil
	case !support.Epilogue:
		return fmt.Errorf("convolution with an epilogue (Bias, Z or Act), which this device's library convolutions do not compute (run the bias, the sum and the activation as kernels after a plain forward)")
	case c.Product != ConvForward:
		return fmt.Errorf("convolution epilogue on the %v: only a forward convolution has one", c.Product)
	case c.Beta != 0:
		return fmt.Errorf("convolution epilogue with Beta %g: a forward with an epilogue overwrites Y (Beta 0); add the old output as Z instead", c.Beta)
	case c.Bias.Elem != c.Y.Elem:
		return fmt.Errorf("convolution epilogue's Bias is %v and Y %v: the bias is of Y's element type (cuDNN takes no float bias on bfloat16 data)", c.Bias.Elem, c.Y.Elem)
	case z && c.Z.Elem != c.Y.Elem:
		return fmt.Errorf("convolution epilogue's Z is %v and Y %v: Z is of Y's element type, shape and layout", c.Z.Elem, c.Y.Elem)
	}
	return nil
}
