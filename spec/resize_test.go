package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResizeShape loads resize layers over a [3, 5, 4] input and checks
// the output shape the schema computes and the decoded fields; bad
// values are refused at the layer's line (line 10 of the file) with the
// value and the rule.
func TestResizeShape(t *testing.T) {
	load := func(input, layer string) (*Model, error) {
		src := `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {
		input: ` + input + `
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
		layer string
		out   []int
		mode  string
		align bool
	}{
		{`{op: "resize", scale: 2}`, []int{3, 10, 8}, "nearest", false},
		{`{op: "resize", scale: [1, 3]}`, []int{3, 5, 12}, "nearest", false},
		{`{op: "resize", mode: "bilinear", size: [7, 9]}`, []int{3, 7, 9}, "bilinear", false},
		{`{op: "resize", mode: "bilinear", alignCorners: true, scale: 2}`, []int{3, 10, 8}, "bilinear", true},
		{`{op: "resize", size: [2, 3]}`, []int{3, 2, 3}, "nearest", false},
	} {
		m, err := load("[3, 5, 4]", tc.layer)
		if err != nil {
			t.Fatalf("%s: %v", tc.layer, err)
		}
		n := m.Nodes[1]
		if n.Op != OpResize || !slices.Equal(n.OutShape, tc.out) || n.Mode != tc.mode || n.AlignCorners != tc.align {
			t.Errorf("%s: %s %v mode %q align %v, want %v mode %q align %v", tc.layer, n.Op, n.OutShape, n.Mode, n.AlignCorners, tc.out, tc.mode, tc.align)
		}
	}
	for _, tc := range []struct{ input, layer, want string }{
		{"[3, 5, 4]", `{op: "resize"}`, "layer resize1: resize needs the output size: scale"},
		{"[3, 5, 4]", `{op: "resize", scale: 2, size: [4, 4]}`, "layer resize1: give scale or size, not both"},
		{"[3, 5, 4]", `{op: "resize", scale: 0}`, "layer resize1: scale must be at least 1, got 0×0"},
		{"[3, 5, 4]", `{op: "resize", scale: [2, -1]}`, "scale must be at least 1, got 2×-1"},
		{"[3, 5, 4]", `{op: "resize", size: [0, 4]}`, "layer resize1: size must be at least 1×1, got 0×4"},
		{"[3, 5, 4]", `{op: "resize", mode: "bicubic", scale: 2}`, "layer resize1: mode must be \"nearest\" or \"bilinear\", got \"bicubic\""},
		{"[3, 5, 4]", `{op: "resize", alignCorners: true, scale: 2}`, "alignCorners is for mode \"bilinear\" only"},
		{"[3, 20]", `{op: "resize", scale: 2}`, "resize needs a [channels, height, width] input but gets 3×20 from input"},
	} {
		_, err := load(tc.input, tc.layer)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.layer, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), "m.cue:10:") {
			t.Errorf("%s: error %v does not point at the layer's line 10", tc.layer, err)
		}
	}
}
