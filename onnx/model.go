// Package onnx reads ONNX models (the .onnx files that torch.onnx.export,
// tf2onnx and keras2onnx write) for `mlbuild import`: a decoder of the
// protocol buffer wire format written by hand against onnx.proto, so that
// mlbuild needs no protobuf library, and the import of a graph into the
// layers of a model spec.
//
// The decoder treats every file as hostile: lengths are checked against the
// bytes that are left, tensor shapes are bounded in rank and element count
// and must agree with the data they carry, nesting (graphs inside
// attributes) is bounded, and external data is read only from inside the
// model's folder. Errors say where in the model (graph.node[3].attribute[1])
// and at which byte.
//
// The field numbers are those of onnx.proto (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto).
// Fields mlbuild has no use for (doc strings, metadata, training info,
// functions, sparse tensors) are skipped after their framing is checked.
package onnx

// Model is an ONNX ModelProto: the graph and the operator sets it uses.
type Model struct {
	IRVersion       int64
	ProducerName    string
	ProducerVersion string
	Opsets          []OpsetID
	Graph           *Graph
}

// OpsetID names an operator set and its version; the empty domain (or
// "ai.onnx") is the standard operator set.
type OpsetID struct {
	Domain  string
	Version int64
}

// Opset returns the version of the standard operator set the model
// imports, or 0 when it names none.
func (m *Model) Opset() int64 {
	for _, o := range m.Opsets {
		if o.Domain == "" || o.Domain == "ai.onnx" {
			return o.Version
		}
	}
	return 0
}

// Graph is a GraphProto: nodes in topological order, constant tensors
// (initializers), and the declared inputs, outputs and intermediate values.
type Graph struct {
	Name         string
	Nodes        []*Node
	Initializers []*Tensor
	Inputs       []*ValueInfo
	Outputs      []*ValueInfo
	ValueInfo    []*ValueInfo
}

// Node is a NodeProto: one operator application.
type Node struct {
	Name    string
	OpType  string
	Domain  string
	Inputs  []string // "" marks an omitted optional input
	Outputs []string
	Attrs   []*Attribute
}

// Attr returns the attribute called name, or nil.
func (n *Node) Attr(name string) *Attribute {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// AttrType is AttributeProto.AttributeType.
type AttrType int32

// The attribute types of onnx.proto.
const (
	AttrUndefined AttrType = 0
	AttrFloat     AttrType = 1
	AttrInt       AttrType = 2
	AttrString    AttrType = 3
	AttrTensor    AttrType = 4
	AttrGraph     AttrType = 5
	AttrFloats    AttrType = 6
	AttrInts      AttrType = 7
	AttrStrings   AttrType = 8
	AttrTensors   AttrType = 9
	AttrGraphs    AttrType = 10
)

// Attribute is an AttributeProto. Only the field its Type names is
// meaningful.
type Attribute struct {
	Name    string
	Type    AttrType
	F       float32
	I       int64
	S       []byte
	T       *Tensor
	G       *Graph
	Floats  []float32
	Ints    []int64
	Strings [][]byte
	Tensors []*Tensor
	Graphs  []*Graph
}

// ValueInfo is a ValueInfoProto: a value's name, element type and shape,
// when the model declares them.
type ValueInfo struct {
	Name     string
	ElemType DataType // 0 when the value is not a tensor or the type is absent
	HasShape bool
	Dims     []Dim
}

// Dim is one dimension of a declared shape: a fixed size, a named symbolic
// size (dim_param, such as "batch_size"), or unknown.
type Dim struct {
	Value int64
	Param string
	Known bool // Value is set
}
