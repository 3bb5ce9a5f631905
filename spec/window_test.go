package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWindowDefaultsAreTheSchemas loads a spec whose convolution and pools
// set no stride, padding, dilation or groups, and checks that Window, given
// the same nodes with those fields zero (as a Node built in Go has them),
// fills in what the schema filled in.
func TestWindowDefaultsAreTheSchemas(t *testing.T) {
	src := `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {
		input: [2, 12, 12]
		layers: [
			{op: "conv2d", outChannels: 4, kernel: 3},
			{op: "maxpool2d", kernel: 2},
			{op: "avgpool2d", kernel: [1, 5], rounding: "floor"},
			{op: "flatten"},
			{op: "dense", units: 2},
		]
	}
	training: {loss: "softmax_cross_entropy", optimizer: {kind: "adam", lr: 1e-3}, epochs: 1, batchSize: 4}
}
`
	f := filepath.Join(t.TempDir(), "m.cue")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	windows := 0
	for _, n := range m.Nodes {
		if n.Op != OpConv2D && n.Op != OpMaxPool2D && n.Op != OpAvgPool2D {
			continue
		}
		windows++
		bare := Node{Op: n.Op, Kernel: n.Kernel}
		got := bare.Window()
		want := Window{Kernel: n.Kernel, Stride: n.Stride, Padding: n.Padding, Dilation: n.Dilation, Groups: n.Groups}
		if n.Op != OpConv2D {
			want.Groups = 1 // a pool has no groups field; its window is one group
		}
		if got != want {
			t.Errorf("%s: Window of the bare node is %+v; the schema gives %+v", n.Name, got, want)
		}
		if w := n.Window(); w != want {
			t.Errorf("%s: Window of the decoded node is %+v, want its fields %+v", n.Name, w, want)
		}
	}
	if windows != 3 {
		t.Fatalf("%d windows, want 3", windows)
	}
}

// TestWindowKeepsSetFields checks that Window changes no field a spec set.
func TestWindowKeepsSetFields(t *testing.T) {
	n := Node{Op: OpConv2D, Kernel: [2]int{3, 5}, Stride: [2]int{2, 3}, Padding: [2]int{1, 2}, Dilation: [2]int{2, 1}, Groups: 4}
	want := Window{Kernel: [2]int{3, 5}, Stride: [2]int{2, 3}, Padding: [2]int{1, 2}, Dilation: [2]int{2, 1}, Groups: 4}
	if got := n.Window(); got != want {
		t.Errorf("conv: %+v, want %+v", got, want)
	}
	n.Op, n.Groups = OpMaxPool2D, 0
	want.Groups = 1
	if got := n.Window(); got != want {
		t.Errorf("pool: %+v, want %+v", got, want)
	}
}
