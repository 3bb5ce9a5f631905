package gpu

import (
	"fmt"
	"slices"
	"strings"
)

// Library is the kernel library of one program in one dialect: every
// kernel once, however many plan steps and plans launch it. Kernels are
// deduplicated by their printed code and named KernelPrefix, a counter in
// the order they were first added, and their kind ("mlb003_softmax").
//
// The code compared leaves out the doc line and the group count: a launch
// carries its own group count (Launch.Groups), so the same code launched
// over another batch (the training, evaluation and batch-1 plans' copies
// of one layer's kernel) is one kernel, which keeps the doc of its first
// use. Its parameters' Sizes are then the least of its uses' (each
// launch's Bindings say what that launch touches), so the ArgBytes a
// runtime checks hold for every launch.
type Library struct {
	d       *Dialect
	Kernels []*Kernel
	names   map[string]*Kernel // printed code (no doc, no group count) → the kernel
}

// NewLibrary returns an empty library for dialect d.
func NewLibrary(d *Dialect) *Library {
	return &Library{d: d, names: map[string]*Kernel{}}
}

// Dialect is the library's kernel language.
func (lib *Library) Dialect() *Dialect { return lib.d }

// Add adds k (after Rewrite for the dialect) and returns its name, the name
// of a kernel of the same code already in the library when there is one.
func (lib *Library) Add(k *Kernel, kind string) (string, error) {
	k = Rewrite(k, lib.d)
	key := *k
	key.Name, key.Doc, key.Groups = "KERNEL", "", 0
	var b strings.Builder
	if err := PrintKernel(&b, lib.d, &key); err != nil {
		return "", err
	}
	if have, ok := lib.names[b.String()]; ok {
		for i := range have.Params {
			have.Params[i].Size = min(have.Params[i].Size, k.Params[i].Size)
		}
		return have.Name, nil
	}
	k.Params = slices.Clone(k.Params) // Sizes may shrink; the caller's kernel keeps its own
	k.Name = fmt.Sprintf("%s%03d_%s", KernelPrefix, len(lib.Kernels), kind)
	lib.names[b.String()] = k
	lib.Kernels = append(lib.Kernels, k)
	return k.Name, nil
}

// Source prints the library.
func (lib *Library) Source() (string, error) { return Source(lib.d, lib.Kernels) }
