// Package safetensors reads and writes weights in the safetensors format of
// Hugging Face, which PyTorch, JAX and most of the Python ecosystem load
// directly: an 8-byte little-endian header length, a JSON header mapping each
// tensor name to its dtype, shape and byte range ("data_offsets"), an
// optional "__metadata__" object of strings, and then the raw little-endian
// data. See https://github.com/huggingface/safetensors for the format.
//
// Writes are atomic (a crash never leaves a half-written checkpoint) and
// deterministic: tensors are laid out in name order and the header is
// canonical, so the same weights always give the same bytes. Reads check
// everything a corrupt, truncated or hostile file could get wrong and name
// the file and the tensor in every error. The models mlbuild builds compute
// in float32; F64, F16 and BF16 tensors (as PyTorch often saves them) are
// converted on reading.
//
// This package is copied into each generated program's module (it is embedded
// in the mlbuild binary), so it imports only the standard library and
// mlbuild's rt/atomicfile.
package safetensors

import (
	"fmt"
	"slices"
	"strings"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation does
// (100 MB), so that a corrupt length cannot ask for an absurd allocation.
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header key of the free-form string metadata.
const metadataKey = "__metadata__"

// Tensor is one named float32 tensor, row-major.
type Tensor struct {
	Name  string
	Shape []int // empty for a scalar
	Data  []float32
	// DType is the element type the tensor had in the file it was read
	// from ("F32", or "F64", "F16", "BF16" before conversion). Write
	// ignores it and always writes F32.
	DType string
}

// Spec is a tensor's name and shape without its data: what a model expects
// to find in a weights file.
type Spec struct {
	Name  string
	Shape []int
}

// File is a safetensors file that has been read and checked.
type File struct {
	Path     string            // the file, for messages
	Tensors  []Tensor          // in the order of their data in the file
	Metadata map[string]string // the "__metadata__" object; empty if absent
	index    map[string]int
	// raw holds each tensor's bytes in the file when it was read in place
	// (ReadBytesInPlace; its tensors have no Data), else nil.
	raw [][]byte
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	i, ok := f.index[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// CopyInto copies the data of the tensor called name into dst, which must
// have exactly its number of elements. It is how a program loads a weight
// into its own buffer.
func (f *File) CopyInto(name string, dst []float32) error {
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	if f.raw != nil {
		raw := f.raw[f.index[name]]
		if n := len(raw) / int(dtypeSizes[t.DType]); n != len(dst) {
			return fmt.Errorf("%s: tensor %q has %d values (shape %s), the model's buffer holds %d",
				f.Path, name, n, FormatShape(t.Shape), len(dst))
		}
		converters[t.DType](dst, raw)
		return nil
	}
	if len(t.Data) != len(dst) {
		return fmt.Errorf("%s: tensor %q has %d values (shape %s), the model's buffer holds %d",
			f.Path, name, len(t.Data), FormatShape(t.Shape), len(dst))
	}
	copy(dst, t.Data)
	return nil
}

// Specs lists the name and shape of every tensor in the file, in data order.
func (f *File) Specs() []Spec {
	specs := make([]Spec, len(f.Tensors))
	for i, t := range f.Tensors {
		specs[i] = Spec{t.Name, t.Shape}
	}
	return specs
}

// FormatShape renders a shape as [a b c], the way messages show it.
func FormatShape(shape []int) string {
	return strings.ReplaceAll(fmt.Sprint(shape), ",", "")
}

// maxShapeReport caps the lines CheckShapes lists, so that loading the
// weights of a very different model gives a readable message.
const maxShapeReport = 20

// CheckShapes compares the tensors in f with the ones a model expects and
// returns an error listing every missing tensor, every unexpected one and
// every one with another shape, or nil when they match exactly. It turns
// "weights of another model" into a message a user can act on.
func CheckShapes(f *File, want []Spec) error {
	var problems []string
	wanted := make(map[string]bool, len(want))
	for _, w := range want {
		wanted[w.Name] = true
		t, ok := f.Tensor(w.Name)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("missing tensor %q %s", w.Name, FormatShape(w.Shape)))
		case !slices.Equal(t.Shape, w.Shape):
			problems = append(problems, fmt.Sprintf("tensor %q is %s in the file, the model needs %s", w.Name, FormatShape(t.Shape), FormatShape(w.Shape)))
		}
	}
	for _, t := range f.Tensors {
		if !wanted[t.Name] {
			problems = append(problems, fmt.Sprintf("unexpected tensor %q %s", t.Name, FormatShape(t.Shape)))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: these weights do not fit this model (are they from another model?):", f.Path)
	for i, p := range problems {
		if i == maxShapeReport {
			fmt.Fprintf(&b, "\n\t... and %d more", len(problems)-i)
			break
		}
		b.WriteString("\n\t" + p)
	}
	return fmt.Errorf("%s", b.String())
}

// CheckFinite returns an error naming the file, the tensor and the element
// when a tensor of f holds a NaN or an infinity (nil when every value is
// finite): such weights make every prediction NaN, so they are refused
// where they are loaded or embedded rather than used silently.
func (f *File) CheckFinite() error {
	for _, t := range f.Tensors {
		for i, v := range t.Data {
			if v-v != 0 { // NaN or ±Inf
				return fmt.Errorf("%s: tensor %q holds %v at element %d (of shape %s); the weights are not usable (did the training that wrote them diverge?)", f.Path, t.Name, v, i, FormatShape(t.Shape))
			}
		}
	}
	return nil
}

// Bytes returns the bytes in the file of the tensor called name, for a
// file read in place (ReadBytesInPlace; nil otherwise, or when there is no
// such tensor): a program that finds its weights already laid out as its
// arena checks where each one lies.
func (f *File) Bytes(name string) []byte {
	i, ok := f.index[name]
	if !ok || f.raw == nil {
		return nil
	}
	return f.raw[i]
}
