package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestCeilRounding loads max pools with rounding: "ceil" and checks the
// schema's output size against hand-computed PyTorch ceil_mode sizes and
// against WindowOutSize, the Go copy of the rule the planner verifies
// with; avgpool2d and conv2d refuse "ceil".
func TestCeilRounding(t *testing.T) {
	load := func(layer string) (*Model, error) {
		src := `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {
		input: [2, 14, 13]
		layers: [
			` + layer + `,
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
		return Load(f)
	}
	for _, tc := range []struct {
		k, s, p int
		out     [2]int // torch.nn.functional.max_pool2d(x, k, s, p, ceil_mode=True) on 14×13, run once
	}{
		{3, 2, 0, [2]int{7, 6}}, // floor: 6×6
		{2, 2, 0, [2]int{7, 7}}, // floor: 7×6
		{3, 2, 1, [2]int{8, 7}}, // floor: 7×7
		{2, 2, 1, [2]int{8, 7}}, // width: an 8th window would start in the padding
		{3, 3, 1, [2]int{5, 5}}, // height: a 6th window would start in the padding
	} {
		// avgpool2d shares the window rule (torch's avg_pool2d with
		// ceil_mode=True gives the same sizes).
		for _, op := range []string{"maxpool2d", "avgpool2d"} {
			m, err := load(fmt.Sprintf(`{op: %q, kernel: %d, stride: %d, padding: %d, rounding: "ceil"}`, op, tc.k, tc.s, tc.p))
			if err != nil {
				t.Fatalf("%s k%d s%d p%d: %v", op, tc.k, tc.s, tc.p, err)
			}
			n := m.Nodes[1]
			got := [2]int{n.OutShape[1], n.OutShape[2]}
			rule := [2]int{WindowOutSize(14, tc.k, tc.s, tc.p, 1, true), WindowOutSize(13, tc.k, tc.s, tc.p, 1, true)}
			if got != tc.out || rule != tc.out {
				t.Errorf("%s k%d s%d p%d: schema %v, WindowOutSize %v, want %v", op, tc.k, tc.s, tc.p, got, rule, tc.out)
			}
		}
	}
	layer := `{op: "conv2d", outChannels: 2, kernel: 3, stride: 2, rounding: "ceil"}`
	if _, err := load(layer); err == nil || !strings.Contains(err.Error(), `rounding "ceil" is for maxpool2d and avgpool2d only`) {
		t.Errorf("%s: error %v", layer, err)
	}
	// countIncludePad: true by default, decoded as ExcludePad; only an
	// avgpool2d has it, and it is a bool.
	for _, tc := range []struct {
		layer   string
		exclude bool
		want    string
	}{
		{`{op: "avgpool2d", kernel: 3, padding: 1, stride: 2, rounding: "ceil"}`, false, ""},
		{`{op: "avgpool2d", kernel: 3, padding: 1, stride: 2, countIncludePad: false}`, true, ""},
		{`{op: "avgpool2d", kernel: 3, padding: 1, stride: 2, countIncludePad: 1}`, false, "countIncludePad"},
		{`{op: "maxpool2d", kernel: 3, padding: 1, stride: 2, countIncludePad: false}`, false, "countIncludePad"},
	} {
		m, err := load(tc.layer)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "m.cue:") {
				t.Errorf("%s: error %v, want one at the spec's line naming %q", tc.layer, err, tc.want)
			}
			t.Logf("%s: %v", tc.layer, err)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.layer, err)
		}
		if n := m.Nodes[1]; n.ExcludePad != tc.exclude {
			t.Errorf("%s: ExcludePad %v, want %v", tc.layer, n.ExcludePad, tc.exclude)
		}
	}
}
