package onnx

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestImportResize maps Resize and Upsample nodes over [3, 5, 4] samples:
// what PyTorch exports (nearest asymmetric floor, linear with
// pytorch_half_pixel, half_pixel or align_corners; scales or sizes) to
// resize layers with their fields and shapes, and everything else refused
// with the attribute or input that mlbuild cannot follow.
func TestImportResize(t *testing.T) {
	str := func(name, v string) *Attribute { return &Attribute{Name: name, Type: AttrString, S: []byte(v)} }
	nearest := []*Attribute{str("mode", "nearest"), str("coordinate_transformation_mode", "asymmetric"), str("nearest_mode", "floor")}
	linear := func(ctm string) []*Attribute {
		return []*Attribute{str("mode", "linear"), str("coordinate_transformation_mode", ctm)}
	}
	consts := []*Tensor{
		NewFloatTensor("empty", []int64{0}, nil),
		NewFloatTensor("x2", []int64{4}, []float32{1, 1, 2, 2}),
		NewFloatTensor("x2x3", []int64{4}, []float32{1, 1, 2, 3}),
		NewFloatTensor("x1.5", []int64{4}, []float32{1, 1, 1, 1.5}),
		NewFloatTensor("x1.3", []int64{4}, []float32{1, 1, 1.3, 2}),
		NewFloatTensor("chan2", []int64{4}, []float32{1, 2, 2, 2}),
		NewInt64Tensor("s7x9", []int64{4}, []int64{1, 3, 7, 9}),
		NewInt64Tensor("s1x9", []int64{4}, []int64{1, 3, 1, 9}),
		NewInt64Tensor("sc4", []int64{4}, []int64{1, 4, 7, 9}),
	}
	for _, c := range []struct {
		name  string
		ins   []string
		attrs []*Attribute
		opset int64
		want  string // the fields of the layer and its shape, or a fragment of the error
	}{
		{"nearest x2", []string{"x", "empty", "x2"}, nearest, 13, "scale=2 [3 10 8]"},
		{"nearest x2x3", []string{"x", "", "x2x3"}, nearest, 13, "scale=[2 3] [3 10 12]"},
		{"nearest to 7x9", []string{"x", "", "", "s7x9"}, nearest, 11, "size=[7 9] [3 7 9]"},
		{"nearest x1.5", []string{"x", "", "x1.5"}, nearest, 13, "size=[5 6] [3 5 6]"},
		{"bilinear pytorch_half_pixel x2", []string{"x", "", "x2"}, linear("pytorch_half_pixel"), 13, "mode=bilinear scale=2 [3 10 8]"},
		{"bilinear half_pixel x2", []string{"x", "empty", "x2"}, linear("half_pixel"), 19, "mode=bilinear scale=2 [3 10 8]"},
		{"bilinear align_corners to 7x9", []string{"x", "empty", "empty", "s7x9"}, linear("align_corners"), 17, "mode=bilinear alignCorners=true size=[7 9] [3 7 9]"},
		{"upsample nearest opset 9", []string{"x", "x2"}, []*Attribute{str("mode", "nearest")}, 9, "scale=2 [3 10 8]"},

		{"nearest half_pixel", []string{"x", "", "x2"}, []*Attribute{str("mode", "nearest"), str("nearest_mode", "floor")}, 13, `mode nearest with coordinate_transformation_mode "half_pixel"`},
		{"nearest round_prefer_floor", []string{"x", "", "x2"}, []*Attribute{str("mode", "nearest"), str("coordinate_transformation_mode", "asymmetric")}, 13, `nearest_mode "round_prefer_floor"`},
		{"linear asymmetric", []string{"x", "", "x2"}, linear("asymmetric"), 13, `mode linear with coordinate_transformation_mode "asymmetric"`},
		{"linear tf_crop_and_resize", []string{"x", "", "x2"}, linear("tf_crop_and_resize"), 13, `coordinate_transformation_mode "tf_crop_and_resize"`},
		{"cubic", []string{"x", "", "x2"}, []*Attribute{str("mode", "cubic")}, 13, `mode "cubic"`},
		{"antialias", []string{"x", "", "x2"}, append(linear("half_pixel"), &Attribute{Name: "antialias", Type: AttrInt, I: 1}), 18, "attribute antialias 1"},
		{"axes", []string{"x", "", "x2"}, append(linear("half_pixel"), &Attribute{Name: "axes", Type: AttrInts, Ints: []int64{1, 2}}), 18, "attribute axes [1 2]"},
		{"keep_aspect_ratio_policy", []string{"x", "", "", "s7x9"}, append(linear("half_pixel"), str("keep_aspect_ratio_policy", "not_larger")), 18, `attribute keep_aspect_ratio_policy "not_larger"`},
		{"scale 1.3", []string{"x", "", "x1.3"}, nearest, 13, "give a height of 5 × 1.3"},
		{"channel scale", []string{"x", "", "chan2"}, nearest, 13, "scale the channels"},
		{"channel size", []string{"x", "", "", "sc4"}, nearest, 13, "change the channels from 3 to 4"},
		{"scales and sizes", []string{"x", "", "x2", "s7x9"}, nearest, 13, "both scales and sizes are given"},
		{"no size", []string{"x", "", "empty"}, nearest, 13, "neither scales nor sizes is given"},
		{"pytorch_half_pixel to one row", []string{"x", "", "", "s1x9"}, linear("pytorch_half_pixel"), 13, "pytorch_half_pixel to an output of one row"},
		{"opset 10", []string{"x", "x2"}, []*Attribute{str("mode", "nearest")}, 10, "Resize of opset 10"},
		{"upsample linear", []string{"x", "x2"}, []*Attribute{str("mode", "linear")}, 9, `Upsample mode "linear"`},
	} {
		op := "Resize"
		if strings.HasPrefix(c.name, "upsample") {
			op = "Upsample"
		}
		m := graphModel([]int{3, 5, 4}, consts, "y", node(op, "rs", c.ins, []string{"y"}, c.attrs...))
		m.Opsets = []OpsetID{{Version: c.opset}}
		im, err := Import(m)
		if strings.Contains(c.want, " ") && !strings.Contains(c.want, "[3 ") {
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"rs"`) {
				t.Errorf("%s: error %v, want one naming node \"rs\" and saying %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(im.Layers) != 1 || im.Layers[0].Op != "resize" {
			t.Errorf("%s: layers %+v, want one resize layer", c.name, im.Layers)
			continue
		}
		var parts []string
		for _, f := range im.Layers[0].Fields {
			parts = append(parts, fmt.Sprintf("%s=%v", f.Name, f.Value))
		}
		got := strings.Join(append(parts, fmt.Sprint(im.Layers[0].OutShape)), " ")
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		if !slices.Equal(im.Layers[0].OutShape[:1], []int{3}) {
			t.Errorf("%s: channels %v", c.name, im.Layers[0].OutShape)
		}
	}
}
