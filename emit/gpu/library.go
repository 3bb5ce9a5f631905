package gpu

import (
	"fmt"
	"strings"
)

// Library is the kernel library of one program in one dialect: every
// kernel once, however many plan steps and plans launch it. Kernels are
// deduplicated by their printed body and named KernelPrefix, a counter in
// the order they were first added, and their kind ("mlb003_softmax").
type Library struct {
	d       *Dialect
	Kernels []*Kernel
	names   map[string]string // printed body → kernel name
}

// NewLibrary returns an empty library for dialect d.
func NewLibrary(d *Dialect) *Library {
	return &Library{d: d, names: map[string]string{}}
}

// Dialect is the library's kernel language.
func (lib *Library) Dialect() *Dialect { return lib.d }

// Add adds k (after Rewrite for the dialect) and returns its name, the name
// of an identical kernel already in the library when there is one.
func (lib *Library) Add(k *Kernel, kind string) (string, error) {
	k = Rewrite(k, lib.d)
	k.Name = "KERNEL"
	var b strings.Builder
	if err := PrintKernel(&b, lib.d, k); err != nil {
		return "", err
	}
	if name, ok := lib.names[b.String()]; ok {
		return name, nil
	}
	k.Name = fmt.Sprintf("%s%03d_%s", KernelPrefix, len(lib.Kernels), kind)
	lib.names[b.String()] = k.Name
	lib.Kernels = append(lib.Kernels, k)
	return k.Name, nil
}

// Source prints the library.
func (lib *Library) Source() (string, error) { return Source(lib.d, lib.Kernels) }
