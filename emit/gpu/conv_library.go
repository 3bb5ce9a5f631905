package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// convLibrary lowers a convolution step whose method is the device's
// library convolution (ConvLibraryMethod: cuDNN on CUDA) to Conv ops and
// the generated kernels around them.
//
// Before: st is a conv2d or conv2d_bwd step with Attr.Method
// ConvLibraryMethod, no epilogue pool, and no workspace (Out[1] of
// conv2d, In[4] of conv2d_bwd are NoBuf: the library keeps its own),
// except dW's bfloat16 one in precision bf16.
// After: the forward is one Conv (y = conv(x, W), Beta 0), which takes
// the bias, a residual (an inference plan's In[3], fuse_conv_sum.go) and
// a ReLU into the library's fused call where libraryEpilogue says (a
// folded batch norm's bias is of y's type), else is followed, when the
// layer has a bias or an activation, by one bias_act kernel over y;
// the backward applies the activation's derivative to dy in place
// (act_bwd, as the im2col lowering does when it cannot fold it), sums
// db over dy (bias_grad), then one Conv for dW (Beta 0: the step writes
// the whole gradient) and one for dx (Beta 0), each where the step has
// that output. The Convs carry the step's precision: f32 or tf32 on
// float32 tensors, or bf16 on the bfloat16 tensors the planner stores
// (store_bf16.go), where they read W's twin (convFilter: on
// channels-last tensors a KRSC one, or a KRSC copy the forward writes)
// and the weight gradient goes to the step's bfloat16 workspace (In[4]),
// from which a copy widens it into dW.
func (l *lowering) convLibrary(st *planner.Step, bwd bool) error {
	a := st.Attr
	if a.Pool != nil {
		return fmt.Errorf("a library convolution with an epilogue pool (a planner bug: the Target pools only the direct and Winograd methods)")
	}
	g := normConv(*a.Conv)
	if g.C%g.Groups != 0 || g.OC%g.Groups != 0 {
		return fmt.Errorf("%d input and %d output channels do not split into %d groups", g.C, g.OC, g.Groups)
	}
	yimg, ohw := g.OC*g.OH*g.OW, g.OH*g.OW
	alpha := float32(a.Alpha)
	if !bwd {
		if err := l.operands(st, 3, 1); err != nil {
			return err
		}
		x, w, b, y := st.In[0], st.In[1], st.In[2], st.Out[0]
		z := planner.NoBuf
		if len(st.In) > 3 {
			z = st.In[3]
		}
		n := g.OC * (g.C / g.Groups) * g.KH * g.KW
		wk, err := l.convFilter(g, w, st.Out[1], planner.KRSCOffset(n))
		if err != nil {
			return err
		}
		if SampledConv(g) && l.channelsLast(x)[0] {
			// the pixels the window reads, copied, then a 1×1 stride-1
			// convolution of them
			if len(st.Out) < 2 || !present(st.Out[1]) {
				return fmt.Errorf("a sampled library convolution without a workspace for its pixels (a bug in mlbuild: the planner's store_channels_last.go gives it one)")
			}
			xs := at(st.Out[1], planner.SampledOffset(n))
			if err := l.launch("sample", sampleKernel(g), nil, whole(x), xs); err != nil {
				return err
			}
			err = l.conv1At(sampledGeom(g), ConvForward, xs, wk, whole(y), true)
		} else {
			err = l.conv1(g, ConvForward, x, wk, y)
		}
		if err != nil {
			return err
		}
		if l.libraryEpilogue(b, y, z) {
			return l.epilogue(b, z, a.Act)
		}
		if present(z) {
			return fmt.Errorf("a library convolution's residual without a bias of its output's element type for the library's epilogue (a planner bug: fuse_conv_sum.go takes a sum only after a convolution with a bias, and store_bf16.go stores a folded bias as the convolution's output)")
		}
		if !present(b) && a.Act == "" {
			return nil
		}
		k, err := biasActKernel(g.N*yimg, g.OC, ohw, present(b), a.Act, alpha)
		ops := []operand{whole(y)}
		if present(b) {
			ops = append(ops, whole(b))
		}
		return l.launch("bias_act", k, err, ops...)
	}
	if err := l.operands(st, 4, 3); err != nil {
		return err
	}
	x, w, y, dy := st.In[0], st.In[1], st.In[2], st.In[3]
	dx, dw, db := st.Out[0], st.Out[1], st.Out[2]
	if a.Act != "" {
		k, err := actBwdKernel(g.N*yimg, a.Act, alpha)
		if err := l.launch("act_bwd", k, err, whole(y), whole(dy)); err != nil {
			return err
		}
	}
	if present(db) {
		if err := l.launch("bias_grad", channelSumKernel(g.N, g.OC, ohw), nil, whole(dy), whole(db)); err != nil {
			return err
		}
	}
	n := g.OC * (g.C / g.Groups) * g.KH * g.KW
	krsc := l.channelsLast(x)[0]
	switch {
	case present(dw) && l.step.Attr.Precision == planner.PrecisionBF16:
		// cuDNN writes dW in bfloat16 to the step's workspace (the
		// planner's store_bf16.go; KRSC with channels-last tensors), and
		// a copy widens it into dW (putting it back in KCRS order).
		ws := whole(st.In[4])
		var err error
		if SampledConv(g) && krsc && a.KeptCols {
			// dW from the forward's copy of the sampled pixels
			err = l.conv1At(sampledGeom(g), ConvWeightGrad, at(st.In[4], planner.SampledOffset(n)), ws, whole(dy), true)
		} else {
			err = l.conv1(g, ConvWeightGrad, x, ws, dy)
		}
		if err != nil {
			return err
		}
		k := copyKernel(n)
		if krsc {
			k = filterOrderKernel(g, false)
		}
		if err := l.launch("widen", k, nil, ws, whole(dw)); err != nil {
			return err
		}
	case present(dw):
		if err := l.conv1(g, ConvWeightGrad, x, whole(dw), dy); err != nil {
			return err
		}
	}
	if !present(dx) {
		return nil
	}
	wk := at(st.In[4], planner.KRSCOffset(n)) // the forward's KRSC filter (KeptCols)
	if !krsc || !a.KeptCols || present(l.twin(w)) {
		var err error
		if wk, err = l.convFilter(g, w, st.In[4], planner.KRSCOffset(n)); err != nil {
			return err
		}
	}
	return l.conv1(g, ConvInputGrad, dx, wk, dy)
}

// convFilter is the filter operand of a library convolution of W: W
// itself in f32 and tf32; its bfloat16 twin in bf16 on NCHW tensors; on
// channels-last tensors W in KRSC order, [OC, KH, KW, C/G] (cuDNN has no
// backward algorithm for a KCRS filter with channels-last tensors): its
// KRSC twin where it has one (the planner's store_channels_last.go,
// kept current by its update step and the program), else a copy that a
// kernel writes (rounded to bfloat16) into the step's workspace ws at
// element off. The backward of a layer whose forward wrote that copy
// (Attr.KeptCols) reads it without calling this.
func (l *lowering) convFilter(g planner.ConvGeom, w, ws planner.BufID, off int) (operand, error) {
	if b, err := l.buf(w); err == nil && b.Kind == planner.KindFolded {
		return whole(w), nil // its fold step wrote it as the library reads it (store_bf16.go, store_channels_last.go)
	}
	if l.fastPrecision() != planner.PrecisionBF16 {
		return whole(w), nil
	}
	tw := l.twin(w)
	krsc := false
	if present(tw) {
		b, err := l.buf(tw)
		if err != nil {
			return operand{}, err
		}
		krsc = b.Layout == planner.LayoutNHWC
	}
	if x := l.step.In[0]; !l.channelsLast(x)[0] {
		if !present(tw) || krsc {
			return operand{}, fmt.Errorf("a bf16 library convolution on NCHW tensors whose weight has no bfloat16 twin in its own order (a bug in mlbuild: the planner's store_bf16.go or store_channels_last.go makes one)")
		}
		return whole(tw), nil
	}
	if krsc {
		return whole(tw), nil
	}
	if !present(ws) {
		return operand{}, fmt.Errorf("a channels-last library convolution without a workspace for its KRSC filter (a bug in mlbuild: the planner's store_channels_last.go gives it one)")
	}
	k := at(ws, off)
	return k, l.launch("filter_krsc", filterOrderKernel(g, true), nil, whole(w), k)
}

// conv1 appends one Conv of product p on the tensors x, w and y (the
// product's output among them), after checking that each buffer holds
// its tensor: float32 tensors, or in precision bf16 bfloat16 ones (the
// planner's store_bf16.go stores x and y so; w is the filter operand
// convFilter gives, or the weight gradient's bfloat16 workspace).
func (l *lowering) conv1(g planner.ConvGeom, p string, x planner.BufID, w operand, y planner.BufID) error {
	last := l.channelsLast(x, y)
	if last[0] != last[1] {
		return fmt.Errorf("library convolution tensors X and Y in two layouts (channels last: %v and %v; a bug in mlbuild: the planner's store_channels_last.go keeps them in one)", last[0], last[1])
	}
	return l.conv1At(g, p, whole(x), w, whole(y), last[0])
}

// conv1At is conv1 on operands, x's and y's layout channels last where
// nhwc (a workspace's sampled pixels have no layout of their own).
func (l *lowering) conv1At(g planner.ConvGeom, p string, x, w, y operand, nhwc bool) error {
	sizes := []int{g.N * g.C * g.H * g.W, g.OC * (g.C / g.Groups) * g.KH * g.KW, g.N * g.OC * g.OH * g.OW}
	prec := l.fastPrecision()
	elem := ""
	if prec == planner.PrecisionBF16 {
		elem = planner.ElemBF16
	}
	var ts [3]Binding
	for i, o := range []operand{x, w, y} {
		b, err := l.buf(o.buf)
		if err != nil {
			return err
		}
		if b.Size < o.off+sizes[i] {
			return fmt.Errorf("library convolution tensor %s needs %d elements from %d, buffer %q has %d", "XWY"[i:i+1], sizes[i], o.off, b.Name, b.Size)
		}
		if b.Elem != elem {
			return fmt.Errorf("library convolution tensor %s in precision %s is buffer %q of %q elements: a library convolution reads and writes bfloat16 in bf16, float32 otherwise (a bug in mlbuild)", "XWY"[i:i+1], prec, b.Name, b.Elem)
		}
		ts[i] = Binding{Buf: o.buf, Offset: o.off, Size: sizes[i], Mutable: i == map[string]int{ConvForward: 2, ConvInputGrad: 0, ConvWeightGrad: 1}[p]}
	}
	c := &Conv{Geom: g, Product: p, X: ts[0], W: ts[1], Y: ts[2], Alpha: 1, Precision: prec, BF16: elem == planner.ElemBF16, NHWC: nhwc}
	l.ops = append(l.ops, Op{Layer: l.step.Layer, Kernel: string(l.step.Kernel), Conv: c})
	return nil
}

// libraryEpilogue reports whether the forward's bias b, a residual z
// and its activation go into the library call's epilogue (the
// library's fused call: cuDNN's cudnnConvolutionBiasActivationForward):
// where the layer has a bias of y's element type (cuDNN takes no float32
// bias on bfloat16 tensors) and an activation the epilogue has (ReLU or
// none), and always for a residual.
func (l *lowering) libraryEpilogue(b, y, z planner.BufID) bool {
	if present(z) {
		return true
	}
	if !present(b) || l.step.Attr.Act != "" && l.step.Attr.Act != "relu" {
		return false
	}
	bb, err1 := l.buf(b)
	yb, err2 := l.buf(y)
	return err1 == nil && err2 == nil && bb.Elem == yb.Elem
}

// epilogue gives the forward Conv just appended the bias b, the residual
// z (NoBuf: none) and the activation act ("" or "relu") of its fused
// call, checking each buffer's size and element type against y's.
func (l *lowering) epilogue(b, z planner.BufID, act string) error {
	c := l.ops[len(l.ops)-1].Conv
	if act != "" && act != "relu" {
		return fmt.Errorf("a library convolution's epilogue with activation %q (it has ReLU or none)", act)
	}
	yb, err := l.buf(c.Y.Buf)
	if err != nil {
		return err
	}
	bind := func(name string, id planner.BufID, n int) (*Binding, error) {
		bb, err := l.buf(id)
		if err != nil {
			return nil, err
		}
		if bb.Size < n || bb.Elem != yb.Elem || bb.Layout != yb.Layout && name == "z" {
			return nil, fmt.Errorf("library convolution epilogue's %s is buffer %q of %d %q elements (layout %q), want %d of Y's type %q (layout %q; a bug in mlbuild)", name, bb.Name, bb.Size, bb.Elem, bb.Layout, n, yb.Elem, yb.Layout)
		}
		return &Binding{Buf: id, Size: n}, nil
	}
	if c.Bias, err = bind("bias", b, c.Geom.OC); err != nil {
		return err
	}
	if present(z) {
		if c.Z, err = bind("z", z, c.Y.Size); err != nil {
			return err
		}
	}
	c.Act = act
	return nil
}

// ConvLibraryMethod is the method name the planner records (Attr.Method)
// for a convolution that runs as the device's library convolution
// (gpuhost.Encoder.Conv: cuDNN on CUDA).
const ConvLibraryMethod = "cudnn"

// The products of a library convolution (Conv.Product), as
// gpuhost.ConvProduct names them.
const (
	ConvForward    = "forward"
	ConvInputGrad  = "input gradient"
	ConvWeightGrad = "weight gradient"
)

// Conv is one library convolution: the product Product ("forward",
// "input gradient", "weight gradient") of a convolution of geometry Geom
// (strides, dilations and groups at least 1) on packed tensors X
// [N, C, H, W], W [OC, C/Groups, KH, KW] and Y [N, OC, OH, OW], the
// product's output Mutable among them: output = Alpha·product +
// Beta·output, with the step's precision ("" exact float32, "tf32",
// "bf16"). The tensors are float32, or bfloat16 when BF16 is set (in
// precision bf16 only), and X and Y channels last ([N, H, W, C]) when
// NHWC is set (W is [OC, C/Groups, KH, KW] either way).
type Conv struct {
	Geom      planner.ConvGeom `json:"geom"`
	Product   string           `json:"product"`
	X         Binding          `json:"x"`
	W         Binding          `json:"w"`
	Y         Binding          `json:"y"`
	Alpha     float32          `json:"alpha"`
	Beta      float32          `json:"beta,omitempty"`
	Precision string           `json:"precision,omitempty"`
	BF16      bool             `json:"bf16,omitempty"`
	NHWC      bool             `json:"nhwc,omitempty"`
	// The forward's epilogue, the library's fused call: Y =
	// Act(Alpha·conv(X, W) + Z + Bias), Bias OC values and Z a tensor of
	// Y's shape and layout, both of Y's element type (nil: none; Z and
	// Act only with Bias), Act "" or "relu".
	Bias *Binding `json:"bias,omitempty"`
	Z    *Binding `json:"z,omitempty"`
	Act  string   `json:"act,omitempty"`
}

// kcrsOfKRSC is where element i of a filter in KRSC order, [OC, rs, cg]
// (rs taps, cg input channels), is in KCRS order, [OC, cg, rs].
func kcrsOfKRSC(i Expr, cg, rs int) Expr {
	o, t, c := div(i, i32(rs*cg)), rem(div(i, i32(cg)), i32(rs)), rem(i, i32(cg))
	return add(mul(add(mul(o, i32(cg)), c), i32(rs)), t)
}

// krscOfKCRS is where element i of a filter in KCRS order, [OC, cg, rs]
// (cg input channels, rs taps), is in KRSC order, [OC, rs, cg]: where an
// update kernel writes a weight's KRSC twin (the planner's
// store_channels_last.go).
func krscOfKCRS(i Expr, cg, rs int) Expr {
	o, c, t := div(i, i32(cg*rs)), rem(div(i, i32(rs)), i32(cg)), rem(i, i32(rs))
	return add(mul(add(mul(o, i32(rs)), t), i32(cg)), c)
}

// filterOrderKernel moves a convolution's filter of geometry g between
// KCRS order, [OC, C/G, KH, KW] (a weight and its gradient), and KRSC,
// [OC, KH, KW, C/G] (cuDNN's filter with channels-last tensors): toKRSC
// reads KCRS w and writes KRSC k, else it reads KRSC k and writes KCRS
// w. One thread an element, in the written order.
func filterOrderKernel(g planner.ConvGeom, toKRSC bool) *Kernel {
	cg, rs := g.C/g.Groups, g.KH*g.KW
	n := g.OC * cg * rs
	i := vr("i")
	if toKRSC {
		return elementwise(fmt.Sprintf("filter [%d,%d,%d,%d] from KCRS to KRSC order", g.OC, cg, g.KH, g.KW), n,
			[]Param{in("w", n), out("k", n)}, func(Expr) []Stmt { return []Stmt{store("k", i, load("w", kcrsOfKRSC(i, cg, rs)))} })
	}
	return elementwise(fmt.Sprintf("filter [%d,%d,%d,%d] from KRSC to KCRS order", g.OC, cg, g.KH, g.KW), n,
		[]Param{in("k", n), out("w", n)}, func(Expr) []Stmt { return []Stmt{store("w", i, load("k", krscOfKCRS(i, cg, rs)))} })
}

// SampledConv reports whether a channels-last library convolution of
// geometry g runs on a copy of the pixels its window reads, as a 1×1
// stride-1 convolution (sampledGeom), forward and weight gradient: a 1×1
// convolution with a stride, no padding, one group (a ResNet's
// projection). cuDNN's legacy calls ran CIFAR ResNet-18's 64→128
// projection at 32×32, batch 128, bf16 NHWC, in 38.4 µs forward and 22.4
// weight gradient on an H200, where PyTorch's calls of the copy (5.8 µs)
// and the 1×1 stride-1 convolution took 5.3 and 7.4
// (docs/runs/gpu-fifteenth-probes-2026-11-30.txt). The input gradient
// stays strided: its copy back (a scatter with zeros between) cost more
// than it saved there.
func SampledConv(g planner.ConvGeom) bool {
	g = normConv(g)
	return g.KH == 1 && g.KW == 1 && (g.SH > 1 || g.SW > 1) && g.PH == 0 && g.PW == 0 && g.Groups == 1
}

// sampledGeom is the 1×1 stride-1 convolution of a sampled convolution's
// copied pixels, [N, OH, OW, C].
func sampledGeom(g planner.ConvGeom) planner.ConvGeom {
	g = normConv(g)
	g.H, g.W, g.SH, g.SW = g.OH, g.OW, 1, 1
	return g
}

// sampleKernel copies, from the channels-last [N, H, W, C] tensor x,
// the pixels a 1×1 convolution's window of g reads into xs, [N, OH, OW,
// C]: xs at pixel (n, i, j) is x at (n, i·SH, j·SW), four channels a
// thread where C allows (16 or 8 bytes a thread).
func sampleKernel(g planner.ConvGeom) *Kernel {
	g = normConv(g)
	n := g.N * g.OH * g.OW * g.C
	src := func(e Expr) Expr {
		// e = ((img·OH + i)·OW + j)·C + c
		pix, c := div(e, i32(g.C)), rem(e, i32(g.C))
		img, ij := div(pix, i32(g.OH*g.OW)), rem(pix, i32(g.OH*g.OW))
		i, j := div(ij, i32(g.OW)), rem(ij, i32(g.OW))
		return add(mul(add(mul(add(mul(img, i32(g.H)), mul(i, i32(g.SH))), i32(g.W)), mul(j, i32(g.SW))), i32(g.C)), c)
	}
	doc := fmt.Sprintf("the pixels of x [%d,%d,%d,%d] (NHWC) a 1×1 stride-%dx%d window reads, [%d,%d,%d,%d]", g.N, g.H, g.W, g.C, g.SH, g.SW, g.N, g.OH, g.OW, g.C)
	params := []Param{in("x", g.N*g.H*g.W*g.C), out("xs", n)}
	if g.C%4 != 0 {
		return elementwise(doc, n, params, func(e Expr) []Stmt { return []Stmt{store("xs", e, load("x", src(e)))} })
	}
	names := [4]string{"v0", "v1", "v2", "v3"}
	return &Kernel{Doc: doc + ", four channels a thread", Params: params, Threadgroup: tgElem, Groups: ceilDiv(n/4, tgElem),
		Body: []Stmt{
			let("e", Int, mul(gidE, i32(4))),
			when(lt(vr("e"), i32(n)),
				Load4{"x", src(vr("e")), names},
				Store4{"xs", vr("e"), [4]Expr{vr("v0"), vr("v1"), vr("v2"), vr("v3")}}),
		}}
}
