package onnx

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Imported is an ONNX graph turned into the layers of an mlbuild spec: the
// per-sample input shape, the layers in execution order with their weights
// in mlbuild's names, and how each ONNX node became (part of) a layer.
type Imported struct {
	Input    []int // per sample: the batch axis is implicit
	Layers   []*Layer
	Output   string // the layer whose value is the model's output
	Warnings []string
	Mapping  []Mapping
	Opset    int64
	Producer string // producer name and version, for the spec's header
}

// Layer is one layer of the imported spec.
type Layer struct {
	Name     string
	Op       string   // a spec op: "dense", "conv2d", ...
	Inputs   []string // layer names, or "input"
	Fields   []Field  // the op's fields, in the order they are written
	Params   []Param  // weights, in the planner's order
	OutShape []int    // per sample, as the importer computed it
	Source   string   // the ONNX node(s) it came from, for the spec's comment
}

// Field is one field of a layer: a name and an int, float64, bool, string
// or []int value.
type Field struct {
	Name  string
	Value any
}

// Param is one weight tensor of a layer; its full name is the layer's name,
// a dot and Suffix ("dense1.weight"), as the planner names it.
type Param struct {
	Suffix string
	Shape  []int
	Data   []float32
}

// Mapping says what became of one ONNX node: the layer that computes it,
// or how it was folded away.
type Mapping struct {
	Node  string // the node's name, or op#index when it has none
	Op    string
	Layer string // "" when folded
	How   string // e.g. "dense (transB, alpha 0.5 folded into the weight)", "folded: shape arithmetic"
}

// Problem is a node that cannot be imported: which node, its op and the
// opset it was exported under, why, and what to do about it.
type Problem struct {
	Node  string
	Op    string
	Opset int64
	Why   string
	Fix   string
}

// ImportError lists every node that cannot be imported; the import checks
// all nodes before it gives up, past a refused node too where the shape of
// its output is known (stand_in.go).
type ImportError struct {
	Problems []Problem
	// Unchecked counts the nodes that read a value of a refused node whose
	// shape is not known, and so could not be checked.
	Unchecked int
	// Hint is advice for the whole model, or "".
	Hint string
}

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s) cannot be imported:", len(e.Problems))
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  node %s (%s, opset %d): %s", p.Node, p.Op, p.Opset, p.Why)
		if p.Fix != "" {
			fmt.Fprintf(&b, "; %s", p.Fix)
		}
	}
	if s := e.Summary(); s != "" {
		fmt.Fprintf(&b, "\n%s", s)
	}
	return b.String()
}

// Summary says what the list of problems leaves out (the nodes not
// checked) and the hint, one line each, or "".
func (e *ImportError) Summary() string {
	var lines []string
	if e.Unchecked > 0 {
		lines = append(lines, fmt.Sprintf("%d more node(s) read values of the nodes above whose shape is not known, and were not checked", e.Unchecked))
	}
	if e.Hint != "" {
		lines = append(lines, e.Hint)
	}
	return strings.Join(lines, "\n")
}

// MaxOpset is the newest version of the standard operator set whose
// definitions the importer reads. A model that declares a newer one is
// refused: an op redefined since could be read with the old meaning. The
// changes of opsets 21 to 23 to the ops of docs/onnx.md only add element
// types (int4, bfloat16, float4), so a model of those opsets is read as
// its ops are defined.
const MaxOpset = 23

// value is what an ONNX value name stands for during the import: a
// constant (folded at import time), a runtime tensor produced by a layer,
// or poison (its producer could not be imported).
type value struct {
	konst  *constant
	layer  string // runtime: the layer holding the data ("input" for the model input)
	lshape []int  // runtime: the per-sample shape the layer produces
	shape  []int  // runtime: the per-sample shape ONNX sees (differs for a pending view)
	view   *Layer // runtime: a reshape or flatten not yet written, materialised on use
	poison bool
	// standIn names the refused node this runtime value stands in for (it
	// has the shape of that node's output but no layer), or whose stand-in
	// it was computed from (stand_in.go).
	standIn string
	// pad is a zero padding of height and width (top, left, bottom,
	// right) that a Pad node asked for and that the Conv or AveragePool
	// reading the value takes over; padNode names that Pad node.
	pad     [4]int
	padNode string
	// moved is a Transpose that moves the batch axis, pending until a
	// Split and Squeeze (or Gather) take it apart (unbind_packed.go).
	moved *movedBatch
	// lazy is a value whose batch axis moved or merged with others,
	// followed through the ops that allow it (batch_layout.go).
	lazy *lazyLayout
	// tokenIDs marks the model input when it holds integer token ids,
	// which only an embedding's Gather reads (embedding.go).
	tokenIDs bool
	// causal names the Where (or Add) node that masked these attention
	// scores causally, pending until a Softmax over the keys takes the
	// mask as its causal flag (embedding.go).
	causal string
	// keyPad marks a padding mask computed from the token ids (shape
	// holds its per-sample shape; it has no layer), and padded attention
	// scores masked by one, pending until a Softmax over the keys takes
	// the mask as its pad field (padding_mask.go).
	keyPad *keyPadding
	padded *paddedScores
}

// constant is a tensor known at import time. Shape arithmetic needs the
// batch size, which is not known: elements marked batch stand for it.
type constant struct {
	dims  []int
	vals  []float64
	batch []bool // nil when no element is the batch size
	// ints is set when the ONNX type is an integer one (shape arithmetic):
	// a Div of two of them truncates, as ONNX's integer Div does
	// (PyTorch's chunk computes its split sizes with one).
	ints bool
}

func (c *constant) size() int { return len(c.vals) }

func (c *constant) isBatch(i int) bool { return c.batch != nil && c.batch[i] }

func (c *constant) hasBatch() bool { return slices.Contains(c.batch, true) }

// float32s returns the values as float32 for weights.
func (c *constant) float32s() []float32 {
	out := make([]float32, len(c.vals))
	for i, v := range c.vals {
		out[i] = float32(v)
	}
	return out
}

// scalar returns the single value of a constant that has one value, or
// whose values are all equal (a broadcast scalar).
func (c *constant) scalar() (float64, bool) {
	if len(c.vals) == 0 || c.hasBatch() {
		return 0, false
	}
	for _, v := range c.vals[1:] {
		if v != c.vals[0] {
			return 0, false
		}
	}
	return c.vals[0], true
}

func constFromTensor(t *Tensor) (*constant, error) {
	if err := checkShape(t.Dims); err != nil {
		return nil, err
	}
	c := &constant{dims: t.Shape()}
	switch t.DataType {
	case Int64, Int32, Int16, Int8, Uint8, Uint16, Uint32, Uint64, Bool:
		c.ints = true
		ints, err := t.Int64s()
		if err != nil {
			return nil, err
		}
		c.vals = make([]float64, len(ints))
		for i, v := range ints {
			c.vals[i] = float64(v)
		}
	default:
		fs, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		c.vals = make([]float64, len(fs))
		for i, v := range fs {
			// infinities are masks (masked_fill(mask, -inf), an additive
			// causal mask); Import checks that none reaches a weight
			if math.IsNaN(float64(v)) {
				return nil, fmt.Errorf("tensor %q holds %v at element %d; weights must be finite", t.Name, v, i)
			}
			c.vals[i] = float64(v)
		}
	}
	return c, nil
}

// importer holds the state of one import.
type importer struct {
	m        *Model
	opset    int64
	vals     map[string]*value
	uses     map[string]int // how many node inputs and graph outputs read each value
	out      *Imported
	names    map[string]bool
	counts   map[string]int // per spec op, for generated names
	problems []Problem
	// unchecked counts the nodes not checked because they read poison
	unchecked int
	batchN    int // the fixed batch size of the input, 0 when dynamic
	// constNodes maps the outputs of Constant nodes to them, for scalarOf.
	constNodes map[string]*Node
	// identities maps the outputs of Identity nodes to them, for isConst.
	identities map[string]*Node
	// viewMapping finds the mapping entry of a node whose view layer is
	// not written yet, to name the layer when it is.
	viewMapping map[*Layer]int
	// layerValues lists, per layer, the ONNX values bound to its output
	// (aliases through Identity, Cast, views), for layerReads.
	layerValues map[string][]string
	// pieces lists, per packed dense layer, the layers its Slices and
	// Splits became (split_dense.go).
	pieces map[string][]string
}

// layerReads counts the reads of a layer's output through every ONNX value
// bound to it: node inputs and graph outputs. A layer read once may have
// its weights changed by a fold.
func (im *importer) layerReads(layer string) int {
	n := 0
	for _, name := range im.layerValues[layer] {
		n += im.uses[name]
	}
	return n
}

// skipImport is returned by an op's import when the node cannot be imported.
type skipImport struct{ why, fix string }

func (s *skipImport) Error() string { return s.why }

func unsupported(fix, format string, args ...any) error {
	return &skipImport{why: fmt.Sprintf(format, args...), fix: fix}
}

// Import turns a model's graph into spec layers. Every node is checked; if
// any cannot be imported, the error is an *ImportError listing them all.
func Import(m *Model) (*Imported, error) {
	g := m.Graph
	im := &importer{m: m, opset: m.Opset(), vals: map[string]*value{}, uses: map[string]int{},
		out: &Imported{Opset: m.Opset()}, names: map[string]bool{"input": true}, counts: map[string]int{},
		layerValues: map[string][]string{}, viewMapping: map[*Layer]int{}, pieces: map[string][]string{}}
	im.out.Producer = strings.TrimSpace(m.ProducerName + " " + m.ProducerVersion)
	if im.opset > MaxOpset {
		return nil, &ImportError{Problems: []Problem{{Node: "model", Op: "opset_import", Opset: im.opset,
			Why: fmt.Sprintf("the model declares ONNX opset %d; the importer knows the ops as opsets 1 to %d define them, and an op changed since could be read with the wrong meaning", im.opset, MaxOpset),
			Fix: fmt.Sprintf("export with opset_version=%d or lower (torch.onnx.export(..., opset_version=17)), or convert the file: onnx.version_converter.convert_version(onnx.load(\"model.onnx\"), %d)", MaxOpset, MaxOpset)}}}
	}
	if ps := writtenTwice(g, im.opset); len(ps) > 0 {
		return nil, &ImportError{Problems: ps}
	}
	for _, d := range m.Opsets {
		if d.Domain != "" && d.Domain != "ai.onnx" {
			im.out.Warnings = append(im.out.Warnings, fmt.Sprintf("the model imports operator set %q version %d; only nodes of the standard set can be imported", d.Domain, d.Version))
		}
	}
	for _, t := range g.Initializers {
		c, err := constFromTensor(t)
		if err != nil {
			return nil, &ImportError{Problems: []Problem{{Node: "initializer " + t.Name, Op: "initializer", Opset: im.opset, Why: err.Error()}}}
		}
		im.vals[t.Name] = &value{konst: c}
	}
	if err := im.bindInput(); err != nil {
		return nil, err
	}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			im.uses[in]++
		}
	}
	for _, o := range g.Outputs {
		im.uses[o.Name]++
	}
	gelus := findErfGELU(g, im.scalarOf, im.uses)
	norms := findWrittenLayerNorm(g, im.scalarOf, im.isConst, im.uses)
	for i, n := range g.Nodes {
		if p, ok := gelus[i]; ok {
			im.importGELUPattern(i, n, p)
			continue
		}
		if p, ok := norms[i]; ok {
			im.importWrittenLayerNorm(i, n, p)
			continue
		}
		im.node(i, n)
	}
	if len(g.Outputs) != 1 {
		im.problems = append(im.problems, Problem{Node: "graph", Op: "outputs", Opset: im.opset,
			Why: fmt.Sprintf("the graph has %d outputs; an mlbuild model has exactly one", len(g.Outputs)),
			Fix: "export the model with one output (return a single tensor from forward)"})
	}
	if len(im.problems) > 0 {
		return nil, &ImportError{Problems: im.problems, Unchecked: im.unchecked, Hint: im.batchHint()}
	}
	outInfo := g.Outputs[0]
	v, ok := im.vals[outInfo.Name]
	switch {
	case !ok:
		return nil, im.refuse(Problem{Node: "graph", Op: "outputs", Opset: im.opset, Why: fmt.Sprintf("output %q is not produced by any node", outInfo.Name)})
	case v.konst != nil:
		return nil, im.refuse(Problem{Node: "graph", Op: "outputs", Opset: im.opset, Why: fmt.Sprintf("output %q is a constant: the model does not depend on its input", outInfo.Name)})
	case v.pad != [4]int{}:
		return nil, im.refuse(Problem{Node: v.padNode, Op: "Pad", Opset: im.opset, Why: "the Pad's output is the model's output; mlbuild folds a zero Pad only into the Conv or AveragePool that reads it", Fix: "pad inside the Conv or AvgPool2d (its padding argument) instead"})
	case v.lazy != nil:
		return nil, im.refuse(Problem{Node: "graph", Op: "outputs", Opset: im.opset, Why: "the output's batch axis is not first (a Transpose or Reshape moved it); mlbuild's batch axis stays first"})
	case v.moved != nil:
		return nil, im.refuse(Problem{Node: v.moved.node, Op: "Transpose", Opset: im.opset, Why: fmt.Sprintf("perm %v moves the batch axis, and its output is the model's output; mlbuild's batch axis stays first", v.moved.perm)})
	case v.keyPad != nil:
		return nil, im.refuse(Problem{Node: v.keyPad.equal, Op: "Equal", Opset: im.opset, Why: "the padding mask computed from the token ids is the model's output; mlbuild takes a padding mask only to mask attention scores read by a softmax", Fix: padMaskFix})
	case v.maskedBy() != "":
		return nil, im.refuse(Problem{Node: "graph", Op: "outputs", Opset: im.opset, Why: fmt.Sprintf("the output is attention scores masked by node %s; mlbuild masks scores only in a softmax (the mask's only reader a Softmax over the keys)", v.maskedBy())})
	case v.layer == "input" && v.view == nil:
		return nil, im.refuse(Problem{Node: "graph", Op: "outputs", Opset: im.opset, Why: "the output is the input: the model computes nothing"})
	}
	name := im.materialize(v)
	im.dropPacked(name)
	if outInfo.HasShape && len(outInfo.Dims) == len(v.shape)+1 {
		for i, d := range outInfo.Dims[1:] {
			if d.Known && int(d.Value) != v.shape[i] {
				return nil, fmt.Errorf("importer bug: the graph declares output %q as %s per sample but the imported layers compute %s", outInfo.Name, dimsText(outInfo.Dims[1:]), shapeText(v.shape))
			}
		}
	}
	im.out.Output = name
	im.tieHeads()
	if err := im.checkFinite(); err != nil {
		return nil, err
	}
	return im.out, nil
}

// bindInput finds the one runtime input (graph inputs that are not
// initializers) and records its per-sample shape.
func (im *importer) bindInput() error {
	var inputs []*ValueInfo
	for _, in := range im.m.Graph.Inputs {
		if _, isConst := im.vals[in.Name]; !isConst {
			inputs = append(inputs, in)
		}
	}
	fail := func(why, fix string) error {
		return &ImportError{Problems: []Problem{{Node: "graph", Op: "inputs", Opset: im.opset, Why: why, Fix: fix}}}
	}
	if len(inputs) != 1 {
		var names []string
		for _, in := range inputs {
			names = append(names, fmt.Sprintf("%q", in.Name))
		}
		return fail(fmt.Sprintf("the graph has %d runtime inputs (%s); an mlbuild model has exactly one", len(inputs), strings.Join(names, ", ")),
			"export with one input tensor; weights must be initializers, not inputs")
	}
	in := inputs[0]
	ids := isTokenIDType(in.ElemType)
	if in.ElemType != Float && in.ElemType != Undefined && !ids {
		return fail(fmt.Sprintf("input %q is %v; mlbuild models read float32", in.Name, in.ElemType), "export with a float32 input")
	}
	if !in.HasShape || len(in.Dims) < 2 {
		return fail(fmt.Sprintf("input %q has no shape of rank 2 or more ([batch, ...])", in.Name), "export with a static per-sample shape and a leading batch dimension")
	}
	if ids {
		if err := tokenIDsShape(in); err != nil {
			return fail(err.Error(), err.(*skipImport).fix)
		}
	}
	var shape []int
	for i, d := range in.Dims[1:] {
		if !d.Known || d.Value < 1 {
			return fail(fmt.Sprintf("input %q: dimension %d is %s; mlbuild needs every per-sample size fixed", in.Name, i+1, dimText(d)),
				"export with a fixed example size (only the batch dimension may be dynamic)")
		}
		shape = append(shape, int(d.Value))
	}
	if err := checkShape(toInt64s(shape)); err != nil {
		return fail(fmt.Sprintf("input %q: per-sample shape %s: %v", in.Name, shapeText(shape), err), "")
	}
	b := in.Dims[0]
	switch {
	case !b.Known:
		// a dynamic batch: mlbuild's implicit batch
	case b.Value == 1:
		im.batchN = 1
		im.out.Warnings = append(im.out.Warnings, fmt.Sprintf("input %q has a batch of 1 baked into the graph; the spec treats the first axis as mlbuild's batch, chosen at run time (export with dynamic_axes={%q: {0: \"batch\"}} to say so)", in.Name, in.Name))
	default:
		im.batchN = int(b.Value)
		im.out.Warnings = append(im.out.Warnings, fmt.Sprintf("input %q has a fixed batch of %d; the spec treats the first axis as mlbuild's batch, chosen at run time", in.Name, b.Value))
	}
	im.out.Input = shape
	im.vals[in.Name] = &value{layer: "input", lshape: shape, shape: shape, tokenIDs: ids}
	return nil
}

// scalarOf returns the value of a one-element constant, from an
// initializer or a Constant node, before the nodes are imported.
func (im *importer) scalarOf(name string) (float64, bool) {
	if v, ok := im.vals[name]; ok {
		if v.konst != nil && v.konst.size() == 1 && !v.konst.hasBatch() {
			return v.konst.vals[0], true
		}
		return 0, false
	}
	if im.constNodes == nil {
		im.constNodes = map[string]*Node{}
		im.identities = map[string]*Node{}
		for _, n := range im.m.Graph.Nodes {
			if n.OpType == "Constant" && len(n.Outputs) == 1 {
				im.constNodes[n.Outputs[0]] = n
			}
			if n.OpType == "Identity" && len(n.Inputs) == 1 && len(n.Outputs) == 1 {
				im.identities[n.Outputs[0]] = n
			}
		}
	}
	if n, ok := im.constNodes[name]; ok {
		for _, a := range n.Attrs {
			switch {
			case a.Name == "value_float":
				return shortFloat(a.F), true
			case a.Name == "value" && a.T != nil && a.T.NumElements() == 1:
				if k, err := constFromTensor(a.T); err == nil {
					return k.vals[0], true
				}
			}
		}
	}
	return 0, false
}

// isConst reports whether a value is known before any node runs: an
// initializer, the output of a Constant node, or an Identity of one
// (PyTorch writes a second parameter equal to a first, such as two
// LayerNorms' initial weights, as an Identity of the first).
func (im *importer) isConst(name string) bool {
	for range len(im.m.Graph.Nodes) + 1 {
		if v, ok := im.vals[name]; ok {
			return v.konst != nil
		}
		im.scalarOf("") // builds constNodes
		if _, ok := im.constNodes[name]; ok {
			return true
		}
		n, ok := im.identities[name]
		if !ok {
			return false
		}
		name = n.Inputs[0]
	}
	return false
}

// writtenTwice reports every value that two nodes write, or that a node
// writes over an initializer or the graph input, naming both writers: ONNX
// graphs are in single static assignment form, and which write a reader
// sees would be a guess.
func writtenTwice(g *Graph, opset int64) []Problem {
	writer := map[string]string{}
	for _, t := range g.Initializers {
		writer[t.Name] = fmt.Sprintf("initializer %q", t.Name)
	}
	for _, in := range g.Inputs {
		if _, ok := writer[in.Name]; !ok {
			writer[in.Name] = fmt.Sprintf("graph input %q", in.Name)
		}
	}
	var ps []Problem
	for i, n := range g.Nodes {
		name := nodeName(i, n)
		for _, o := range n.Outputs {
			if o == "" {
				continue
			}
			if first, ok := writer[o]; ok {
				ps = append(ps, Problem{Node: name, Op: n.OpType, Opset: opset,
					Why: fmt.Sprintf("writes value %q, which %s writes too; each value of an ONNX graph has one producer", o, first),
					Fix: "the file is malformed: export it again, or rename one of the two outputs"})
				continue
			}
			writer[o] = fmt.Sprintf("node %s (%s)", name, n.OpType)
		}
	}
	return ps
}

// refuse makes the error of a problem found after the nodes were
// imported (about the graph's output), with the batch hint.
func (im *importer) refuse(p Problem) error {
	im.problems = append(im.problems, p)
	return &ImportError{Problems: im.problems, Hint: im.batchHint()}
}

// batchHint advises a dynamic batch axis when the graph fixes the batch at
// 1 and some node is refused for what it does with the batch axis: traced
// with one sample, an exporter writes the batch size into shapes and
// squeezes as the number 1, which the importer cannot always tell from a
// per-sample size of 1, and a dynamic axis keeps it apart. (A larger fixed
// batch is a size that cannot be confused, and a refusal there is about
// what the model does.)
func (im *importer) batchHint() string {
	if im.batchN != 1 || !slices.ContainsFunc(im.problems, func(p Problem) bool { return strings.Contains(p.Why, "batch") }) {
		return ""
	}
	return `The model was exported with a fixed batch of 1, and the problems above concern the batch axis: traced with one sample, the exporter writes the batch size as the number 1, which cannot always be told from a per-sample size. Export it with a dynamic batch axis: torch.onnx.export(model, x, "model.onnx", input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})`
}

// nodeName is a node's name for messages.
func nodeName(i int, n *Node) string {
	if n.Name != "" {
		return fmt.Sprintf("%q", n.Name)
	}
	return fmt.Sprintf("#%d", i)
}

// node imports one node, or records why it cannot.
func (im *importer) node(i int, n *Node) {
	name := nodeName(i, n)
	if n.Domain != "" && n.Domain != "ai.onnx" {
		im.fail(n, name, unsupported("", "op %s of domain %q is not a standard ONNX op", n.OpType, n.Domain))
		return
	}
	imp, ok := opImporters[n.OpType]
	if !ok {
		im.fail(n, name, unsupported("rewrite the model with ops from the list in docs/onnx.md, or file an issue naming the op", "op %s has no counterpart in mlbuild's schema", n.OpType))
		return
	}
	ins := make([]*value, len(n.Inputs))
	refused := "" // a refused node whose stand-in this node reads
	for j, in := range n.Inputs {
		if in == "" {
			continue
		}
		v, ok := im.vals[in]
		if !ok {
			im.fail(n, name, unsupported("", "input %q is produced by no earlier node and is not an initializer or graph input", in))
			return
		}
		if v.poison {
			im.unchecked++ // its value comes from a refused node of unknown shape
			im.poison(n)
			return
		}
		if v.standIn != "" {
			refused = v.standIn
		}
		if v.pad != [4]int{} && !padConsumers[n.OpType] {
			im.fail(n, name, unsupported("pad inside the Conv or AvgPool2d (its padding argument) instead", "reads the output of Pad node %s; mlbuild folds a zero Pad only into the Conv or AveragePool that reads it", v.padNode))
			return
		}
		if v.moved != nil && (!movedConsumers[n.OpType] || j != 0) {
			if v.moved.reported {
				im.poison(n) // the first such reader is reported
				return
			}
			v.moved.reported = true
			im.fail(n, name, unsupported("", "reads the output of Transpose node %s, whose perm %v moves the batch axis; mlbuild's batch axis stays first (only taking one entry of its first axis, as unbind(0) of a packed projection does, brings it back)", v.moved.node, v.moved.perm))
			return
		}
		if err := tokenRead(n, j, v); err != nil {
			im.fail(n, name, err)
			return
		}
		if err := padMaskRead(n, j, v); err != nil {
			im.fail(n, name, err)
			return
		}
		if v.lazy != nil && !lazyConsumers[n.OpType] {
			if !v.lazy.reported {
				v.lazy.reported = true
				im.fail(n, name, unsupported("", "reads a value whose batch axis a Transpose or Reshape moved; mlbuild's batch axis stays first, and it follows a moved one only through Transpose, Reshape, Shape, MatMul, Gemm, Softmax, Slices of features and arithmetic with a scalar or one value per feature"))
			} else {
				im.poison(n)
			}
			return
		}
		ins[j] = v
	}
	ctx := &nodeCtx{im: im, n: n, name: name, ins: ins}
	var how string
	var err error
	if slices.ContainsFunc(ins, func(v *value) bool { return v != nil && v.lazy != nil }) {
		how, err = ctx.throughLazy(imp)
	} else {
		how, err = imp(ctx)
	}
	if err != nil {
		im.fail(n, name, err)
		if refused != "" {
			im.problems[len(im.problems)-1].Why += fromRefused(refused)
		}
		return
	}
	if refused != "" {
		// what is computed from a stand-in is marked as such, so that a
		// problem further on says where its input came from
		for _, o := range n.Outputs {
			if v, ok := im.vals[o]; ok && v.konst == nil && !v.poison && v.standIn == "" {
				v.standIn = refused
			}
		}
	}
	if ctx.viewLayer != nil {
		// the node's layer is written when something reads it, if ever
		im.viewMapping[ctx.viewLayer] = len(im.out.Mapping)
	}
	im.out.Mapping = append(im.out.Mapping, Mapping{Node: name, Op: n.OpType, Layer: ctx.layerName, How: how})
}

func (im *importer) fail(n *Node, name string, err error) {
	p := Problem{Node: name, Op: n.OpType, Opset: im.opset, Why: err.Error()}
	if s, ok := err.(*skipImport); ok {
		p.Fix = s.fix
	}
	im.problems = append(im.problems, p)
	im.standIn(n, name)
}

func (im *importer) poison(n *Node) {
	for _, o := range n.Outputs {
		im.vals[o] = &value{poison: true}
	}
}

// layerName makes a spec name for a layer from its ONNX node: the node's
// name with the exporter's op suffix dropped ("/conv1/Conv" → "conv1"),
// reduced to identifier characters, or op+counter when the node has none.
func (im *importer) layerName(n *Node, op string) string {
	base := ""
	if n != nil {
		parts := strings.Split(strings.Trim(n.Name, "/"), "/")
		if len(parts) > 1 && strings.EqualFold(strings.SplitN(parts[len(parts)-1], "_", 2)[0], n.OpType) {
			parts = parts[:len(parts)-1]
		}
		base = identifier(strings.Join(parts, "_"))
	}
	if base == "" {
		im.counts[op]++
		base = fmt.Sprintf("%s%d", op, im.counts[op])
		for im.names[base] {
			im.counts[op]++
			base = fmt.Sprintf("%s%d", op, im.counts[op])
		}
	}
	name := base
	for k := 2; im.names[name]; k++ {
		suffix := fmt.Sprintf("_%d", k)
		name = base[:min(len(base), 64-len(suffix))] + suffix
	}
	im.names[name] = true
	return name
}

// identifier reduces s to [A-Za-z_][A-Za-z0-9_]{0,63}: other characters
// become "_", runs of "_" collapse, and a leading digit gets "n" before it.
func identifier(s string) string {
	var b strings.Builder
	last := byte('_')
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok {
			c = '_'
		}
		if c == '_' && last == '_' {
			continue
		}
		b.WriteByte(c)
		last = c
	}
	out := strings.TrimRight(b.String(), "_")
	if out != "" && out[0] >= '0' && out[0] <= '9' {
		out = "n" + out
	}
	if len(out) > 64 {
		out = strings.TrimRight(out[:64], "_")
	}
	return out
}

// addLayer appends a layer reading the given runtime values, and returns
// the runtime value of its output.
func (im *importer) addLayer(l *Layer, ins ...*value) *value {
	for _, v := range ins {
		l.Inputs = append(l.Inputs, im.materialize(v))
	}
	im.out.Layers = append(im.out.Layers, l)
	return &value{layer: l.Name, lshape: l.OutShape, shape: l.OutShape}
}

// materialize writes the pending view of v, if any, as a flatten or
// reshape layer, and returns the name of the layer holding v.
func (im *importer) materialize(v *value) string {
	if v.view == nil {
		return v.layer
	}
	l := v.view
	v.view = nil
	l.Inputs = []string{v.layer}
	im.out.Layers = append(im.out.Layers, l)
	v.layer, v.lshape = l.Name, l.OutShape
	if i, ok := im.viewMapping[l]; ok {
		im.out.Mapping[i].Layer, im.out.Mapping[i].How = l.Name, l.Op
	}
	return v.layer
}

// setOutput binds the node's first output; extra outputs must be unused.
func (c *nodeCtx) setOutput(v *value) error {
	if len(c.n.Outputs) == 0 || c.n.Outputs[0] == "" {
		return unsupported("", "the node has no output")
	}
	for _, o := range c.n.Outputs[1:] {
		if o != "" && c.im.uses[o] > 0 {
			return unsupported("export in eval mode so that only the main output is used", "output %q (an optional output of %s) is used, and mlbuild has no counterpart for it", o, c.n.OpType)
		}
	}
	c.im.vals[c.n.Outputs[0]] = v
	if v.konst == nil && v.keyPad == nil {
		c.im.layerValues[v.layer] = append(c.im.layerValues[v.layer], c.n.Outputs[0])
	}
	return nil
}

func shapeText(s []int) string {
	if len(s) == 0 {
		return "a scalar"
	}
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "×")
}

func dimText(d Dim) string {
	switch {
	case d.Known:
		return fmt.Sprint(d.Value)
	case d.Param != "":
		return fmt.Sprintf("symbolic (%q)", d.Param)
	}
	return "unknown"
}

func dimsText(ds []Dim) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = dimText(d)
	}
	return strings.Join(parts, "×")
}

func toInt64s(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

func product(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// checkFinite refuses a layer whose weights or fields hold an infinity:
// constants may (a mask's -inf is taken by the causal softmax), weights
// may not.
func (im *importer) checkFinite() error {
	bad := func(v float64) bool { return math.IsInf(v, 0) || math.IsNaN(v) }
	for _, l := range im.out.Layers {
		for _, p := range l.Params {
			if i := slices.IndexFunc(p.Data, func(v float32) bool { return bad(float64(v)) }); i >= 0 {
				return im.refuse(Problem{Node: l.Source, Op: l.Op, Opset: im.opset,
					Why: fmt.Sprintf("%s.%s would hold %v at element %d (from an infinite constant); weights must be finite", l.Name, p.Suffix, p.Data[i], i)})
			}
		}
		for _, f := range l.Fields {
			if v, ok := f.Value.(float64); ok && bad(v) {
				return im.refuse(Problem{Node: l.Source, Op: l.Op, Opset: im.opset,
					Why: fmt.Sprintf("layer %s's %s would be %v (from an infinite constant); mlbuild's constants must be finite", l.Name, f.Name, v)})
			}
		}
	}
	return nil
}
