package gpu

import (
	"strings"
	"testing"
)

// scaleKernel is y[i] = x[i]·s over n elements (the element-wise
// kernels' shape), launched as groups blocks; doc is its doc line.
func scaleKernel(n, groups int, s float32, doc string) *Kernel {
	k := elementwise(doc, n, []Param{in("x", n), out("y", n)},
		func(i Expr) []Stmt { return []Stmt{store("y", i, mul(load("x", i), flt(s)))} })
	k.Groups = groups
	return k
}

// TestLibraryMergesLaunchesOfOneCode checks that kernels whose code differs
// only in doc and group count are one kernel of the library, with the
// least parameter sizes of its uses, and that any other difference keeps
// them apart.
func TestLibraryMergesLaunchesOfOneCode(t *testing.T) {
	for _, d := range []*Dialect{CUDA, Metal} {
		lib := NewLibrary(d)
		add := func(k *Kernel) string {
			t.Helper()
			name, err := lib.Add(k, "scale")
			if err != nil {
				t.Fatal(err)
			}
			return name
		}
		// the body bounds i by its own constant, so one code over 4096
		// elements launched as 16 or as 8 blocks is the same code
		big := scaleKernel(4096, 16, 2, "scale 4096 elements, batch 64")
		first := add(big)
		small := scaleKernel(4096, 8, 2, "scale 4096 elements, batch 32")
		small.Params[0].Size, small.Params[1].Size = 2048, 2048
		if got := add(small); got != first {
			t.Errorf("%s: a kernel differing only in doc and group count got its own name %s, want %s", d.Name, got, first)
		}
		if got := lib.Kernels[0].Params[0].Size; got != 2048 {
			t.Errorf("%s: the merged kernel's parameter size is %d, want the least of its uses, 2048", d.Name, got)
		}
		if big.Params[0].Size != 4096 {
			t.Errorf("%s: merging changed the caller's kernel's parameter size to %d", d.Name, big.Params[0].Size)
		}
		if got := add(scaleKernel(4096, 16, 3, "scale 4096 elements, batch 64")); got == first {
			t.Errorf("%s: a kernel of another constant was merged into %s", d.Name, first)
		}
		if got := add(scaleKernel(1024, 16, 2, "scale 4096 elements, batch 64")); got == first {
			t.Errorf("%s: a kernel of another bound was merged into %s", d.Name, first)
		}
		other := scaleKernel(4096, 16, 2, "")
		other.Threadgroup = 128
		if got := add(other); got == first {
			t.Errorf("%s: a kernel of another threadgroup size was merged into %s", d.Name, first)
		}
		if len(lib.Kernels) != 4 {
			t.Fatalf("%s: %d kernels in the library, want 4", d.Name, len(lib.Kernels))
		}
		src, err := lib.Source()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src, "batch 64") || strings.Contains(src, "batch 32") {
			t.Errorf("%s: the merged kernel should keep its first use's doc:\n%s", d.Name, src)
		}
	}
}
