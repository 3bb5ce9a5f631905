package onnx

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Token models (nanoGPT and GPT-2 style language models) read integer
// token ids and add four patterns to the ops of a transformer block:
//
//   - Gather(weight [V, D], ids) of the graph's integer input: one
//     `embedding` layer (vocab V, dim D), the input becoming token ids
//     [T] per sample;
//   - an Add of a constant [T, D] (or [1, T, D]) to that layer's output:
//     the learned positions, Gather(wpe, arange(T)) folded at import time
//     (Range and Gather of constants fold), become the embedding's
//     `positions: true` and its "pos" param;
//   - a causal mask on attention scores [..., T, T] — masked_fill's
//     Where(tril == 0, -inf, scores), or an Add of a constant with 0 on
//     and below the diagonal and -inf above — read by a Softmax over the
//     keys: one `softmax` with `causal: true`;
//   - a padding mask, Equal of the token ids with one id, on the same
//     scores: the softmax's `pad` field (padding_mask.go).
//
// A head whose weight equals the embedding's (nanoGPT ties
// lm_head.weight to wte.weight; the export writes a transposed copy)
// becomes a dense layer tied to the embedding (tieHeads).

// isTokenIDType reports whether a graph input of this type can hold
// token ids.
func isTokenIDType(t DataType) bool { return t == Int64 || t == Int32 }

// tokenIDsShape checks that an integer input is token ids [batch, tokens]
// with the number of tokens fixed: mlbuild's spec fixes every per-sample
// size, and the positions and the causal mask are sized by it.
func tokenIDsShape(in *ValueInfo) error {
	if len(in.Dims) != 2 {
		return unsupported("export token ids as [batch, tokens]",
			"input %q is %v of rank %d; mlbuild reads an integer input only as token ids [batch, tokens]", in.Name, in.ElemType, len(in.Dims))
	}
	if d := in.Dims[1]; !d.Known || d.Value < 1 {
		return unsupported(fmt.Sprintf(`export at a fixed context length T: give torch.onnx.export ids of shape [1, T] and make only the batch axis dynamic, dynamic_axes={%q: {0: "batch"}, ...}; shorter prompts are padded or cropped to T`, in.Name),
			"input %q (token ids) has a dynamic sequence axis (axis 1 is %s); an mlbuild spec fixes the number of tokens, which sizes its positions and causal mask", in.Name, dimText(d))
	}
	return nil
}

// tokenRead refuses a node that reads token ids other than as an
// embedding's indices or in a padding mask's Equal, or masked scores
// other than as a Softmax's input (or a further mask's).
func tokenRead(n *Node, j int, v *value) error {
	if v.tokenIDs && n.OpType != "Shape" && n.OpType != "Equal" && (n.OpType != "Gather" || j != 1) {
		// the message predates padding masks and stays as it was:
		// testdata/onnx/backend.golden records it
		return unsupported("", "reads the model's token ids as input %d; mlbuild reads token ids only through an embedding (Gather of a constant table [vocab, dim] at the ids)", j)
	}
	// a second mask (a Where's scores or an Add) may come between the
	// first and the Softmax; importWhere and importBinary take it as a
	// mask or refuse it
	if by := v.maskedBy(); by != "" && (n.OpType != "Softmax" || j != 0) && (n.OpType != "Where" || j != 2) && n.OpType != "Add" {
		return unsupported("", "reads attention scores masked by node %s; mlbuild masks scores only in a softmax (the mask's only reader a Softmax over the keys)", by)
	}
	return nil
}

// importEmbedding imports Gather(table, ids) of the model's token ids as
// an embedding layer.
func importEmbedding(c *nodeCtx) (string, error) {
	ids := c.ins[1]
	if !ids.tokenIDs {
		return "", unsupported("", "Gather at indices that depend on the model input; mlbuild gathers only rows of a constant table at the model's token ids (an embedding)")
	}
	table, err := c.konst(0, "embedding table")
	if err != nil {
		return "", err
	}
	a, err := c.attrInt("axis", 0)
	if err != nil {
		return "", err
	}
	if len(table.dims) != 2 || (a != 0 && a != -2) {
		return "", unsupported("", "Gather along axis %d of a table of shape %s at the token ids; an embedding takes rows (axis 0) of a table [vocab, dim]", a, shapeText(table.dims))
	}
	if table.hasBatch() || table.ints {
		return "", unsupported("", "the embedding table is not a float tensor")
	}
	vocab, dim := table.dims[0], table.dims[1]
	l := c.newLayer("embedding", []int{ids.shape[0], dim})
	l.Fields = []Field{{"vocab", vocab}, {"dim", dim}}
	l.Params = []Param{{Suffix: "weight", Shape: []int{vocab, dim}, Data: table.float32s()}}
	how, err := c.emit(l, ids)
	return how + " (token ids)", err
}

// foldPositions folds an Add of a constant [T, D] to the output of an
// embedding layer (read by nothing else) into its learned positions.
func (c *nodeCtx) foldPositions(x *value, k *constant, constFirst bool) (string, bool, error) {
	if x.view != nil || x.layer == "input" {
		return "", false, nil
	}
	l := c.im.findLayer(x.layer)
	if l == nil || l.Op != "embedding" || len(l.Params) != 1 || c.im.layerReads(l.Name) != 1 {
		return "", false, nil
	}
	dims := slices.Clone(k.dims)
	for len(dims) > len(x.shape) && dims[0] == 1 {
		dims = dims[1:]
	}
	if !slices.Equal(dims, x.shape) {
		return "", false, nil
	}
	l.Fields = append(l.Fields, Field{"positions", true})
	l.Params = append(l.Params, Param{Suffix: "pos", Shape: slices.Clone(x.shape), Data: k.float32s()})
	l.Source += " + " + c.name + " (" + c.n.OpType + ")"
	c.layerName = l.Name
	xi := 0
	if constFirst {
		xi = 1
	}
	c.im.uses[c.n.Inputs[xi]]--
	return "folded: into the positions of " + l.Name, true, c.setOutput(x)
}

// findLayer returns the layer called name, or nil.
func (im *importer) findLayer(name string) *Layer {
	for _, l := range im.out.Layers {
		if l.Name == name {
			return l
		}
	}
	return nil
}

// maskFill reports whether v fills masked scores: -inf, or a number so
// negative (−1e9 and below, or float32's lowest) that its exp is 0.
func maskFill(v float64) bool { return v <= -1e9 }

// causalMask reports whether k, broadcast to scores [..., t, t], masks
// exactly the keys after each query: k's leading axes are 1, its last
// two [t, t], and masked(k[i][j]) holds exactly where j > i.
func causalMask(k *constant, t int, masked func(float64) bool) bool {
	if k.hasBatch() || len(k.dims) < 2 {
		return false
	}
	r := len(k.dims)
	if k.dims[r-1] != t || k.dims[r-2] != t || product(k.dims[:r-2]) != 1 {
		return false
	}
	for i := range t {
		for j := range t {
			if masked(k.vals[i*t+j]) != (j > i) {
				return false
			}
		}
	}
	return true
}

// scoresSize returns t when x is attention scores [..., t, t].
func scoresSize(x *value) (int, bool) {
	r := len(x.shape)
	if r < 2 || x.shape[r-1] != x.shape[r-2] {
		return 0, false
	}
	return x.shape[r-1], true
}

// masked binds the node's output to the scores x, marked as causally
// masked by this node until a Softmax takes the mask.
func (c *nodeCtx) masked(x *value) (string, error) {
	name := c.im.materialize(x)
	return "folded: causal mask, taken by the softmax that reads it",
		c.setOutput(&value{layer: name, lshape: x.shape, shape: x.shape, causal: c.name, standIn: x.standIn, padded: x.padded})
}

// foldAdditiveMask takes an Add of a constant with 0 on and below the
// diagonal and -inf above (nn.Transformer.generate_square_subsequent_mask)
// to attention scores as a causal mask.
func (c *nodeCtx) foldAdditiveMask(x *value, k *constant) (string, bool, error) {
	t, ok := scoresSize(x)
	if !ok || x.causal != "" || x.lazy != nil {
		return "", false, nil
	}
	if !causalMask(k, t, maskFill) || slices.ContainsFunc(k.vals, func(v float64) bool { return v != 0 && !maskFill(v) }) {
		return "", false, nil
	}
	how, err := c.masked(x)
	return how, true, err
}

// importWhere imports Where(mask, fill, scores) — PyTorch's
// masked_fill(mask, -inf) — as a causal mask when mask is a constant that
// is true exactly above the diagonal of scores [..., T, T] and fill is
// -inf; Where of constants folds.
func importWhere(c *nodeCtx) (string, error) {
	if !c.has(0) || !c.has(1) || !c.has(2) {
		return "", unsupported("", "Where needs three inputs")
	}
	cond, a, b := c.ins[0], c.ins[1], c.ins[2]
	if cond.konst != nil && a.konst != nil && b.konst != nil {
		return foldWhere(c, cond.konst, a.konst, b.konst)
	}
	if cond.keyPad != nil {
		return c.wherePadMask(cond, a, b)
	}
	const fix = "mask attention with masked_fill(tril[:T, :T] == 0, float('-inf')) (mlbuild's causal softmax) or masked_fill((idx == PAD)[:, None, None, :], float('-inf')) (its padding mask) right before the softmax, or file an issue with the mask you need"
	if cond.konst == nil {
		return "", unsupported(fix, "Where with a condition that depends on the model input other than through a padding mask (the token ids == one id); mlbuild takes Where only as a constant causal mask or a padding mask on attention scores")
	}
	if a.konst == nil || b.konst != nil {
		return "", unsupported(fix, "Where choosing a runtime value where the condition is true; mlbuild takes Where only as masked_fill(mask, -inf) of attention scores")
	}
	fill, ok := a.konst.scalar()
	if !ok || !maskFill(fill) {
		return "", unsupported(fix, "Where filling with %s; mlbuild takes Where only as a causal mask that fills with -inf", constText(a.konst))
	}
	t, ok := scoresSize(b)
	if !ok || b.lazy != nil {
		return "", unsupported(fix, "Where masking a value of shape %s; a causal mask applies to attention scores [..., T, T]", shapeText(b.shape))
	}
	if !causalMask(cond.konst, t, func(v float64) bool { return v != 0 }) {
		return "", unsupported(fix, "the mask (shape %s) is not causal: mlbuild's causal softmax masks exactly the keys after each query (a lower-triangular tril buffer == 0)", shapeText(cond.konst.dims))
	}
	return c.masked(b)
}

// constText describes a constant for messages: its value when it has one.
func constText(k *constant) string {
	if v, ok := k.scalar(); ok {
		return fmt.Sprint(v)
	}
	return "a constant of shape " + shapeText(k.dims)
}

// foldWhere folds Where of three constants, with broadcasting.
func foldWhere(c *nodeCtx, cond, a, b *constant) (string, error) {
	if cond.hasBatch() || a.hasBatch() || b.hasBatch() {
		return "", unsupported("", "Where of the batch size")
	}
	dims, ok := broadcastShapes(cond.dims, a.dims)
	if ok {
		dims, ok = broadcastShapes(dims, b.dims)
	}
	if !ok {
		return "", unsupported("", "constant shapes %v, %v and %v do not broadcast", cond.dims, a.dims, b.dims)
	}
	if err := checkFoldSize(dims); err != nil {
		return "", err
	}
	out := &constant{dims: dims, ints: a.ints && b.ints}
	for i := range product(dims) {
		if broadcastAt(cond, dims, i) != 0 {
			out.vals = append(out.vals, broadcastAt(a, dims, i))
		} else {
			out.vals = append(out.vals, broadcastAt(b, dims, i))
		}
	}
	return c.fold(out, "where")
}

// broadcastAt returns element i of k broadcast to dims.
func broadcastAt(k *constant, dims []int, i int) float64 {
	off, rem, st := 0, i, strides(k.dims)
	for d := len(dims) - 1; d >= 0; d-- {
		pos := rem % dims[d]
		rem /= dims[d]
		kd := d - (len(dims) - len(k.dims))
		if kd >= 0 && k.dims[kd] != 1 {
			off += pos * st[kd]
		}
	}
	return k.vals[off]
}

// importEqual folds Equal of constants (a mask's tril == 0), and takes
// Equal of the token ids with one id as a padding mask.
func importEqual(c *nodeCtx) (string, error) {
	if c.has(0) && c.has(1) && (c.ins[0].tokenIDs || c.ins[1].tokenIDs) {
		return equalTokenIDs(c)
	}
	const why = "Equal of a value that depends on the model input; mlbuild folds Equal only in constant masks, and takes the token ids == one id as a padding mask"
	a, err := c.konst(0, "operand")
	if err != nil {
		return "", unsupported(padMaskFix, why)
	}
	b, err := c.konst(1, "operand")
	if err != nil {
		return "", unsupported(padMaskFix, why)
	}
	if a.hasBatch() || b.hasBatch() {
		return "", unsupported("", "Equal of the batch size")
	}
	dims, ok := broadcastShapes(a.dims, b.dims)
	if !ok {
		return "", unsupported("", "constant shapes %v and %v do not broadcast", a.dims, b.dims)
	}
	if err := checkFoldSize(dims); err != nil {
		return "", err
	}
	out := &constant{dims: dims, ints: true}
	for i := range product(dims) {
		v := 0.0
		if broadcastAt(a, dims, i) == broadcastAt(b, dims, i) {
			v = 1
		}
		out.vals = append(out.vals, v)
	}
	return c.fold(out, "equal")
}

// importRange folds Range(start, limit, delta) of constants
// (torch.arange(T) of the positions).
func importRange(c *nodeCtx) (string, error) {
	var s [3]float64
	for i, what := range []string{"start", "limit", "delta"} {
		k, err := c.konst(i, what)
		if err != nil {
			return "", unsupported("export with a fixed sequence length", "Range whose %s depends on the model input", what)
		}
		v, ok := k.scalar()
		if !ok || k.size() != 1 {
			return "", unsupported("", "Range's %s is not a scalar (or is the batch size)", what)
		}
		s[i] = v
	}
	if s[2] == 0 {
		return "", unsupported("", "Range with delta 0")
	}
	n := int(max(math.Ceil((s[1]-s[0])/s[2]), 0))
	if err := checkFoldSize([]int{n}); err != nil {
		return "", err
	}
	out := &constant{dims: []int{n}, ints: c.ins[0].konst.ints}
	for i := range n {
		out.vals = append(out.vals, s[0]+float64(i)*s[2])
	}
	return c.fold(out, "range")
}

// tieHeads ties each dense layer without a bias whose weight [V, D]
// equals an embedding's table to that embedding (nanoGPT's
// lm_head.weight = wte.weight, which the export writes as a transposed
// copy): the spec then says the head is tied, and trains it so.
func (im *importer) tieHeads() {
	for _, l := range im.out.Layers {
		if l.Op != "dense" || len(l.Params) == 0 || l.Params[0].Suffix != "weight" {
			continue
		}
		for _, e := range im.out.Layers {
			if e.Op != "embedding" || !slices.Equal(e.Params[0].Shape, l.Params[0].Shape) || !slices.Equal(e.Params[0].Data, l.Params[0].Data) {
				continue
			}
			l.Params = l.Params[1:]
			l.Fields = append(l.Fields, Field{"tie", e.Name})
			for i := range im.out.Mapping {
				if m := &im.out.Mapping[i]; m.Layer == l.Name && strings.HasPrefix(m.How, "dense") {
					m.How += ", tied to " + e.Name
				}
			}
			break
		}
	}
}
