package spec

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"
)

// checkGraph checks what CUE cannot say well about the graph form: that
// every node's inputs exist and that the nodes do not form a cycle. It runs
// before CUE's own validation because a missing or cyclic input makes CUE
// report consequences, not the cause.
func checkGraph(v cue.Value, pos *positions) Errors {
	nodes := v.LookupPath(cue.ParsePath("model.nodes"))
	if !nodes.Exists() {
		return nil
	}
	names, inputs := graphInputs(nodes)
	var es Errors
	known := map[string]bool{"input": true}
	for _, n := range names {
		known[n] = true
	}
	for _, n := range names {
		at, _ := pos.lookup([]string{"model", "nodes", n})
		if n == "input" {
			es = append(es, Error{Pos: at, Layer: n, Message: `a node cannot be called "input": that name is the model input`})
		}
		for _, in := range inputs[n] {
			if !known[in] {
				where, ok := pos.lookup([]string{"model", "nodes", n, "inputs"})
				if !ok {
					where = at
				}
				es = append(es, Error{Pos: where, Layer: n, Message: fmt.Sprintf("input %s is not a node of the graph (nodes: %s; the model input is \"input\")", QuoteShort(in), shortList(names))})
			}
		}
	}
	if len(es) > 0 {
		return es
	}
	if cycle := findCycle(names, inputs); cycle != nil {
		at, _ := pos.lookup([]string{"model", "nodes", cycle[0]})
		for i, n := range cycle {
			cycle[i] = Short(n)
		}
		es = append(es, Error{Pos: at, Layer: cycle[0], Message: fmt.Sprintf("the nodes form a cycle: %s; every node must read only nodes that do not depend on it", strings.Join(cycle, " → "))})
	}
	return es
}

// shortList joins names for a message: each shortened, and at most ten of
// them, then how many more there are.
func shortList(names []string) string {
	const most = 10
	var parts []string
	for i, n := range names {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-most))
			break
		}
		parts = append(parts, Short(n))
	}
	return strings.Join(parts, ", ")
}

// graphInputs lists the graph's node names in declaration order and the
// inputs each node names.
func graphInputs(nodes cue.Value) ([]string, map[string][]string) {
	var names []string
	inputs := map[string][]string{}
	it, err := nodes.Fields()
	if err != nil {
		return nil, nil
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		names = append(names, name)
		list, err := it.Value().LookupPath(cue.ParsePath("inputs")).List()
		if err != nil {
			continue
		}
		for list.Next() {
			if s, err := list.Value().String(); err == nil {
				inputs[name] = append(inputs[name], s)
			}
		}
	}
	return names, inputs
}

// findCycle returns one cycle of the graph (first node repeated at the end)
// or nil.
func findCycle(names []string, inputs map[string][]string) []string {
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = active
		stack = append(stack, n)
		for _, in := range inputs[n] {
			switch state[in] {
			case active:
				for i, s := range stack {
					if s == in {
						cycle := append([]string(nil), stack[i:]...)
						// report in data-flow order: producer before consumer
						for l, r := 0, len(cycle)-1; l < r; l, r = l+1, r-1 {
							cycle[l], cycle[r] = cycle[r], cycle[l]
						}
						return append(cycle, cycle[0])
					}
				}
			case unseen:
				if _, isNode := inputs[in]; isNode || contains(names, in) {
					if c := visit(in); c != nil {
						return c
					}
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range names {
		if state[n] == unseen {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// decode turns a validated CUE value into a Model.
func decode(v cue.Value, pos *positions) (*Model, error) {
	d := decoder{v: v, pos: pos}
	m := &Model{
		Name:      d.str(v, "name"),
		DType:     d.str(v, "dtype"),
		Precision: d.str(v, "precision"),
	}
	inputAt, _ := pos.lookup([]string{"model", "input"})
	m.Nodes = append(m.Nodes, Node{Name: "input", Op: OpInput, OutShape: d.ints(v, "model.input"), Pos: inputAt})

	layers := v.LookupPath(cue.ParsePath("model.layers"))
	if list, err := layers.List(); err == nil {
		for i := 0; list.Next(); i++ {
			m.Nodes = append(m.Nodes, d.node(list.Value(), []string{"model", "layers", fmt.Sprint(i)}))
		}
	}
	var graph []Node
	if nodes := v.LookupPath(cue.ParsePath("model.nodes")); nodes.Exists() {
		if it, err := nodes.Fields(); err == nil {
			for it.Next() {
				graph = append(graph, d.node(it.Value(), []string{"model", "nodes", it.Selector().Unquoted()}))
			}
		}
	}
	m.Nodes = append(m.Nodes, topoSort(graph)...)
	m.Output = d.str(v, "model.output")

	if err := v.LookupPath(cue.ParsePath("training")).Decode(&m.Training); err != nil {
		d.fail([]string{"training"}, "cannot read the training settings: "+shortenMessage(err.Error()))
	}
	if ds := v.LookupPath(cue.ParsePath("dataset")); ds.Exists() {
		if err := ds.Decode(&m.Dataset); err != nil {
			d.fail([]string{"dataset"}, "cannot read the dataset: "+shortenMessage(err.Error()))
		}
		m.Dataset.Label = d.columns(ds, "label")
		m.Dataset.Drop = d.columns(ds, "drop")
	}

	// Layer names must be unique: they name weights and generated code.
	first := map[string]*Node{}
	for i := range m.Nodes {
		n := &m.Nodes[i]
		if prev, ok := first[n.Name]; ok {
			d.errs = append(d.errs, Error{Pos: n.Pos, Layer: n.Name, Message: fmt.Sprintf("the name %s is already used by the %s layer at %s; give this layer another name", Short(n.Name), Short(string(prev.Op)), prev.Pos)})
			continue
		}
		first[n.Name] = n
	}
	// A text dataset of documents pads with the model's last id, which a
	// padding mask must then hide.
	if ds := m.Dataset; ds.Documents != "" && ds.Classes > 0 {
		for i := range m.Nodes {
			if n := &m.Nodes[i]; n.Pad != nil && *n.Pad != ds.Classes-1 {
				d.errs = append(d.errs, Error{Pos: n.Pos, Layer: n.Name, Message: fmt.Sprintf("pad %d masks an id that the data never pads with: a text dataset of documents pads with its last id, classes−1 = %d; set pad: %d", *n.Pad, ds.Classes-1, ds.Classes-1)})
			}
		}
	}
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	return m, nil
}

// topoSort orders graph nodes so that every node follows its inputs,
// keeping declaration order where the graph allows. checkGraph has ruled
// out cycles and missing inputs.
func topoSort(nodes []Node) []Node {
	placed := map[string]bool{"input": true}
	var out []Node
	for len(out) < len(nodes) {
		progress := false
		for _, n := range nodes {
			if placed[n.Name] {
				continue
			}
			ready := true
			for _, in := range n.Inputs {
				if !placed[in] {
					ready = false
					break
				}
			}
			if ready {
				out = append(out, n)
				placed[n.Name] = true
				progress = true
				break
			}
		}
		if !progress {
			return append(out, nodes[len(out):]...) // unreachable after checkGraph
		}
	}
	return out
}

// decoder reads concrete fields, collecting an error for any that cannot be
// read (which validation should have made impossible).
type decoder struct {
	v    cue.Value
	pos  *positions
	errs Errors
}

// columns reads a CSV column choice, field, of the dataset: a name, an
// index or a list of them.
func (d *decoder) columns(ds cue.Value, field string) []Column {
	v := ds.LookupPath(cue.ParsePath(field))
	if !v.Exists() {
		return nil
	}
	one := func(e cue.Value) (Column, bool) {
		if s, err := e.String(); err == nil {
			return Column{Name: s}, true
		}
		if i, err := e.Int64(); err == nil {
			return Column{Index: int(i)}, true
		}
		return Column{}, false
	}
	if c, ok := one(v); ok {
		return []Column{c}
	}
	var out []Column
	it, err := v.List()
	if err != nil {
		d.fail([]string{"dataset", field}, field+" must be a column name, an index or a list of them")
		return nil
	}
	for it.Next() {
		c, ok := one(it.Value())
		if !ok {
			d.fail([]string{"dataset", field}, field+" must be a column name, an index or a list of them")
			return nil
		}
		out = append(out, c)
	}
	return out
}

func (d *decoder) fail(path []string, msg string) {
	at, ok := d.pos.lookup(path)
	if !ok {
		at = d.pos.firstFile()
	}
	d.errs = append(d.errs, Error{Pos: at, Message: msg})
}

func (d *decoder) field(v cue.Value, path string) cue.Value {
	return v.LookupPath(cue.ParsePath(path))
}

func (d *decoder) str(v cue.Value, path string) string {
	s, _ := d.field(v, path).String()
	return s
}

func (d *decoder) integer(v cue.Value, path string) int {
	n, _ := d.field(v, path).Int64()
	return int(n)
}

func (d *decoder) float(v cue.Value, path string) float64 {
	f, _ := d.field(v, path).Float64()
	return f
}

func (d *decoder) boolean(v cue.Value, path string) bool {
	b, _ := d.field(v, path).Bool()
	return b
}

func (d *decoder) ints(v cue.Value, path string) []int {
	var out []int
	_ = d.field(v, path).Decode(&out)
	return out
}

// pair reads an int-or-[h, w] parameter as a pair.
func (d *decoder) pair(v cue.Value, path string) [2]int {
	f := d.field(v, path)
	if n, err := f.Int64(); err == nil {
		return [2]int{int(n), int(n)}
	}
	var p []int
	if err := f.Decode(&p); err == nil && len(p) == 2 {
		return [2]int{p[0], p[1]}
	}
	return [2]int{}
}

// node reads one layer or graph node.
func (d *decoder) node(v cue.Value, path []string) Node {
	at, _ := d.pos.lookup(path)
	n := Node{
		Name:     d.str(v, "name"),
		Op:       Op(d.str(v, "op")),
		OutShape: d.ints(v, "out"),
		Pos:      at,
	}
	_ = v.LookupPath(cue.ParsePath("inputs")).Decode(&n.Inputs)
	_ = v.LookupPath(cue.ParsePath("inShapes")).Decode(&n.InShapes)
	rank := 0
	if len(n.InShapes) > 0 {
		rank = len(n.InShapes[0])
	}
	switch n.Op {
	case OpDense:
		n.Units = d.integer(v, "units")
		n.Bias = d.boolean(v, "bias")
		n.Tie = d.str(v, "tie")
	case OpConv2D, OpMaxPool2D, OpAvgPool2D:
		n.Kernel = d.pair(v, "kernel")
		n.Stride = d.pair(v, "stride")
		n.Padding = d.pair(v, "padding")
		n.Dilation = d.pair(v, "dilation")
		n.Rounding = d.str(v, "rounding")
		if n.Op == OpAvgPool2D {
			n.ExcludePad = !d.boolean(v, "countIncludePad")
		}
		if n.Op == OpConv2D {
			n.OutChannels = d.integer(v, "outChannels")
			n.Groups = d.integer(v, "groups")
			n.Bias = d.boolean(v, "bias")
		}
	case OpConv1D, OpMaxPool1D, OpAvgPool1D:
		// the 2-D window of height 1 (Node's doc)
		n.Kernel = [2]int{1, d.integer(v, "kernel")}
		n.Stride = [2]int{1, d.integer(v, "stride")}
		n.Padding = [2]int{0, d.integer(v, "padding")}
		n.Dilation = [2]int{1, d.integer(v, "dilation")}
		n.Rounding = d.str(v, "rounding")
		if n.Op == OpConv1D {
			n.OutChannels = d.integer(v, "outChannels")
			n.Groups = d.integer(v, "groups")
			n.Bias = d.boolean(v, "bias")
		}
	case OpSoftmax, OpLogSoftmax, OpConcat:
		n.Axis = d.integer(v, "axis")
		if n.Axis < 0 {
			n.Axis += rank
		}
		if n.Op == OpSoftmax {
			n.Causal = d.boolean(v, "causal")
			if f := d.field(v, "pad"); f.Exists() {
				if id, err := f.Int64(); err == nil {
					pad := int(id)
					n.Pad = &pad
				}
			}
		}
	case OpResize:
		n.Mode = d.str(v, "mode")
		n.AlignCorners = d.boolean(v, "alignCorners")
	case OpEmbedding:
		n.Vocab = d.integer(v, "vocab")
		n.Dim = d.integer(v, "dim")
		n.Positions = d.boolean(v, "positions")
	case OpSlice:
		n.Axis = d.integer(v, "axis")
		if n.Axis < 0 {
			n.Axis += rank
		}
		n.Start = d.integer(v, "start")
		n.End = d.integer(v, "end")
	case OpTranspose:
		n.Perm = d.ints(v, "perm")
	case OpReshape:
		n.Shape = append([]int(nil), n.OutShape...)
	case OpLeakyReLU:
		n.Alpha = d.float(v, "alpha")
	case OpAddConst, OpMulConst, OpPowConst:
		n.Alpha = d.float(v, "value")
	case OpLayerNorm:
		n.Axis = d.integer(v, "axis")
		if n.Axis < 0 {
			n.Axis += rank
		}
		n.Eps = d.float(v, "eps")
		n.Bias = d.boolean(v, "bias")
	case OpReduceMean:
		for _, a := range d.ints(v, "axes") {
			if a < 0 {
				a += rank
			}
			n.Axes = append(n.Axes, a)
		}
		slices.Sort(n.Axes)
		n.KeepDims = d.boolean(v, "keepdims")
	case OpDropout:
		n.Rate = d.float(v, "rate")
	case OpBatchNorm:
		n.Eps = d.float(v, "eps")
		n.Momentum = d.float(v, "momentum")
	}
	return n
}
