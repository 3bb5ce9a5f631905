package onnx

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// IsChain reports whether the layers form a chain: each reads only the one
// before it (the first reads the input) and the last is the output. A chain
// is written in the sequential form, anything else in the graph form.
func (im *Imported) IsChain() bool {
	prev := "input"
	for _, l := range im.Layers {
		if len(l.Inputs) != 1 || l.Inputs[0] != prev {
			return false
		}
		prev = l.Name
	}
	return len(im.Layers) > 0 && prev == im.Output
}

// Loss is the training loss the spec names: cross-entropy for a model
// with one score per class (per token, for a model that reads token ids:
// an embedding), else mean squared error; also mean squared
// error for a model whose output is already a softmax (cross-entropy
// applies its own, and the schema refuses the pair).
func (im *Imported) Loss() string {
	tokens := slices.ContainsFunc(im.Layers, func(l *Layer) bool { return l.Op == "embedding" })
	for _, l := range im.Layers {
		if l.Name == im.Output && (len(l.OutShape) == 1 || tokens && len(l.OutShape) == 2) && l.Op != "softmax" {
			return "softmax_cross_entropy"
		}
	}
	return "mse"
}

// cueKeywords cannot name a package.
var cueKeywords = []string{"package", "import", "for", "in", "if", "let", "true", "false", "null", "div", "mod", "quo", "rem"}

// Spec renders the imported model as a CUE spec named name. source is the
// .onnx file's name and weights the safetensors file's, for the header.
func (im *Imported) Spec(name, source, weights string) []byte {
	var b bytes.Buffer
	pkg := name
	if slices.Contains(cueKeywords, pkg) {
		pkg = "model_" + pkg
	}
	fmt.Fprintf(&b, "// %s was imported by `mlbuild import` from %s", name, commentText(source))
	var from []string
	if im.Producer != "" {
		from = append(from, "exported by "+commentText(im.Producer))
	}
	from = append(from, fmt.Sprintf("opset %d", im.Opset))
	fmt.Fprintf(&b, " (%s).\n", strings.Join(from, ", "))
	fmt.Fprintf(&b, "// Its weights are in %s under the layer names below: build one binary\n", commentText(weights))
	fmt.Fprintf(&b, "// that carries them with\n//\n//\tmlbuild compile %s.cue --weights %s\n//\n", name, commentText(weights))
	fmt.Fprintf(&b, "// or build without --weights and give the binary --weights %s.\n", commentText(weights))
	for _, w := range im.Warnings {
		fmt.Fprintf(&b, "//\n// Warning: %s\n", commentText(w))
	}
	fmt.Fprintf(&b, "package %s\n\nimport \"github.com/mlbuild/mlbuild/schema\"\n\nschema.#Spec & {\n", pkg)
	fmt.Fprintf(&b, "\tname: %s\n\n\tmodel: {\n", strconv.Quote(name))
	fmt.Fprintf(&b, "\t\tinput: %s\n", cueValue(im.Input))
	if im.IsChain() {
		b.WriteString("\t\tlayers: [\n")
		for _, l := range im.Layers {
			writeComment(&b, "\t\t\t", l)
			fmt.Fprintf(&b, "\t\t\t{name: %s, op: %s%s},\n", strconv.Quote(l.Name), strconv.Quote(l.Op), fields(l))
		}
		b.WriteString("\t\t]\n")
	} else {
		b.WriteString("\t\tnodes: {\n")
		for _, l := range im.Layers {
			ins := make([]string, len(l.Inputs))
			for i, in := range l.Inputs {
				ins[i] = strconv.Quote(in)
			}
			writeComment(&b, "\t\t\t", l)
			fmt.Fprintf(&b, "\t\t\t%s: {op: %s, inputs: [%s]%s}\n", l.Name, strconv.Quote(l.Op), strings.Join(ins, ", "), fields(l))
		}
		b.WriteString("\t\t}\n")
		fmt.Fprintf(&b, "\t\toutput: %s\n", strconv.Quote(im.Output))
	}
	b.WriteString("\t}\n\n")
	b.WriteString("\t// ONNX does not record how a model was trained: these settings are a\n")
	b.WriteString("\t// starting point for training further from the imported weights.\n")
	for _, l := range im.Layers {
		if l.Name == im.Output && (l.Op == "softmax" || l.Op == "logsoftmax" || l.Op == "sigmoid") && im.Loss() == "softmax_cross_entropy" {
			fmt.Fprintf(&b, "\t// The loss takes raw scores: to train, make the layer before %s the output.\n", l.Name)
		}
	}
	fmt.Fprintf(&b, "\ttraining: {\n\t\tloss: %s\n", strconv.Quote(im.Loss()))
	b.WriteString("\t\toptimizer: {kind: \"adam\", lr: 1e-4}\n\t\tepochs:    1\n\t\tbatchSize: 32\n\t}\n}\n")
	return b.Bytes()
}

func writeComment(b *bytes.Buffer, indent string, l *Layer) {
	fmt.Fprintf(b, "%s// %s: %s\n", indent, commentText(l.Source), shapeText(l.OutShape))
}

// commentText keeps a text on one comment line.
func commentText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
}

func fields(l *Layer) string {
	var b strings.Builder
	for _, f := range l.Fields {
		fmt.Fprintf(&b, ", %s: %s", f.Name, cueValue(f.Value))
	}
	return b.String()
}

// cueValue writes an int, float64, bool, string or []int as CUE.
func cueValue(v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case string:
		return strconv.Quote(v)
	case []int:
		parts := make([]string, len(v))
		for i, d := range v {
			parts[i] = strconv.Itoa(d)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	// not reached for the fields the importer makes; a quoted value makes
	// the spec fail validation, which reports an importer bug
	return strconv.Quote(fmt.Sprint(v))
}

// Weights lists every layer's params as safetensors tensors, named as the
// planner names them ("conv1.weight").
func (im *Imported) Weights() []safetensors.Tensor {
	var ts []safetensors.Tensor
	for _, l := range im.Layers {
		for _, p := range l.Params {
			ts = append(ts, safetensors.Tensor{Name: l.Name + "." + p.Suffix, Shape: p.Shape, Data: p.Data})
		}
	}
	return ts
}
