package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSliceShape loads slices of a [6, 5, 4] input along each axis (a
// negative one too) and checks the output shape and the decoded fields;
// ranges that do not fit are refused with the layer and the bounds.
func TestSliceShape(t *testing.T) {
	load := func(layer string) (*Model, error) {
		src := `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {
		input: [6, 5, 4]
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
		layer       string
		out         []int
		axis, start int
	}{
		{`{op: "slice", axis: 0, end: 3}`, []int{3, 5, 4}, 0, 0},
		{`{op: "slice", axis: 0, start: 3, end: 6}`, []int{3, 5, 4}, 0, 3},
		{`{op: "slice", axis: 1, start: 4, end: 5}`, []int{6, 1, 4}, 1, 4},
		{`{op: "slice", axis: -1, start: 1, end: 3}`, []int{6, 5, 2}, 2, 1},
	} {
		m, err := load(tc.layer)
		if err != nil {
			t.Fatalf("%s: %v", tc.layer, err)
		}
		n := m.Nodes[1]
		if n.Op != OpSlice || !slices.Equal(n.OutShape, tc.out) || n.Axis != tc.axis || n.Start != tc.start || n.End != tc.start+tc.out[tc.axis] {
			t.Errorf("%s: %s %v axis %d from %d to %d, want %v axis %d from %d", tc.layer, n.Op, n.OutShape, n.Axis, n.Start, n.End, tc.out, tc.axis, tc.start)
		}
	}
	for _, tc := range []struct{ layer, want string }{
		{`{op: "slice", axis: 0, start: 4, end: 7}`, "slice 4 to 7 of axis 0 does not fit the input 6×5×4 from input"},
		{`{op: "slice", axis: 1, start: 2, end: 2}`, "need 0 ≤ start < end ≤ 5"},
		{`{op: "slice", axis: 3, end: 1}`, "slice axis 3 is not an axis of the rank-3 input"},
	} {
		if _, err := load(tc.layer); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.layer, err, tc.want)
		}
	}
}
