package onnx

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// nodeCtx is one node being imported.
type nodeCtx struct {
	im        *importer
	n         *Node
	name      string
	ins       []*value
	layerName string // the layer the node became, for the mapping
	viewLayer *Layer // the node's view layer, written when something reads it
}

// opImport imports one node and says how (for the mapping), or returns a
// *skipImport saying why it cannot.
type opImport func(c *nodeCtx) (string, error)

// opImporters lists every ONNX op the importer knows, by op_type.
var opImporters map[string]opImport

func init() {
	opImporters = map[string]opImport{
		"Constant": importConstant, "Identity": importIdentity, "Dropout": importDropout, "Cast": importCast,
		"Shape": importShape, "Gather": importGather, "Unsqueeze": importUnsqueeze, "Squeeze": importSqueeze,
		"Concat": importConcat, "Slice": importSlice, "Reshape": importReshape, "Flatten": importFlatten,
		"Transpose": importTranspose, "Split": importSplit,
		"Add": importBinary, "Sub": importBinary, "Mul": importBinary, "Div": importBinary,
		"Gemm": importGemm, "MatMul": importMatMul,
		"Conv": importConv, "MaxPool": importPool, "AveragePool": importPool,
		"GlobalAveragePool": importGlobalAvgPool,
		"Relu":              importUnary("relu"), "Sigmoid": importUnary("sigmoid"), "Tanh": importUnary("tanh"),
		"Exp": importUnary("exp"), "Log": importUnary("log"), "LeakyRelu": importUnary("leakyrelu"),
		"Gelu": importUnary("gelu"), "Sqrt": importUnary("sqrt"), "Erf": importUnary("erf"),
		"Reciprocal": importUnary("reciprocal"), "Pow": importPow, "Clip": importClip,
		"LayerNormalization": importLayerNorm, "ReduceMean": importReduceMean,
		"Softmax": importSoftmax("softmax"), "LogSoftmax": importSoftmax("logsoftmax"),
		"BatchNormalization": importBatchNorm, "Pad": importPad, "ConstantOfShape": importConstantOfShape,
		"Resize": importResize, "Upsample": importResize,
		"Range": importRange, "Equal": importEqual, "Where": importWhere,
	}
}

// padConsumers are the ops that take over the padding of a Pad node.
var padConsumers = map[string]bool{"Conv": true, "AveragePool": true, "Identity": true}

// ---- access to inputs and attributes ----

func (c *nodeCtx) has(i int) bool { return i < len(c.ins) && c.ins[i] != nil }

// runtime returns input i, which must be computed at run time.
func (c *nodeCtx) runtime(i int) (*value, error) {
	if !c.has(i) {
		return nil, unsupported("", "%s needs input %d", c.n.OpType, i)
	}
	v := c.ins[i]
	if v.konst != nil {
		return nil, unsupported("", "input %q is a constant; mlbuild computes %s only on values that depend on the model input", c.n.Inputs[i], c.n.OpType)
	}
	return v, nil
}

// konst returns input i, which must be known at import time.
func (c *nodeCtx) konst(i int, what string) (*constant, error) {
	if !c.has(i) {
		return nil, unsupported("", "%s needs input %d (%s)", c.n.OpType, i, what)
	}
	v := c.ins[i]
	if v.konst == nil {
		return nil, unsupported("export with the "+what+" as an initializer (a trained parameter or a constant)", "input %q (%s) depends on the model input; mlbuild needs it known at import time", c.n.Inputs[i], what)
	}
	return v.konst, nil
}

func (c *nodeCtx) attrInt(name string, def int64) (int64, error) {
	a := c.n.Attr(name)
	if a == nil {
		return def, nil
	}
	if a.Type != AttrInt {
		return 0, unsupported("", "attribute %s has type %d, want an int", name, a.Type)
	}
	return a.I, nil
}

// attrFloat returns a float attribute as the shortest decimal of its
// float32 value (1e-05 rather than 9.99999974e-06).
func (c *nodeCtx) attrFloat(name string, def float64) (float64, error) {
	a := c.n.Attr(name)
	if a == nil {
		return def, nil
	}
	if a.Type != AttrFloat {
		return 0, unsupported("", "attribute %s has type %d, want a float", name, a.Type)
	}
	if math.IsNaN(float64(a.F)) || math.IsInf(float64(a.F), 0) {
		return 0, unsupported("", "attribute %s is %v", name, a.F)
	}
	return shortFloat(a.F), nil
}

func toInts(v []int64) []int {
	out := make([]int, len(v))
	for i, e := range v {
		out[i] = int(e)
	}
	return out
}

func shortFloat(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

func (c *nodeCtx) attrInts(name string) ([]int64, bool, error) {
	a := c.n.Attr(name)
	if a == nil {
		return nil, false, nil
	}
	if a.Type != AttrInts {
		return nil, false, unsupported("", "attribute %s has type %d, want a list of ints", name, a.Type)
	}
	return a.Ints, true, nil
}

func (c *nodeCtx) attrString(name, def string) (string, error) {
	a := c.n.Attr(name)
	if a == nil {
		return def, nil
	}
	if a.Type != AttrString {
		return "", unsupported("", "attribute %s has type %d, want a string", name, a.Type)
	}
	return string(a.S), nil
}

// newLayer makes a layer named after the node.
func (c *nodeCtx) newLayer(op string, out []int) *Layer {
	src := c.name + " (" + c.n.OpType + ")"
	return &Layer{Name: c.im.layerName(c.n, op), Op: op, OutShape: out, Source: src}
}

// emit adds l reading ins and binds the node's output to it.
func (c *nodeCtx) emit(l *Layer, ins ...*value) (string, error) {
	c.layerName = l.Name
	if err := c.setOutput(c.im.addLayer(l, ins...)); err != nil {
		return "", err
	}
	return l.Op, nil
}

// MaxFoldElements bounds a constant the importer computes (by Gather or a
// broadcast), so that a small hostile file cannot ask for a huge one.
const MaxFoldElements = 1 << 24

func checkFoldSize(dims []int) error {
	n := 1
	for _, d := range dims {
		if d < 0 || (d > 0 && n > MaxFoldElements/d) {
			return unsupported("", "the folded constant of shape %v would hold more than %d elements", dims, MaxFoldElements)
		}
		n *= d
	}
	return nil
}

// fold binds the node's output to a constant.
func (c *nodeCtx) fold(k *constant, how string) (string, error) {
	return "folded: " + how, c.setOutput(&value{konst: k})
}

// axis normalises an ONNX axis (counting the batch axis) against a rank.
func (c *nodeCtx) axis(a int64, rank int) (int, error) {
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a >= int64(rank) {
		return 0, unsupported("", "axis %d is out of range for rank %d", a, rank)
	}
	return int(a), nil
}

// ---- folding and aliases ----

func importConstant(c *nodeCtx) (string, error) {
	for _, a := range c.n.Attrs {
		var k *constant
		var err error
		switch a.Name {
		case "value":
			if a.T == nil {
				return "", unsupported("", "attribute value holds no tensor")
			}
			k, err = constFromTensor(a.T)
		case "value_float":
			k = &constant{vals: []float64{shortFloat(a.F)}}
		case "value_int":
			k = &constant{vals: []float64{float64(a.I)}, ints: true}
		case "value_floats":
			k = &constant{dims: []int{len(a.Floats)}}
			for _, f := range a.Floats {
				k.vals = append(k.vals, shortFloat(f))
			}
		case "value_ints":
			k = &constant{dims: []int{len(a.Ints)}, ints: true}
			for _, v := range a.Ints {
				k.vals = append(k.vals, float64(v))
			}
		default:
			continue
		}
		if err != nil {
			return "", unsupported("", "%v", err)
		}
		return c.fold(k, "constant")
	}
	return "", unsupported("", "Constant without a value, value_float(s) or value_int(s) attribute (sparse and string constants are not supported)")
}

// importConstantOfShape folds a constant of a given shape filled with one
// value (PyTorch computes the pads of F.pad with it).
func importConstantOfShape(c *nodeCtx) (string, error) {
	shape, err := c.konst(0, "shape")
	if err != nil {
		return "", err
	}
	if shape.hasBatch() {
		return "", unsupported("", "a constant as large as the batch")
	}
	dims := make([]int, len(shape.vals))
	for i, v := range shape.vals {
		if v < 0 || v > MaxElements {
			return "", unsupported("", "shape %v", shape.vals)
		}
		dims[i] = int(v)
	}
	if err := checkFoldSize(dims); err != nil {
		return "", err
	}
	fill, ints := 0.0, false
	if a := c.n.Attr("value"); a != nil {
		if a.T == nil || a.T.NumElements() != 1 {
			return "", unsupported("", "value is not a one-element tensor")
		}
		k, err := constFromTensor(a.T)
		if err != nil {
			return "", unsupported("", "%v", err)
		}
		fill, ints = k.vals[0], k.ints
	}
	k := &constant{dims: dims, vals: make([]float64, product(dims)), ints: ints}
	for i := range k.vals {
		k.vals[i] = fill
	}
	return c.fold(k, "constant of shape")
}

func importIdentity(c *nodeCtx) (string, error) {
	if !c.has(0) {
		return "", unsupported("", "Identity needs an input")
	}
	return "folded: identity", c.setOutput(c.ins[0])
}

func importDropout(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	rate := 0.5
	if c.im.opset < 12 {
		if rate, err = c.attrFloat("ratio", 0.5); err != nil {
			return "", err
		}
	} else if c.has(1) {
		k, err := c.konst(1, "ratio")
		if err != nil {
			return "", err
		}
		if v, ok := k.scalar(); ok && k.size() == 1 {
			rate = v
		} else {
			return "", unsupported("", "ratio is not a scalar")
		}
	}
	if c.has(2) {
		k, err := c.konst(2, "training_mode")
		if err != nil {
			return "", err
		}
		if v, ok := k.scalar(); !ok || v != 0 {
			return "", unsupported("export in eval mode (model.eval())", "training_mode is true; an imported model runs in inference mode")
		}
	}
	if rate < 0 || rate >= 1 {
		return "", unsupported("", "ratio %v is outside [0, 1)", rate)
	}
	if rate == 0 {
		return "folded: dropout with ratio 0", c.setOutput(x)
	}
	l := c.newLayer("dropout", x.shape)
	l.Fields = []Field{{"rate", rate}}
	return c.emit(l, x)
}

func importCast(c *nodeCtx) (string, error) {
	to, err := c.attrInt("to", 0)
	if err != nil {
		return "", err
	}
	if !c.has(0) {
		return "", unsupported("", "Cast needs an input")
	}
	v := c.ins[0]
	if v.keyPad != nil {
		return c.castPadMask(v, DataType(to))
	}
	if v.konst == nil {
		if DataType(to) != Float {
			return "", unsupported("", "casts the model's values to %v; mlbuild computes in float32", DataType(to))
		}
		return "folded: cast to float32", c.setOutput(v)
	}
	k := *v.konst
	k.vals = slices.Clone(k.vals)
	k.ints = true
	switch DataType(to) {
	case Float, Double, Float16, BFloat16:
		k.ints = false
	case Bool:
		for i, x := range k.vals {
			if x != 0 {
				k.vals[i] = 1
			}
		}
	default:
		for i, x := range k.vals {
			k.vals[i] = math.Trunc(x)
		}
	}
	return c.fold(&k, "cast")
}

// importShape folds Shape of a runtime value into a constant whose first
// element is the batch size (unknown until run time, marked as such).
func importShape(c *nodeCtx) (string, error) {
	if !c.has(0) {
		return "", unsupported("", "Shape needs an input")
	}
	v := c.ins[0]
	k := &constant{ints: true}
	if v.konst != nil {
		for _, d := range v.konst.dims {
			k.vals = append(k.vals, float64(d))
		}
	} else {
		// a Shape reads no data: the read is not one that keeps the
		// producer's output alive (layerReads: a fold may change it, and a
		// packed projection split into pieces is removed)
		c.im.uses[c.n.Inputs[0]]--
		k.vals = append(k.vals, 1) // the batch size times 1
		k.batch = []bool{true}
		for _, d := range v.shape {
			k.vals = append(k.vals, float64(d))
			k.batch = append(k.batch, false)
		}
	}
	start, err := c.attrInt("start", 0)
	if err != nil {
		return "", err
	}
	end, err := c.attrInt("end", int64(len(k.vals)))
	if err != nil {
		return "", err
	}
	r := int64(len(k.vals))
	clamp := func(i int64) int {
		if i < 0 {
			i += r
		}
		return int(min(max(i, 0), r))
	}
	s, e := clamp(start), clamp(end)
	if e < s {
		e = s
	}
	k.vals = k.vals[s:e]
	if k.batch != nil {
		k.batch = k.batch[s:e]
	}
	k.dims = []int{len(k.vals)}
	return c.fold(k, "shape")
}

// strides returns the row-major strides of dims.
func strides(dims []int) []int {
	s := make([]int, len(dims))
	n := 1
	for i := len(dims) - 1; i >= 0; i-- {
		s[i] = n
		n *= dims[i]
	}
	return s
}

func importGather(c *nodeCtx) (string, error) {
	if c.has(0) && c.ins[0].moved != nil {
		m := c.ins[0].moved
		a, err := c.attrInt("axis", 0)
		if err != nil {
			return "", err
		}
		idx, err := c.konst(1, "indices")
		if err != nil {
			return "", err
		}
		if a != 0 || len(idx.dims) != 0 {
			return "", unsupported("", "Gather along axis %d (indices of shape %s) of the output of Transpose node %s; mlbuild takes it apart only by one index of its first axis", a, shapeText(idx.dims), m.node)
		}
		i := int(idx.vals[0])
		if i < 0 {
			i += m.hi - m.lo
		}
		return c.takeMoved(m, m.lo+i)
	}
	if c.has(0) && c.has(1) && c.ins[0].konst != nil && c.ins[1].konst == nil {
		return importEmbedding(c)
	}
	if c.has(0) && c.has(1) && c.ins[0].konst == nil && c.ins[1].konst != nil {
		return c.gatherRuntime(c.ins[0])
	}
	data, err := c.konst(0, "data")
	if err != nil {
		return "", unsupported("", "Gather reads from a value that depends on the model input; mlbuild folds Gather only in shape arithmetic")
	}
	idx, err := c.konst(1, "indices")
	if err != nil {
		return "", err
	}
	a, err := c.attrInt("axis", 0)
	if err != nil {
		return "", err
	}
	ax, err := c.axis(a, len(data.dims))
	if err != nil {
		return "", err
	}
	outDims := slices.Concat(data.dims[:ax], idx.dims, data.dims[ax+1:])
	if err := checkFoldSize(outDims); err != nil {
		return "", err
	}
	outer, inner := product(data.dims[:ax]), product(data.dims[ax+1:])
	n := data.dims[ax]
	out := &constant{dims: outDims, ints: data.ints}
	for o := 0; o < outer; o++ {
		for _, fi := range idx.vals {
			i := int(fi)
			if i < 0 {
				i += n
			}
			if i < 0 || i >= n {
				return "", unsupported("", "index %v is out of range for size %d", fi, n)
			}
			for j := 0; j < inner; j++ {
				src := (o*n+i)*inner + j
				out.vals = append(out.vals, data.vals[src])
				if data.batch != nil {
					out.batch = append(out.batch, data.batch[src])
				}
			}
		}
	}
	return c.fold(out, "gather")
}

// axesOf reads the axes of Unsqueeze, Squeeze (an attribute before opset
// 13, an input since) or Slice.
func (c *nodeCtx) axesOf(input int) ([]int64, bool, error) {
	if c.im.opset < 13 || input < 0 {
		return c.attrInts("axes")
	}
	if !c.has(input) {
		return nil, false, nil
	}
	k, err := c.konst(input, "axes")
	if err != nil {
		return nil, false, err
	}
	axes := make([]int64, len(k.vals))
	for i, v := range k.vals {
		axes[i] = int64(v)
	}
	return axes, true, nil
}

func importUnsqueeze(c *nodeCtx) (string, error) {
	axes, ok, err := c.axesOf(1)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", unsupported("", "Unsqueeze without axes")
	}
	if !c.has(0) {
		return "", unsupported("", "Unsqueeze needs an input")
	}
	v := c.ins[0]
	full := v.fullDims()
	r := len(full) + len(axes)
	ins := make([]bool, r)
	for _, a := range axes {
		ax, err := c.axis(a, r)
		if err != nil {
			return "", err
		}
		ins[ax] = true
	}
	var out []int
	j := 0
	for i := 0; i < r; i++ {
		if ins[i] {
			out = append(out, 1)
		} else {
			out = append(out, full[j])
			j++
		}
	}
	return c.reshapeTo(v, out, ins[0], "unsqueeze")
}

func importSqueeze(c *nodeCtx) (string, error) {
	axes, ok, err := c.axesOf(1)
	if err != nil {
		return "", err
	}
	if !c.has(0) {
		return "", unsupported("", "Squeeze needs an input")
	}
	if m := c.ins[0].moved; m != nil {
		if !ok || len(axes) != 1 || (axes[0] != 0 && axes[0] != -int64(len(m.perm))) || m.hi-m.lo != 1 {
			return "", unsupported("", "Squeeze of axes %v of the output of Transpose node %s; mlbuild takes it apart only by squeezing one entry of its first axis", axes, m.node)
		}
		return c.takeMoved(m, m.lo)
	}
	v := c.ins[0]
	full := v.fullDims()
	drop := make([]bool, len(full))
	for i, d := range full {
		if !ok && d == 1 {
			drop[i] = true
		}
	}
	for _, a := range axes {
		ax, err := c.axis(a, len(full))
		if err != nil {
			return "", err
		}
		if ax == 0 && v.konst == nil {
			return "", unsupported("", "Squeeze of the batch axis (axis 0); mlbuild's batch axis is implicit and must stay first")
		}
		if full[ax] != 1 {
			return "", unsupported("", "squeezes axis %d of size %d", ax, full[ax])
		}
		drop[ax] = true
	}
	var out []int
	for i, d := range full {
		if !drop[i] {
			out = append(out, d)
		}
	}
	return c.reshapeTo(v, out, drop[0], "squeeze")
}

// fullDims is the shape ONNX sees: a constant's dims, or a runtime value's
// per-sample shape after the batch (shown as -1).
func (v *value) fullDims() []int {
	if v.konst != nil {
		return v.konst.dims
	}
	return append([]int{-1}, v.shape...)
}

// reshapeTo gives v the full ONNX shape out: a constant is folded, a
// runtime value becomes a view (a flatten or reshape layer written when
// something reads it). touchesBatch says the change moves the batch axis.
func (c *nodeCtx) reshapeTo(v *value, out []int, touchesBatch bool, how string) (string, error) {
	if v.konst != nil {
		k := *v.konst
		k.dims = out
		return c.fold(&k, how)
	}
	if touchesBatch || len(out) == 0 || out[0] != -1 {
		return "", unsupported("", "%s changes the batch axis (axis 0); mlbuild's batch axis is implicit and must stay first", c.n.OpType)
	}
	return c.view(v, out[1:])
}

// view makes v's per-sample shape s without writing a layer yet.
func (c *nodeCtx) view(v *value, s []int) (string, error) {
	if err := checkShape(toInt64s(s)); err != nil {
		return "", unsupported("", "the new shape: %v", err)
	}
	if product(s) != product(v.shape) {
		return "", unsupported("", "the new shape %s holds %d elements per sample but the input %s holds %d", shapeText(s), product(s), shapeText(v.shape), product(v.shape))
	}
	if v.keyPad != nil {
		return c.viewPadMask(v, s)
	}
	if slices.Equal(s, v.lshape) {
		return "folded: the layer " + v.layer + " already has this shape", c.setOutput(&value{layer: v.layer, lshape: v.lshape, shape: s})
	}
	op := "reshape"
	if len(s) == 1 {
		op = "flatten"
	}
	l := c.newLayer(op, s)
	if op == "reshape" {
		l.Fields = []Field{{"shape", slices.Clone(s)}}
	}
	if err := c.setOutput(&value{layer: v.layer, lshape: v.lshape, shape: s, view: l}); err != nil {
		return "", err
	}
	c.viewLayer = l
	return "folded: a change of shape that the next layer makes, or that needs no layer", nil
}

// reshaped returns v viewed with per-sample shape s: a pending flatten or
// reshape layer named after the op and a counter (the node's own name goes
// to its main layer), or v's layer itself when that has shape s.
func (c *nodeCtx) reshaped(v *value, s []int) *value {
	if slices.Equal(s, v.lshape) {
		return &value{layer: v.layer, lshape: v.lshape, shape: s}
	}
	op := "reshape"
	if len(s) == 1 {
		op = "flatten"
	}
	l := &Layer{Name: c.im.layerName(nil, op), Op: op, OutShape: slices.Clone(s), Source: c.name + " (" + c.n.OpType + ", a change of shape around it)"}
	if op == "reshape" {
		l.Fields = []Field{{"shape", slices.Clone(s)}}
	}
	return &value{layer: v.layer, lshape: v.lshape, shape: slices.Clone(s), view: l}
}

// reshaped1D views a [C, L] value as [C, 1, L], the input of a 1-D
// window as its 2-D counterpart of height 1, keeping a zero Pad of its
// length (which a Pad node wrote as its width).
func (c *nodeCtx) reshaped1D(v *value) *value {
	out := c.reshaped(v, []int{v.shape[0], 1, v.shape[1]})
	out.pad, out.padNode = v.pad, v.padNode
	return out
}

// emitReshaped adds l reading x and binds the node's output to l's output
// viewed with per-sample shape s.
func (c *nodeCtx) emitReshaped(l *Layer, x *value, s []int) (string, error) {
	c.layerName = l.Name
	out := c.im.addLayer(l, x)
	return l.Op, c.setOutput(c.reshaped(out, s))
}

func importConcat(c *nodeCtx) (string, error) {
	a, err := c.attrInt("axis", 0)
	if err != nil {
		return "", err
	}
	var ks []*constant
	var rs []*value
	for i := range c.n.Inputs {
		if !c.has(i) {
			continue
		}
		if c.ins[i].konst != nil {
			ks = append(ks, c.ins[i].konst)
		} else {
			rs = append(rs, c.ins[i])
		}
	}
	if len(rs) > 0 {
		if len(ks) > 0 {
			return "", unsupported("", "concatenates constants with values that depend on the model input; mlbuild concatenates only the latter")
		}
		ax, err := c.axis(a, len(rs[0].shape)+1)
		if err != nil {
			return "", err
		}
		if ax == 0 {
			return "", unsupported("", "concatenates along the batch axis")
		}
		out := slices.Clone(rs[0].shape)
		for _, r := range rs[1:] {
			if len(r.shape) != len(out) {
				return "", unsupported("", "inputs of different ranks")
			}
			out[ax-1] += r.shape[ax-1]
		}
		if len(rs) == 1 {
			return "folded: concat of one input", c.setOutput(rs[0])
		}
		l := c.newLayer("concat", out)
		if ax-1 != 0 {
			l.Fields = []Field{{"axis", ax - 1}}
		}
		return c.emit(l, rs...)
	}
	if len(ks) == 0 {
		return "", unsupported("", "Concat without inputs")
	}
	ax, err := c.axis(a, len(ks[0].dims))
	if err != nil {
		return "", err
	}
	out := &constant{dims: slices.Clone(ks[0].dims), ints: true}
	for _, k := range ks {
		out.ints = out.ints && k.ints
	}
	out.dims[ax] = 0
	for _, k := range ks {
		if len(k.dims) != len(out.dims) {
			return "", unsupported("", "inputs of different ranks")
		}
		out.dims[ax] += k.dims[ax]
	}
	outer := product(out.dims[:ax])
	withBatch := false
	for _, k := range ks {
		withBatch = withBatch || k.hasBatch()
	}
	for o := 0; o < outer; o++ {
		for _, k := range ks {
			chunk := product(k.dims[ax:])
			out.vals = append(out.vals, k.vals[o*chunk:(o+1)*chunk]...)
			if withBatch {
				for j := o * chunk; j < (o+1)*chunk; j++ {
					out.batch = append(out.batch, k.isBatch(j))
				}
			}
		}
	}
	return c.fold(out, "concat")
}

// importSlice folds a Slice of a constant (shape arithmetic), imports
// one of a dense layer's features as a dense layer of its own (a packed
// projection split by chunk: split_dense.go), and any other Slice of a
// runtime value as slice layers (slice_runtime.go).
func importSlice(c *nodeCtx) (string, error) {
	if !c.has(0) {
		return "", unsupported("", "Slice needs an input")
	}
	x := c.ins[0]
	data := x.konst
	var err error
	var starts, ends, axes, steps []int64
	if c.im.opset < 10 {
		starts, _, _ = c.attrInts("starts")
		ends, _, _ = c.attrInts("ends")
		axes, _, _ = c.attrInts("axes")
	} else {
		get := func(i int, what string) ([]int64, error) {
			if !c.has(i) {
				return nil, nil
			}
			k, err := c.konst(i, what)
			if err != nil {
				return nil, err
			}
			out := make([]int64, len(k.vals))
			for j, v := range k.vals {
				out[j] = int64(max(min(v, math.MaxInt32), math.MinInt32))
			}
			return out, nil
		}
		for i, p := range []*[]int64{&starts, &ends, &axes, &steps} {
			if *p, err = get(i+1, []string{"starts", "ends", "axes", "steps"}[i]); err != nil {
				return "", err
			}
		}
	}
	if len(starts) != len(ends) {
		return "", unsupported("", "starts and ends differ in length")
	}
	dims := x.fullDims()
	r := len(dims)
	lo, count, step := make([]int, r), slices.Clone(dims), make([]int, r)
	for i := range step {
		step[i] = 1
	}
	for i := range starts {
		a := int64(i)
		if axes != nil {
			if i >= len(axes) {
				return "", unsupported("", "fewer axes than starts")
			}
			a = axes[i]
		}
		ax, err := c.axis(a, r)
		if err != nil {
			return "", err
		}
		if data == nil && ax == 0 {
			return "", unsupported("", "Slice of the batch axis; mlbuild slices the axes of each sample")
		}
		st := int64(1)
		if steps != nil && i < len(steps) {
			st = steps[i]
		}
		if st == 0 {
			return "", unsupported("", "Slice with step 0")
		}
		// ONNX's rule: negative indices count from the end, then starts
		// and ends are clamped to the axis ([0, n] going forward, [-1, n-1]
		// going backward).
		n := int64(dims[ax])
		b, e := starts[i], ends[i]
		if b < 0 {
			b += n
		}
		if e < 0 {
			e += n
		}
		var cnt int64
		if st > 0 {
			b, e = min(max(b, 0), n), min(max(e, 0), n)
			cnt = max(0, (e-b+st-1)/st)
		} else {
			b, e = min(max(b, 0), n-1), min(max(e, -1), n-1)
			cnt = max(0, (b-e-st-1)/(-st))
		}
		lo[ax], count[ax], step[ax] = int(b), int(cnt), int(st)
	}
	if data == nil {
		if c.featuresOfDense(x, lo, count) {
			return c.sliceDense(x, lo, count, step)
		}
		return c.sliceRuntime(x, lo, count, step)
	}
	out := &constant{dims: count, ints: data.ints}
	st := strides(data.dims)
	idx := make([]int, r)
	total := product(out.dims)
	for n := 0; n < total; n++ {
		rem, src := n, 0
		for i := r - 1; i >= 0; i-- {
			idx[i] = rem % out.dims[i]
			rem /= out.dims[i]
		}
		for i := range idx {
			src += (lo[i] + idx[i]*step[i]) * st[i]
		}
		out.vals = append(out.vals, data.vals[src])
		if data.batch != nil {
			out.batch = append(out.batch, data.batch[src])
		}
	}
	return c.fold(out, "slice")
}

func importReshape(c *nodeCtx) (string, error) {
	if !c.has(0) {
		return "", unsupported("", "Reshape needs an input")
	}
	x := c.ins[0]
	var target *constant
	if c.im.opset < 5 {
		s, ok, err := c.attrInts("shape")
		if err != nil || !ok {
			return "", unsupported("", "Reshape without a shape")
		}
		target = &constant{dims: []int{len(s)}, ints: true}
		for _, v := range s {
			target.vals = append(target.vals, float64(v))
		}
	} else {
		var err error
		if target, err = c.konst(1, "shape"); err != nil {
			return "", err
		}
	}
	allowZero, err := c.attrInt("allowzero", 0)
	if err != nil {
		return "", err
	}
	in := x.fullDims()
	out := make([]int, len(target.vals))
	infer := -1
	for i, v := range target.vals {
		switch {
		case target.isBatch(i):
			if (i != 0 || v != 1) && x.konst == nil && x.keyPad == nil {
				// the batch moves or merges with other axes: followed
				// (batch_layout.go)
				return c.reshapeLazy(c.lazyOf(0))
			}
			if i != 0 || v != 1 {
				return "", unsupported("", "the target shape puts the batch size at axis %d; mlbuild's batch axis stays first", i)
			}
			out[i] = -1
		case v == 0 && allowZero == 0:
			if i >= len(in) {
				return "", unsupported("", "target entry %d copies an axis the input does not have", i)
			}
			out[i] = in[i]
		case v == -1:
			if infer >= 0 {
				return "", unsupported("", "the target shape has two -1 entries")
			}
			infer = i
			out[i] = -1
		case v < 0 || v > MaxElements:
			return "", unsupported("", "target size %v is not valid", v)
		default:
			out[i] = int(v)
		}
	}
	if x.konst != nil {
		if infer >= 0 {
			known := 1
			for i, d := range out {
				if i != infer {
					known *= d
				}
			}
			if known == 0 || x.konst.size()%known != 0 {
				return "", unsupported("", "cannot infer the -1 size")
			}
			out[infer] = x.konst.size() / known
		}
		if product(out) != x.konst.size() {
			return "", unsupported("", "reshape of %d elements to %v", x.konst.size(), out)
		}
		return c.reshapeTo(x, out, false, "reshape")
	}
	// A runtime value: the first target entry must be the batch.
	per := product(x.shape)
	if len(out) == 0 {
		return "", unsupported("", "reshape to a scalar")
	}
	batchFirst := target.isBatch(0) || (target.vals[0] == 0 && allowZero == 0)
	// with a batch fixed at 1, a target that does not start with it may
	// merge it with the axes after it (x.view(-1, C) of [1, T, C] is
	// [B·T, C]): followed as a moved batch (batch_fixed.go)
	fixed := c.im.batchN == 1 && !target.hasBatch() && !batchFirst && allowZero == 0
	switch {
	case batchFirst || infer == 0:
		// the batch, by symbol, by copying, or inferred from the rest
	case c.im.batchN > 0 && out[0] == c.im.batchN:
		// the fixed batch written as a number
	case fixed:
		return c.reshapeFixedPlain(out, infer, per)
	default:
		return "", unsupported("export with x.view(x.size(0), -1) or torch.flatten(x, 1), which keep the batch axis", "the target shape %v does not keep the batch axis first", target.vals)
	}
	rest := slices.Clone(out[1:])
	if infer > 0 {
		known := product(rest[:infer-1]) * product(rest[infer:])
		if known == 0 || per%known != 0 {
			return "", unsupported("", "cannot infer the -1 size: %d elements per sample are not divisible by %d", per, known)
		}
		rest[infer-1] = per / known
	}
	if product(rest) != per {
		if fixed {
			return c.reshapeFixedPlain(out, infer, per)
		}
		return "", unsupported("", "the target shape %v does not hold the %d elements of each sample (%s)", target.vals, per, shapeText(x.shape))
	}
	return c.view(x, rest)
}

// reshapeFixedPlain imports a Reshape of an ordinary value (input 0, of
// per elements a sample) whose target, with the batch fixed at 1, does
// not keep the batch first: the sizes out, entry infer (or -1) to infer.
func (c *nodeCtx) reshapeFixedPlain(out []int, infer, per int) (string, error) {
	if c.ins[0].keyPad != nil {
		return "", unsupported(padMaskFix, "the target shape %v of the padding mask does not keep the batch axis first", out)
	}
	out = slices.Clone(out)
	if infer >= 0 {
		known := 1
		for i, d := range out {
			if i != infer {
				known *= d
			}
		}
		if known == 0 || per%known != 0 {
			return "", unsupported("", "cannot infer the -1 size: %d elements per sample are not divisible by %d", per, known)
		}
		out[infer] = per / known
	}
	if product(out) != per {
		return "", unsupported("", "the target shape %v does not hold the %d elements of the sample", out, per)
	}
	return c.reshapeFixed(c.lazyOf(0), out)
}

func importFlatten(c *nodeCtx) (string, error) {
	if !c.has(0) {
		return "", unsupported("", "Flatten needs an input")
	}
	x := c.ins[0]
	full := x.fullDims()
	a, err := c.attrInt("axis", 1)
	if err != nil {
		return "", err
	}
	if a < 0 {
		a += int64(len(full))
	}
	if a < 0 || a > int64(len(full)) {
		return "", unsupported("", "axis %d is out of range", a)
	}
	if x.konst != nil {
		k := *x.konst
		k.dims = []int{product(full[:a]), product(full[a:])}
		return c.fold(&k, "flatten")
	}
	if a != 1 {
		return "", unsupported("use torch.flatten(x, 1) (Flatten with axis 1), which keeps the batch axis", "Flatten with axis %d merges the batch axis with others", a)
	}
	return c.view(x, []int{product(x.shape)})
}

func importTranspose(c *nodeCtx) (string, error) {
	if !c.has(0) {
		return "", unsupported("", "Transpose needs an input")
	}
	x := c.ins[0]
	full := x.fullDims()
	p, ok, err := c.attrInts("perm")
	if err != nil {
		return "", err
	}
	if !ok {
		for i := len(full) - 1; i >= 0; i-- {
			p = append(p, int64(i))
		}
	}
	if len(p) != len(full) {
		return "", unsupported("", "perm %v for rank %d", p, len(full))
	}
	seen := make([]bool, len(full))
	for _, a := range p {
		if a < 0 || int(a) >= len(full) || seen[a] {
			return "", unsupported("", "perm %v is not a permutation", p)
		}
		seen[a] = true
	}
	if x.konst != nil {
		k := x.konst
		out := &constant{ints: k.ints}
		for _, a := range p {
			out.dims = append(out.dims, k.dims[a])
		}
		st := strides(k.dims)
		idx := make([]int, len(p))
		for n := 0; n < k.size(); n++ {
			rem, src := n, 0
			for i := len(p) - 1; i >= 0; i-- {
				idx[i] = rem % out.dims[i]
				rem /= out.dims[i]
			}
			for i, a := range p {
				src += idx[i] * st[a]
			}
			out.vals = append(out.vals, k.vals[src])
		}
		return c.fold(out, "transpose")
	}
	if x.moved != nil {
		return "", unsupported("", "Transpose of the output of Transpose node %s, which moves the batch axis", x.moved.node)
	}
	if p[0] != 0 && x.view == nil {
		// the batch axis moves: followed (batch_layout.go)
		return c.lazyTranspose(c.lazyOf(0), p)
	}
	if p[0] != 0 {
		// pending: a Split and Squeeze (or Gather) may take it apart
		perm := make([]int, len(p))
		for i, a := range p {
			perm[i] = int(a)
		}
		m := &movedBatch{src: x, perm: perm, hi: full[perm[0]], node: c.name}
		c.im.vals[c.n.Outputs[0]] = &value{moved: m}
		return "pending: moves the batch axis; only taking one entry of its first axis brings it back", nil
	}
	perm := make([]int, len(p)-1)
	ident := true
	out := make([]int, len(p)-1)
	for i, a := range p[1:] {
		perm[i] = int(a) - 1
		out[i] = x.shape[perm[i]]
		ident = ident && perm[i] == i
	}
	if ident {
		return "folded: identity permutation", c.setOutput(x)
	}
	l := c.newLayer("transpose", out)
	l.Fields = []Field{{"perm", perm}}
	return c.emit(l, x)
}

// ---- element-wise ----

func importUnary(op string) opImport {
	return func(c *nodeCtx) (string, error) {
		if op == "sqrt" && c.has(0) && c.ins[0].konst != nil && !c.ins[0].konst.hasBatch() {
			// the square root of shape arithmetic (an attention scale)
			k := c.ins[0].konst
			out := &constant{dims: slices.Clone(k.dims)}
			for _, v := range k.vals {
				if v < 0 {
					return "", unsupported("", "the square root of %v in a constant", v)
				}
				out.vals = append(out.vals, math.Sqrt(v))
			}
			return c.fold(out, "sqrt")
		}
		x, err := c.runtime(0)
		if err != nil {
			return "", err
		}
		l := c.newLayer(op, x.shape)
		switch op {
		case "reciprocal":
			l = c.newLayer("powconst", x.shape)
			l.Fields = []Field{{"value", -1}}
		case "leakyrelu":
			alpha, err := c.attrFloat("alpha", 0.01)
			if err != nil {
				return "", err
			}
			if alpha != 0.01 {
				l.Fields = []Field{{"alpha", alpha}}
			}
		case "gelu":
			approx, err := c.attrString("approximate", "none")
			if err != nil {
				return "", err
			}
			if approx != "none" {
				return "", unsupported("export with approximate='none'", "Gelu with approximate=%q; mlbuild's gelu is the exact erf form", approx)
			}
		}
		return c.emit(l, x)
	}
}

// importClip maps Clip to the element-wise ops mlbuild has: bounds [0, 6]
// are relu6 (MobileNet's ReLU6, as torch.nn.ReLU6 and F.hardtanh(x, 0, 6)
// export) and [0, +inf) is relu; other bounds are refused. The bounds are
// attributes before opset 11 and optional constant inputs from it on.
func importClip(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	bound := func(i int, name string, def float64) (float64, error) {
		if c.im.opset < 11 {
			return c.attrFloat(name, def)
		}
		if !c.has(i) || c.n.Inputs[i] == "" {
			return def, nil
		}
		k, err := c.konst(i, name)
		if err != nil {
			return 0, err
		}
		if k.size() != 1 {
			return 0, unsupported("", "Clip's %s has %d values; it must be one number", name, k.size())
		}
		return k.vals[0], nil
	}
	lo, err := bound(1, "min", math.Inf(-1))
	if err != nil {
		return "", err
	}
	hi, err := bound(2, "max", math.Inf(1))
	if err != nil {
		return "", err
	}
	var op string
	switch {
	case lo == 0 && hi == 6:
		op = "relu6"
	case lo == 0 && math.IsInf(hi, 1):
		op = "relu"
	default:
		return "", unsupported("use ReLU6 (bounds 0 and 6) or ReLU, or file an issue with the bounds your model needs",
			"Clip to [%v, %v]; mlbuild has relu6 ([0, 6]) and relu ([0, +inf))", lo, hi)
	}
	return c.emit(c.newLayer(op, x.shape), x)
}

func importSoftmax(op string) opImport {
	return func(c *nodeCtx) (string, error) {
		x, err := c.runtime(0)
		if err != nil {
			return "", err
		}
		r := len(x.shape) + 1
		def := int64(-1)
		if c.im.opset < 13 {
			def = 1
		}
		a, err := c.attrInt("axis", def)
		if err != nil {
			return "", err
		}
		ax, err := c.axis(a, r)
		if err != nil {
			return "", err
		}
		if ax == 0 {
			return "", unsupported("", "%s over the batch axis", c.n.OpType)
		}
		if by := x.maskedBy(); by != "" {
			if op != "softmax" || ax != r-1 {
				return "", unsupported("", "%s over axis %d of scores masked by node %s; mlbuild's causal and padding masks are a softmax's, over the keys (the last axis)", c.n.OpType, ax, by)
			}
			l := c.newLayer(op, x.shape)
			var masks []string
			if x.causal != "" {
				l.Fields = append(l.Fields, Field{"causal", true})
				masks = append(masks, "causal: the mask of "+x.causal)
			}
			if p := x.padded; p != nil {
				l.Fields = append(l.Fields, Field{"pad", p.id})
				masks = append(masks, fmt.Sprintf("pad: %d, the mask of %s", p.id, p.by))
			}
			how, err := c.emit(l, x)
			return how + " (" + strings.Join(masks, "; ") + ")", err
		}
		if c.im.opset < 13 && product(x.shape[ax:]) != 1 {
			// Before opset 13 the op normalises over all axes from axis
			// on, flattened: view them as one axis, normalise it, and
			// view the result back.
			flat := append(slices.Clone(x.shape[:ax-1]), product(x.shape[ax-1:]))
			l := c.newLayer(op, flat)
			return c.emitReshaped(l, c.reshaped(x, flat), x.shape)
		}
		l := c.newLayer(op, x.shape)
		if ax != r-1 {
			l.Fields = []Field{{"axis", ax - 1}}
		}
		return c.emit(l, x)
	}
}

// importBinary imports Add, Sub, Mul and Div: of two runtime values an
// element-wise layer; with a constant operand, a bias folded into the
// dense or conv2d layer before it, or addconst/mulconst for a scalar.
func importBinary(c *nodeCtx) (string, error) {
	if !c.has(0) || !c.has(1) {
		return "", unsupported("", "%s needs two inputs", c.n.OpType)
	}
	a, b := c.ins[0], c.ins[1]
	op := strings.ToLower(c.n.OpType)
	if a.keyPad != nil || b.keyPad != nil {
		return c.binaryPadMask(a, b)
	}
	if by := cmp.Or(a.maskedBy(), b.maskedBy()); by != "" {
		// an Add to masked scores must be a further mask
		if op == "add" && (a.konst != nil) != (b.konst != nil) {
			x, k := a, b.konst
			if a.konst != nil {
				x, k = b, a.konst
			}
			if how, ok, err := c.foldAdditiveMask(x, k); ok || err != nil {
				return how, err
			}
		}
		return "", unsupported("", "%s of attention scores masked by node %s; mlbuild masks scores only in a softmax (the mask's only reader a Softmax over the keys)", c.n.OpType, by)
	}
	if a.konst != nil && b.konst != nil {
		return foldBinary(c, op, a.konst, b.konst)
	}
	if a.konst == nil && b.konst == nil {
		sa, sb := a.shape, b.shape
		out, ok := broadcastShapes(sa, sb)
		if !ok || len(sa) != len(sb) {
			return "", unsupported("", "shapes %s and %s do not broadcast per sample", shapeText(sa), shapeText(sb))
		}
		return c.emit(c.newLayer(op, out), a, b)
	}
	x, k, constFirst := a, b.konst, false
	if a.konst != nil {
		x, k, constFirst = b, a.konst, true
	}
	if k.hasBatch() {
		return "", unsupported("", "arithmetic with the batch size")
	}
	if op == "add" {
		if how, ok, err := c.foldPositions(x, k, constFirst); ok || err != nil {
			return how, err
		}
		if how, ok, err := c.foldAdditiveMask(x, k); ok || err != nil {
			return how, err
		}
	}
	s, isScalar := k.scalar()
	if !isScalar || op == "add" {
		// a per-channel constant must fold; a scalar one folds into a bias
		// (as exporters write a bias), else becomes addconst or mulconst
		if how, ok, err := c.foldAffine(x, k, op, constFirst); ok || err != nil {
			return how, err
		}
	}
	if !isScalar || len(k.dims) > len(x.shape)+1 {
		return "", unsupported("", "%s with a constant of shape %s; mlbuild adds or multiplies only scalar constants, or folds one value per channel into the dense or conv2d layer before it when nothing else reads that layer", c.n.OpType, shapeText(k.dims))
	}
	var lop string
	var v float64
	switch {
	case op == "add":
		lop, v = "addconst", s
	case op == "mul":
		lop, v = "mulconst", s
	case op == "sub" && !constFirst:
		lop, v = "addconst", -s
	case op == "div" && !constFirst && s != 0:
		lop, v = "mulconst", 1/s
	default:
		return "", unsupported("", "%s with the constant as the first operand", c.n.OpType)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "", unsupported("", "the constant is not finite")
	}
	l := c.newLayer(lop, x.shape)
	l.Fields = []Field{{"value", v}}
	return c.emit(l, x)
}

// foldAffine folds x op k, for a constant k that is a scalar or holds one
// value per output channel (conv2d) or feature (dense), into the weights of
// the layer that produced x, when nothing else reads that layer: add and
// sub change (or create) the bias, mul and div scale the weight and bias.
// It reports whether it folded.
func (c *nodeCtx) foldAffine(x *value, k *constant, op string, constFirst bool) (string, bool, error) {
	if x.view != nil || x.layer == "input" || (constFirst && (op == "sub" || op == "div")) {
		return "", false, nil
	}
	var l *Layer
	for _, cand := range c.im.out.Layers {
		if cand.Name == x.layer {
			l = cand
		}
	}
	if l == nil || (l.Op != "dense" && l.Op != "conv2d") || !slices.Equal(x.shape, l.OutShape) || c.im.layerReads(l.Name) != 1 {
		return "", false, nil
	}
	// the constant must vary along the channel (conv) or feature (dense:
	// the last axis) axis only: shape [..., ch] for dense, [..., ch, 1, 1]
	// for conv
	ch := l.OutShape[len(l.OutShape)-1]
	want := []int{ch}
	if l.Op == "conv2d" {
		ch = l.OutShape[0]
		want = []int{ch, 1, 1}
	}
	dims := slices.Clone(k.dims)
	for len(dims) > len(want) && dims[0] == 1 {
		dims = dims[1:]
	}
	per := make([]float64, ch)
	switch {
	case slices.Equal(dims, want):
		copy(per, k.vals)
	case k.size() == 1:
		for i := range per {
			per[i] = k.vals[0]
		}
	default:
		return "", false, nil
	}
	var bias []float32
	if len(l.Params) == 2 {
		bias = l.Params[1].Data
	}
	switch op {
	case "add", "sub":
		if bias == nil {
			bias = make([]float32, ch)
			l.Params = append(l.Params, Param{Suffix: "bias", Shape: []int{ch}, Data: bias})
			l.Fields = slices.DeleteFunc(l.Fields, func(f Field) bool { return f.Name == "bias" })
		}
		for i, v := range per {
			if op == "sub" {
				v = -v
			}
			bias[i] = float32(float64(bias[i]) + v)
		}
	case "mul", "div":
		w := l.Params[0].Data
		row := len(w) / ch
		for i, v := range per {
			if op == "div" {
				if v == 0 {
					return "", false, nil
				}
				v = 1 / v
			}
			for j := i * row; j < (i+1)*row; j++ {
				w[j] = float32(float64(w[j]) * v)
			}
			if bias != nil {
				bias[i] = float32(float64(bias[i]) * v)
			}
		}
	default:
		return "", false, nil
	}
	l.Source += " + " + c.name + " (" + c.n.OpType + ")"
	c.layerName = l.Name
	// this node's read of the layer is spent: its output takes over
	xi := 0
	if constFirst {
		xi = 1
	}
	c.im.uses[c.n.Inputs[xi]]--
	what := map[string]string{"add": "the bias", "sub": "the bias", "mul": "the weight and bias", "div": "the weight and bias"}[op]
	return fmt.Sprintf("folded: into %s of %s", what, l.Name), true, c.setOutput(x)
}

func foldBinary(c *nodeCtx, op string, a, b *constant) (string, error) {
	if a.hasBatch() || b.hasBatch() {
		// the batch size times a number (B·H where attention merges the
		// batch with its heads) stays the batch size, with a multiplier
		if op == "mul" && a.size() == 1 && b.size() == 1 && a.hasBatch() != b.hasBatch() && len(a.dims) == 0 && len(b.dims) == 0 {
			m := a.vals[0] * b.vals[0]
			if m != math.Trunc(m) || m < 1 || m > MaxElements {
				return "", unsupported("", "the batch size times %v", m)
			}
			return c.fold(&constant{vals: []float64{m}, batch: []bool{true}, ints: a.ints && b.ints}, op)
		}
		return "", unsupported("", "arithmetic with the batch size")
	}
	dims, ok := broadcastShapes(a.dims, b.dims)
	if !ok {
		return "", unsupported("", "constant shapes %v and %v do not broadcast", a.dims, b.dims)
	}
	if err := checkFoldSize(dims); err != nil {
		return "", err
	}
	out := &constant{dims: dims, ints: a.ints && b.ints}
	n := product(dims)
	at := func(k *constant, i int) float64 { return broadcastAt(k, dims, i) }
	for i := 0; i < n; i++ {
		x, y := at(a, i), at(b, i)
		var v float64
		switch op {
		case "add":
			v = x + y
		case "sub":
			v = x - y
		case "mul":
			v = x * y
		case "div":
			if y == 0 {
				return "", unsupported("", "division by zero in a constant")
			}
			v = x / y
			if out.ints {
				v = math.Trunc(v)
			}
		case "pow":
			v = math.Pow(x, y)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return "", unsupported("", "%v to the power %v in a constant is not a finite number", x, y)
			}
		}
		out.vals = append(out.vals, v)
	}
	return c.fold(out, op)
}

// broadcastShapes applies numpy's rule.
func broadcastShapes(a, b []int) ([]int, bool) {
	r := max(len(a), len(b))
	out := make([]int, r)
	for i := 0; i < r; i++ {
		x, y := 1, 1
		if j := i - (r - len(a)); j >= 0 {
			x = a[j]
		}
		if j := i - (r - len(b)); j >= 0 {
			y = b[j]
		}
		switch {
		case x == y || y == 1:
			out[i] = x
		case x == 1:
			out[i] = y
		default:
			return nil, false
		}
	}
	return out, true
}

// importPow imports Pow with a constant scalar exponent as powconst, and
// folds the Pow of two constants (shape arithmetic such as PyTorch's
// `q.size(-1) ** 0.5` for attention's scale).
func importPow(c *nodeCtx) (string, error) {
	if c.has(0) && c.has(1) && c.ins[0].konst != nil && c.ins[1].konst != nil {
		return foldBinary(c, "pow", c.ins[0].konst, c.ins[1].konst)
	}
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	if !c.has(1) {
		return "", unsupported("", "Pow needs an exponent")
	}
	if c.ins[1].konst == nil {
		return "", unsupported("", "the exponent %q depends on the model input; mlbuild raises values only to a constant power (powconst)", c.n.Inputs[1])
	}
	p, ok := c.ins[1].konst.scalar()
	if !ok {
		return "", unsupported("", "the exponent %q is a constant of shape %s with different values; mlbuild raises every element to one constant power", c.n.Inputs[1], shapeText(c.ins[1].konst.dims))
	}
	if len(c.ins[1].konst.dims) > len(x.shape)+1 {
		return "", unsupported("", "the exponent's shape %s has more axes than the input", shapeText(c.ins[1].konst.dims))
	}
	if math.IsInf(p, 0) || math.IsNaN(p) {
		return "", unsupported("", "the exponent is %v", p)
	}
	l := c.newLayer("powconst", x.shape)
	l.Fields = []Field{{"value", p}}
	return c.emit(l, x)
}

// ---- reductions ----

// reduceAxes reads ReduceMean's axes (an attribute before opset 18, an
// optional input since) as per-sample axes (0 is the first axis after the
// batch), sorted, and keepdims.
func (c *nodeCtx) reduceAxes(x *value) ([]int, bool, error) {
	var axes []int64
	if c.im.opset < 18 {
		a, _, err := c.attrInts("axes")
		if err != nil {
			return nil, false, err
		}
		axes = a
	} else if c.has(1) {
		k, err := c.konst(1, "axes")
		if err != nil {
			return nil, false, err
		}
		for _, v := range k.vals {
			axes = append(axes, int64(v))
		}
	}
	keep, err := c.attrInt("keepdims", 1)
	if err != nil {
		return nil, false, err
	}
	if len(axes) == 0 {
		if noop, err := c.attrInt("noop_with_empty_axes", 0); err == nil && noop != 0 {
			return nil, keep != 0, nil
		}
		return nil, false, unsupported("give the axes to average over (dim=...)", "%s without axes averages over every axis, the batch axis included; mlbuild's batch axis is implicit", c.n.OpType)
	}
	r := len(x.shape) + 1
	var out []int
	for _, a := range axes {
		ax, err := c.axis(a, r)
		if err != nil {
			return nil, false, err
		}
		if ax == 0 {
			return nil, false, unsupported("", "%s over the batch axis; mlbuild's batch axis is implicit and reductions are per sample", c.n.OpType)
		}
		if slices.Contains(out, ax-1) {
			return nil, false, unsupported("", "axis %d is listed twice", a)
		}
		out = append(out, ax-1)
	}
	slices.Sort(out)
	return out, keep != 0, nil
}

// reducedShape is shape with axes reduced: kept with size 1, or dropped.
func reducedShape(shape, axes []int, keep bool) []int {
	out := []int{}
	for i, d := range shape {
		switch {
		case !slices.Contains(axes, i):
			out = append(out, d)
		case keep:
			out = append(out, 1)
		}
	}
	return out
}

func importReduceMean(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	axes, keep, err := c.reduceAxes(x)
	if err != nil {
		return "", err
	}
	if len(axes) == 0 { // noop_with_empty_axes
		return "folded: a reduction over no axes", c.setOutput(x)
	}
	l := c.newLayer("reducemean", reducedShape(x.shape, axes, keep))
	l.Fields = []Field{{"axes", axes}}
	if !keep {
		l.Fields = append(l.Fields, Field{"keepdims", false})
	}
	return c.emit(l, x)
}

// ---- dense ----

func importGemm(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	w, err := c.konst(1, "weight B")
	if err != nil {
		return "", err
	}
	transA, err := c.attrInt("transA", 0)
	if err != nil {
		return "", err
	}
	transB, err := c.attrInt("transB", 0)
	if err != nil {
		return "", err
	}
	alpha, err := c.attrFloat("alpha", 1)
	if err != nil {
		return "", err
	}
	beta, err := c.attrFloat("beta", 1)
	if err != nil {
		return "", err
	}
	if transA != 0 {
		return "", unsupported("", "transA=1 transposes the input batch")
	}
	if len(x.shape) < 1 || len(w.dims) != 2 {
		return "", unsupported("", "Gemm of %s per sample and a weight of shape %v; want a vector per sample and a matrix", shapeText(x.shape), w.dims)
	}
	// a vector per sample, or (where the batch axis merged with others:
	// batch_layout.go) rows of them
	k := x.shape[len(x.shape)-1]
	rows, cols := w.dims[0], w.dims[1] // [K, N], or [N, K] with transB
	n := cols
	if transB != 0 {
		n = rows
	}
	if (transB == 0 && rows != k) || (transB != 0 && cols != k) {
		return "", unsupported("", "the weight %v does not multiply an input of %d features (transB=%d)", w.dims, k, transB)
	}
	weight := make([]float32, n*k)
	for o := 0; o < n; o++ {
		for i := 0; i < k; i++ {
			v := w.vals[i*n+o]
			if transB != 0 {
				v = w.vals[o*k+i]
			}
			weight[o*k+i] = float32(alpha * v)
		}
	}
	l := c.newLayer("dense", append(slices.Clone(x.shape[:len(x.shape)-1]), n))
	l.Fields = []Field{{"units", n}, {"inFeatures", k}}
	l.Params = []Param{{Suffix: "weight", Shape: []int{n, k}, Data: weight}}
	var how []string
	if transB != 0 {
		how = append(how, "transB")
	}
	if alpha != 1 {
		how = append(how, fmt.Sprintf("alpha %v folded into the weight", alpha))
	}
	if c.has(2) && beta != 0 {
		bk, err := c.konst(2, "bias C")
		if err != nil {
			return "", err
		}
		dims := slices.Clone(bk.dims)
		for len(dims) > 1 && dims[0] == 1 {
			dims = dims[1:]
		}
		bias := make([]float32, n)
		switch {
		case bk.size() == 1:
			for i := range bias {
				bias[i] = float32(beta * bk.vals[0])
			}
		case slices.Equal(dims, []int{n}):
			for i := range bias {
				bias[i] = float32(beta * bk.vals[i])
			}
		default:
			return "", unsupported("", "bias C of shape %v is not one value per output feature (%d)", bk.dims, n)
		}
		l.Params = append(l.Params, Param{Suffix: "bias", Shape: []int{n}, Data: bias})
		if beta != 1 {
			how = append(how, fmt.Sprintf("beta %v folded into the bias", beta))
		}
	} else {
		l.Fields = append(l.Fields, Field{"bias", false})
	}
	op, err := c.emit(l, x)
	if len(how) > 0 {
		op += " (" + strings.Join(how, ", ") + ")"
	}
	return op, err
}

func importMatMul(c *nodeCtx) (string, error) {
	if !c.has(0) || !c.has(1) {
		return "", unsupported("", "MatMul needs two inputs")
	}
	a, b := c.ins[0], c.ins[1]
	if a.konst != nil && b.konst != nil {
		return "", unsupported("", "MatMul of two constants")
	}
	if a.konst != nil {
		return "", unsupported("", "MatMul with a constant first operand")
	}
	if b.konst == nil {
		if len(a.shape) < 2 || len(b.shape) < 2 {
			return "", unsupported("", "MatMul of %s and %s per sample; mlbuild's matmul needs rank 2 or more", shapeText(a.shape), shapeText(b.shape))
		}
		ra, rb := len(a.shape), len(b.shape)
		if a.shape[ra-1] != b.shape[rb-2] {
			return "", unsupported("", "inner sizes differ: %s and %s", shapeText(a.shape), shapeText(b.shape))
		}
		batch, ok := broadcastShapes(a.shape[:ra-2], b.shape[:rb-2])
		if !ok {
			return "", unsupported("", "batch axes of %s and %s do not broadcast", shapeText(a.shape), shapeText(b.shape))
		}
		out := append(batch, a.shape[ra-2], b.shape[rb-1])
		return c.emit(c.newLayer("matmul", out), a, b)
	}
	// by a constant matrix: a dense layer on the last axis, the same
	// weight for every row of the others (PyTorch's Linear on [tokens,
	// features] samples)
	w := b.konst
	if len(a.shape) < 1 || len(w.dims) != 2 {
		return "", unsupported("", "MatMul of %s per sample by a constant of shape %v; mlbuild's dense layer multiplies the last axis by a matrix", shapeText(a.shape), w.dims)
	}
	k, n := w.dims[0], w.dims[1]
	if last := a.shape[len(a.shape)-1]; k != last {
		return "", unsupported("", "the weight %v does not multiply %d features", w.dims, last)
	}
	weight := make([]float32, n*k)
	for o := 0; o < n; o++ {
		for i := 0; i < k; i++ {
			weight[o*k+i] = float32(w.vals[i*n+o])
		}
	}
	l := c.newLayer("dense", append(slices.Clone(a.shape[:len(a.shape)-1]), n))
	l.Fields = []Field{{"units", n}, {"inFeatures", k}, {"bias", false}}
	l.Params = []Param{{Suffix: "weight", Shape: []int{n, k}, Data: weight}}
	return c.emit(l, a)
}

// ---- windows ----

// pair writes an int when both entries agree, else [h, w].
func pair(p [2]int) any {
	if p[0] == p[1] {
		return p[0]
	}
	return []int{p[0], p[1]}
}

// windowField is a window parameter as the spec writes it: the length
// alone for a 1-D window (conv1d, maxpool1d, avgpool1d), else a pair.
func windowField(oneD bool, p [2]int) any {
	if oneD {
		return p[1]
	}
	return pair(p)
}

// windowGeom is the geometry of a convolution or pooling window in
// mlbuild's terms: symmetric padding, and whether the output rounds down.
type windowGeom struct {
	stride, pad, dil [2]int
	out              [2]int
	floor            bool
	ceil             bool // ceil_mode kept a partial last window (rounding: "ceil")
	own              bool // the node pads by itself (not only a Pad before it)
}

// window reads the strides, pads, dilations, auto_pad and ceil_mode of a
// Conv or pooling node over input x ([C, H, W] per sample) with the given
// kernel, and computes the output size with mlbuild's window rule. A 1-D
// window (oneD: the node's attributes have one entry per axis, and x is the
// [C, L] input viewed as [C, 1, L]) is the 2-D window of height 1.
func (c *nodeCtx) window(x *value, kernel [2]int, oneD bool) (windowGeom, error) {
	var g windowGeom
	if len(x.shape) != 3 {
		return g, unsupported("", "%s over %s per sample; mlbuild's windows are 1-D or 2-D over [channels, (height,) width]", c.n.OpType, shapeText(x.shape))
	}
	read := func(name string, n int, def int) ([]int, error) {
		v, ok, err := c.attrInts(name)
		if err != nil {
			return nil, err
		}
		want := n
		if oneD {
			want = n / 2
		}
		out := make([]int, want)
		for i := range out {
			out[i] = def
		}
		if ok {
			if len(v) != want {
				return nil, unsupported("", "attribute %s has %d entries, want %d", name, len(v), want)
			}
			for i, e := range v {
				if e < 0 || e > MaxElements {
					return nil, unsupported("", "attribute %s entry %d is %d", name, i, e)
				}
				out[i] = int(e)
			}
		}
		if oneD {
			// height: kernel 1, stride 1, no padding, dilation 1
			h := 1
			if name == "pads" {
				h = 0
			}
			if n == 4 {
				return []int{h, out[0], h, out[1]}, nil
			}
			return []int{h, out[0]}, nil
		}
		return out, nil
	}
	s, err := read("strides", 2, 1)
	if err != nil {
		return g, err
	}
	d, err := read("dilations", 2, 1)
	if err != nil {
		return g, err
	}
	p, err := read("pads", 4, 0)
	if err != nil {
		return g, err
	}
	autoPad, err := c.attrString("auto_pad", "NOTSET")
	if err != nil {
		return g, err
	}
	ceil, err := c.attrInt("ceil_mode", 0)
	if err != nil {
		return g, err
	}
	g.own = p[0] != 0 || p[1] != 0 || p[2] != 0 || p[3] != 0 || (autoPad != "NOTSET" && autoPad != "" && autoPad != "VALID")
	if x.pad != [4]int{} {
		if autoPad != "NOTSET" && autoPad != "" {
			return g, unsupported("", "auto_pad %q after a Pad node", autoPad)
		}
		for i := range p {
			p[i] += x.pad[i]
		}
	}
	for i := 0; i < 2; i++ {
		if s[i] < 1 || d[i] < 1 || kernel[i] < 1 {
			return g, unsupported("", "strides, dilations and kernel must be at least 1")
		}
		in := x.shape[i+1]
		span := d[i]*(kernel[i]-1) + 1
		switch autoPad {
		case "NOTSET", "":
		case "VALID":
			p[i], p[i+2] = 0, 0
		case "SAME_UPPER", "SAME_LOWER":
			outSize := (in + s[i] - 1) / s[i]
			total := max((outSize-1)*s[i]+span-in, 0)
			p[i], p[i+2] = total/2, total-total/2
			if autoPad == "SAME_LOWER" {
				p[i], p[i+2] = p[i+2], p[i]
			}
		default:
			return g, unsupported("", "auto_pad %q", autoPad)
		}
		if p[i] != p[i+2] {
			// Asymmetric padding is exact as the symmetric padding of its
			// start when both give the same number of windows: the windows
			// start at the same place, and none reaches the end padding
			// that differs.
			asym, sym := in+p[i]+p[i+2]-span, in+2*p[i]-span
			if asym < 0 || sym < 0 || asym/s[i] != sym/s[i] || (ceil != 0 && asym%s[i] != 0) {
				return g, unsupported("pad the input symmetrically, or choose a kernel and stride whose padding is even", "pads %v are not symmetric (%s %d before, %d after) and the last window reads the padding that differs; mlbuild pads both sides alike", p, []string{"height", "width"}[i], p[i], p[i+2])
			}
			p[i+2] = p[i]
		}
		num := in + 2*p[i] - span
		if num < 0 {
			return g, unsupported("", "the window (extent %d) is larger than the padded input (%d)", span, in+2*p[i])
		}
		g.stride[i], g.pad[i], g.dil[i] = s[i], p[i], d[i]
		g.out[i] = num/s[i] + 1
		if num%s[i] != 0 {
			// ceil_mode keeps a partial last window unless it would start
			// in the trailing padding (ONNX's and PyTorch's rule, the
			// schema's rounding: "ceil"); when that drops it, the floor
			// size stands.
			if ceil != 0 && (g.out[i])*s[i] < in+p[i] {
				g.out[i]++
				g.ceil = true
			} else {
				g.floor = true
			}
		}
	}
	return g, nil
}

func importConv(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	w, err := c.konst(1, "weight")
	if err != nil {
		return "", err
	}
	oneD := len(w.dims) == 3 && len(x.shape) == 2
	if !oneD && (len(w.dims) != 4 || len(x.shape) != 3) {
		return "", unsupported("", "Conv over %s per sample with a weight of rank %d: only 1-D and 2-D convolutions are supported", shapeText(x.shape), len(w.dims))
	}
	wdims := slices.Clone(w.dims)
	in := x
	if oneD {
		// a 1-D convolution is the 2-D one over [C, 1, L] with kernel [1, k]
		wdims = []int{w.dims[0], w.dims[1], 1, w.dims[2]}
		in = c.reshaped1D(x)
	}
	group, err := c.attrInt("group", 1)
	if err != nil {
		return "", err
	}
	oc, icg, kh, kw := wdims[0], wdims[1], wdims[2], wdims[3]
	if group < 1 || int64(x.shape[0]) != int64(icg)*group || int64(oc)%group != 0 {
		return "", unsupported("", "weight %v with group %d does not fit %d input channels", w.dims, group, x.shape[0])
	}
	if ks, ok, err := c.attrInts("kernel_shape"); err != nil {
		return "", err
	} else if ok && !slices.Equal(toInts(ks), w.dims[2:]) {
		return "", unsupported("", "kernel_shape %v disagrees with the weight %v", ks, w.dims)
	}
	g, err := c.window(in, [2]int{kh, kw}, oneD)
	if err != nil {
		return "", err
	}
	// a 1-D convolution is a conv1d layer over x as it is, with the
	// weight as ONNX (and PyTorch's Conv1d) has it
	var l *Layer
	if oneD {
		l = c.newLayer("conv1d", []int{oc, g.out[1]})
		wdims = w.dims
	} else {
		l = c.newLayer("conv2d", []int{oc, g.out[0], g.out[1]})
		x = in
	}
	if x.padNode != "" {
		l.Source = x.padNode + " (Pad) + " + l.Source
	}
	l.Fields = []Field{{"outChannels", oc}, {"kernel", windowField(oneD, [2]int{kh, kw})}}
	if g.stride != [2]int{1, 1} {
		l.Fields = append(l.Fields, Field{"stride", windowField(oneD, g.stride)})
	}
	if g.pad != [2]int{} {
		l.Fields = append(l.Fields, Field{"padding", windowField(oneD, g.pad)})
	}
	if g.dil != [2]int{1, 1} {
		l.Fields = append(l.Fields, Field{"dilation", windowField(oneD, g.dil)})
	}
	if group != 1 {
		l.Fields = append(l.Fields, Field{"groups", int(group)})
	}
	if g.floor {
		l.Fields = append(l.Fields, Field{"rounding", "floor"})
	}
	l.Fields = append(l.Fields, Field{"inChannels", x.shape[0]})
	l.Params = []Param{{Suffix: "weight", Shape: wdims, Data: w.float32s()}}
	if c.has(2) {
		b, err := c.konst(2, "bias")
		if err != nil {
			return "", err
		}
		if b.size() != oc {
			return "", unsupported("", "bias of %d values for %d output channels", b.size(), oc)
		}
		l.Params = append(l.Params, Param{Suffix: "bias", Shape: []int{oc}, Data: b.float32s()})
	} else {
		l.Fields = append(l.Fields, Field{"bias", false})
	}
	return c.emit(l, x)
}

func importPool(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	ks, ok, err := c.attrInts("kernel_shape")
	if err != nil {
		return "", err
	}
	oneD := ok && len(ks) == 1 && len(x.shape) == 2
	if !oneD && (!ok || len(ks) != 2 || len(x.shape) != 3) {
		return "", unsupported("", "kernel_shape %v over %s per sample: only 1-D and 2-D pooling is supported", ks, shapeText(x.shape))
	}
	for _, k := range ks {
		if k < 1 || k > MaxElements {
			return "", unsupported("", "kernel_shape %v", ks)
		}
	}
	var kernel [2]int
	in := x
	if oneD {
		kernel = [2]int{1, int(ks[0])}
		in = c.reshaped1D(x)
	} else {
		kernel = [2]int{int(ks[0]), int(ks[1])}
	}
	g, err := c.window(in, kernel, oneD)
	if err != nil {
		return "", err
	}
	op, excludePad := "maxpool2d", false
	if c.n.OpType == "AveragePool" {
		op = "avgpool2d"
		include, err := c.attrInt("count_include_pad", 0)
		if err != nil {
			return "", err
		}
		// The zeros of a Pad node before the pool always count in the
		// divisor; count_include_pad says whether the node's own pads do.
		// avgpool2d's countIncludePad covers all its padding alike, and a
		// window rounded up (ceil_mode) is divided by its part inside the
		// padded input either way, as ONNX and PyTorch do.
		if g.own && include == 0 {
			if x.pad != [4]int{} {
				return "", unsupported("pad in one place: the Pad node or the AveragePool's pads", "count_include_pad=0 with pads of its own after Pad node %s: the Pad's zeros count in the divisor and its own do not, which avgpool2d's one countIncludePad cannot say", x.padNode)
			}
			excludePad = true
		}
		if g.dil != [2]int{1, 1} {
			return "", unsupported("", "AveragePool with dilations")
		}
	}
	for i, axis := range []string{"height", "width"} {
		span := g.dil[i]*(kernel[i]-1) + 1
		if g.pad[i] > span/2 {
			return "", unsupported("use padding of at most half the window", "padding %d along the %s is more than half the window (%d), so a window could cover padding alone; mlbuild refuses such pooling, as PyTorch does", g.pad[i], axis, span)
		}
		if g.pad[i] > 0 && g.dil[i] > in.shape[i+1] {
			return "", unsupported("", "dilation %d with padding is wider than the input %s %d, so a window can cover no input element", g.dil[i], axis, in.shape[i+1])
		}
	}
	var l *Layer
	if oneD {
		// maxpool1d or avgpool1d over x as it is
		l = c.newLayer(strings.Replace(op, "2d", "1d", 1), []int{x.shape[0], g.out[1]})
	} else {
		l = c.newLayer(op, []int{x.shape[0], g.out[0], g.out[1]})
	}
	if x.padNode != "" {
		l.Source = x.padNode + " (Pad) + " + l.Source
	}
	l.Fields = []Field{{"kernel", windowField(oneD, kernel)}}
	if g.stride != kernel {
		l.Fields = append(l.Fields, Field{"stride", windowField(oneD, g.stride)})
	}
	if g.pad != [2]int{} {
		l.Fields = append(l.Fields, Field{"padding", windowField(oneD, g.pad)})
	}
	if g.dil != [2]int{1, 1} {
		l.Fields = append(l.Fields, Field{"dilation", windowField(oneD, g.dil)})
	}
	switch {
	case g.ceil:
		l.Fields = append(l.Fields, Field{"rounding", "ceil"})
	case g.floor:
		l.Fields = append(l.Fields, Field{"rounding", "floor"})
	}
	if excludePad {
		l.Fields = append(l.Fields, Field{"countIncludePad", false})
	}
	return c.emit(l, x)
}

func importGlobalAvgPool(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	kept := []int{x.shape[0], 1, 1}
	switch len(x.shape) {
	case 3:
	case 2:
		kept = []int{x.shape[0], 1}
	default:
		return "", unsupported("", "GlobalAveragePool over %s per sample; only [channels, length] and [channels, height, width] are supported", shapeText(x.shape))
	}
	l := c.newLayer("globalavgpool", []int{x.shape[0]})
	c.layerName = l.Name
	v := c.im.addLayer(l, x)
	// ONNX keeps the pooled axes as 1 (1×1); mlbuild's op drops them. The
	// value is a view of shape [C, 1] or [C, 1, 1] until a flatten makes
	// it [C].
	view := &Layer{Name: c.im.layerName(nil, "reshape"), Op: "reshape", OutShape: kept, Source: l.Source, Fields: []Field{{"shape", kept}}}
	return "globalavgpool", c.setOutput(&value{layer: v.layer, lshape: v.lshape, shape: view.OutShape, view: view})
}

// ---- normalisation ----

func importBatchNorm(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	if len(x.shape) == 0 {
		return "", unsupported("", "BatchNormalization of a scalar per sample")
	}
	if tm, err := c.attrInt("training_mode", 0); err != nil || tm != 0 {
		return "", unsupported("export in eval mode (model.eval())", "training_mode=1 normalises with batch statistics; an imported model runs in inference mode")
	}
	if sp, err := c.attrInt("spatial", 1); err != nil || sp != 1 {
		return "", unsupported("", "spatial=0 (statistics per element, not per channel)")
	}
	eps, err := c.attrFloat("epsilon", 1e-5)
	if err != nil {
		return "", err
	}
	mom, err := c.attrFloat("momentum", 0.9)
	if err != nil {
		return "", err
	}
	ch := x.shape[0]
	l := c.newLayer("batchnorm", x.shape)
	for i, suffix := range []string{"weight", "bias", "running_mean", "running_var"} {
		k, err := c.konst(i+1, suffix)
		if err != nil {
			return "", err
		}
		if k.size() != ch {
			return "", unsupported("", "%s has %d values for %d channels", suffix, k.size(), ch)
		}
		if suffix == "running_var" {
			for _, v := range k.vals {
				if v+eps <= 0 {
					return "", unsupported("", "running variance %v plus epsilon is not positive", v)
				}
			}
		}
		l.Params = append(l.Params, Param{Suffix: suffix, Shape: []int{ch}, Data: k.float32s()})
	}
	if eps <= 0 {
		return "", unsupported("", "epsilon %v is not positive", eps)
	}
	if eps != 1e-5 {
		l.Fields = append(l.Fields, Field{"eps", eps})
	}
	// ONNX's momentum weighs the running statistic; mlbuild's (PyTorch's)
	// weighs the new batch.
	if m := shortFloat(float32(1 - mom)); m >= 0 && m <= 1 && m != 0.1 {
		l.Fields = append(l.Fields, Field{"momentum", m})
	}
	if len(x.shape) > 3 {
		// statistics per channel over any other axes: view them as
		// [C, rest, last], which mlbuild normalises alike
		v := []int{ch, product(x.shape[1 : len(x.shape)-1]), x.shape[len(x.shape)-1]}
		l.OutShape = v
		return c.emitReshaped(l, c.reshaped(x, v), x.shape)
	}
	return c.emit(l, x)
}

// affineParam expands a layer normalisation's scale or bias (a constant
// that broadcasts to the normalised shape, as ONNX allows) to that shape.
func affineParam(k *constant, norm []int) ([]float32, bool) {
	if k.hasBatch() || len(k.dims) > len(norm) {
		return nil, false
	}
	off := len(norm) - len(k.dims)
	for i, d := range k.dims {
		if d != 1 && d != norm[off+i] {
			return nil, false
		}
	}
	n := product(norm)
	out := make([]float32, n)
	st := strides(k.dims)
	for i := range out {
		src, rem := 0, i
		for d := len(norm) - 1; d >= 0; d-- {
			pos := rem % norm[d]
			rem /= norm[d]
			if kd := d - off; kd >= 0 && k.dims[kd] != 1 {
				src += pos * st[kd]
			}
		}
		out[i] = float32(k.vals[src])
	}
	return out, true
}

// layerNormLayer makes a layernorm layer normalising x's per-sample axes
// from axis on, with the given scale and (optional) bias constants.
func (c *nodeCtx) layerNormLayer(l *Layer, x *value, axis int, eps float64, scale, bias *constant) error {
	norm := x.shape[axis:]
	var w []float32
	if scale == nil {
		w = make([]float32, product(norm))
		for i := range w {
			w[i] = 1
		}
	} else {
		var ok bool
		if w, ok = affineParam(scale, norm); !ok {
			return unsupported("", "the scale's shape %s does not broadcast to the normalised shape %s", shapeText(scale.dims), shapeText(norm))
		}
	}
	l.Params = []Param{{Suffix: "weight", Shape: slices.Clone(norm), Data: w}}
	if bias != nil {
		b, ok := affineParam(bias, norm)
		if !ok {
			return unsupported("", "the bias's shape %s does not broadcast to the normalised shape %s", shapeText(bias.dims), shapeText(norm))
		}
		l.Params = append(l.Params, Param{Suffix: "bias", Shape: slices.Clone(norm), Data: b})
	}
	if !(eps > 0) || math.IsInf(eps, 0) {
		return unsupported("", "epsilon %v is not positive", eps)
	}
	if axis != len(x.shape)-1 {
		l.Fields = append(l.Fields, Field{"axis", axis})
	}
	if eps != 1e-5 {
		l.Fields = append(l.Fields, Field{"eps", eps})
	}
	if bias == nil {
		l.Fields = append(l.Fields, Field{"bias", false})
	}
	return nil
}

// importLayerNorm imports LayerNormalization (opset 17): each sample is
// normalised over the axes from axis on by its own statistics.
func importLayerNorm(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	a, err := c.attrInt("axis", -1)
	if err != nil {
		return "", err
	}
	ax, err := c.axis(a, len(x.shape)+1)
	if err != nil {
		return "", err
	}
	if ax == 0 {
		return "", unsupported("", "LayerNormalization with axis 0 normalises over the batch axis; mlbuild normalises each sample on its own")
	}
	if st, err := c.attrInt("stash_type", 1); err != nil || st != 1 {
		return "", unsupported("", "stash_type %d: mlbuild computes the statistics in float32", st)
	}
	eps, err := c.attrFloat("epsilon", 1e-5)
	if err != nil {
		return "", err
	}
	scale, err := c.konst(1, "scale")
	if err != nil {
		return "", err
	}
	var bias *constant
	if c.has(2) {
		if bias, err = c.konst(2, "bias"); err != nil {
			return "", err
		}
	}
	l := c.newLayer("layernorm", x.shape)
	if err := c.layerNormLayer(l, x, ax-1, eps, scale, bias); err != nil {
		return "", err
	}
	return c.emit(l, x)
}

// importPad records a constant zero padding of height and width for the
// Conv or AveragePool that reads it (PyTorch exports AvgPool2d's padding
// this way); a Pad of nothing is folded away.
func importPad(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	mode, err := c.attrString("mode", "constant")
	if err != nil {
		return "", err
	}
	var pads []int64
	fill := 0.0
	if c.im.opset < 11 {
		var ok bool
		if pads, ok, err = c.attrInts("pads"); err != nil || !ok {
			return "", unsupported("", "Pad without pads")
		}
		if fill, err = c.attrFloat("value", 0); err != nil {
			return "", err
		}
	} else {
		k, err := c.konst(1, "pads")
		if err != nil {
			return "", err
		}
		for _, v := range k.vals {
			pads = append(pads, int64(v))
		}
		if c.has(2) {
			v, err := c.konst(2, "constant_value")
			if err != nil {
				return "", err
			}
			if fill, _ = v.scalar(); v.size() != 1 {
				return "", unsupported("", "constant_value is not a scalar")
			}
		}
		if c.has(3) {
			return "", unsupported("", "Pad with axes")
		}
	}
	r := len(x.shape) + 1
	if len(pads) != 2*r {
		return "", unsupported("", "pads %v for rank %d", pads, r)
	}
	zero := true
	for _, p := range pads {
		zero = zero && p == 0
	}
	if zero {
		return "folded: a Pad of nothing", c.setOutput(x)
	}
	if mode != "constant" || fill != 0 {
		return "", unsupported("", "Pad mode %q with value %v; mlbuild pads only with zeros, inside a convolution or average pooling", mode, fill)
	}
	// the padded axes: height and width of [N, C, H, W], or the length of
	// [N, C, L] (a 1-D Conv or AveragePool reads it as [C, 1, L])
	axes := []int{2, 3, 6, 7}
	if r == 3 {
		axes = []int{-1, 2, -1, 5}
	}
	if (r != 4 && r != 3) || pads[0] != 0 || pads[1] != 0 || pads[r] != 0 || pads[r+1] != 0 {
		return "", unsupported("", "pads %v: mlbuild pads only the height and width of [batch, channels, height, width] or the length of [batch, channels, length]", pads)
	}
	var hw [4]int
	for i, j := range axes {
		if j < 0 {
			continue
		}
		if pads[j] < 0 || pads[j] > MaxElements {
			return "", unsupported("", "pads %v: a negative or huge padding", pads)
		}
		hw[i] = int(pads[j])
	}
	if x.pad != [4]int{} {
		return "", unsupported("", "a Pad of a Pad")
	}
	v := *x
	v.pad, v.padNode = hw, c.name
	return "folded: padding taken over by the Conv or AveragePool that reads it", c.setOutput(&v)
}
