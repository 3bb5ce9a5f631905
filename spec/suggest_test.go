package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMisspeltLayerFields: a misspelt field of a layer is named, with the
// field it most likely means, and the required field it leaves out is
// named too, both at the layer; before, both hid behind "non-concrete
// value … in operand to mod". An unknown op gets the nearest op.
func TestMisspeltLayerFields(t *testing.T) {
	cases := []struct {
		layers string
		want   []string
	}{
		{`{op: "conv2d", outChanels: 4, kernel: 3}`, []string{
			`m.cue:9:27: layer conv2d1: conv2d layers have no field "outChanels"; did you mean outChannels?`,
			`m.cue:9:12: layer conv2d1: missing required field outChannels`}},
		{`{op: "conv2d", kernel: 3}`, []string{
			`m.cue:9:12: layer conv2d1: missing required field outChannels`}},
		{`{op: "conv2d", outchannels: 4, kernal: 3, unit: 2}`, []string{
			`layer conv2d1: conv2d layers have no field "outchannels"; did you mean outChannels?`,
			`layer conv2d1: conv2d layers have no field "kernal"; did you mean kernel?`,
			// nothing near: the fields are listed, without the misspelt ones
			`layer conv2d1: conv2d layers have no field "unit" (conv2d layers have op, name, inputs, outChannels, kernel, stride, padding, dilation, groups, bias, rounding, inChannels)`,
			`layer conv2d1: missing required field outChannels`,
			`layer conv2d1: missing required field kernel (int or list)`}},
		{`{op: "flatten"}, {op: "dense", unit: 4}`, []string{
			`m.cue:9:43: layer dense1: dense layers have no field "unit"; did you mean units?`,
			`m.cue:9:29: layer dense1: missing required field units`}},
		{`{op: "conv2f", outChannels: 4, kernel: 3}`, []string{
			`layer conv2f1: unknown op "conv2f" (did you mean "conv2d"?); the ops are dense, matmul, conv2d,`}},
		{`{op: "dens", units: 3}`, []string{`unknown op "dens" (did you mean "dense"?)`}},
	}
	dir := t.TempDir()
	for _, c := range cases {
		src := "package p\n\nimport \"github.com/mlbuild/mlbuild/schema\"\n\nschema.#Spec & {\n\tname: \"m\"\n\tmodel: {\n\t\tinput: [1, 8, 8]\n\t\tlayers: [" + c.layers + "]\n\t}\n" +
			"\ttraining: {loss: \"softmax_cross_entropy\", optimizer: {kind: \"adam\", lr: 1e-3}, epochs: 1, batchSize: 32}\n}\n"
		f := filepath.Join(dir, "m.cue")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(f)
		if err == nil {
			t.Errorf("%s: accepted", c.layers)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
		if strings.Contains(got, "non-concrete") {
			t.Errorf("%s: a CUE message leaks:\n%s", c.layers, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: errors lack %q:\n%s", c.layers, w, got)
			}
		}
	}
}

// TestMisspeltSetting: a misspelt field outside the layers gets the
// nearest field of its struct too.
func TestMisspeltSetting(t *testing.T) {
	f := filepath.Join(t.TempDir(), "m.cue")
	src := "package p\n\nimport \"github.com/mlbuild/mlbuild/schema\"\n\nschema.#Spec & {\n\tname: \"m\"\n\tmodel: {\n\t\tinput: [4]\n\t\tlayers: [{op: \"dense\", units: 2}]\n\t}\n" +
		"\ttraining: {loss: \"softmax_cross_entropy\", optimizer: {kind: \"adam\", lr: 1e-3}, epoch: 1, batchSize: 32}\n}\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(f)
	if err == nil || !strings.Contains(err.Error(), `field "epoch" is not allowed here (in training); did you mean epochs?`) {
		t.Errorf("error %v", err)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"outChannels", "kernel", "stride", "padding"}
	for word, want := range map[string]string{
		"outChanels": "outChannels", "OUTCHANNELS": "outChannels", "kernal": "kernel",
		"strides": "stride", "pad": "", "units": "", "x": "", strings.Repeat("kernel", 20): "",
	} {
		if got := nearest(word, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", word, got, want)
		}
	}
}
