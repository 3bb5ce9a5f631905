package onnx

import "math"

// importResize imports Resize (opsets 11 to 19) and Upsample (opsets 7 to
// 9) of [channels, height, width] samples as mlbuild's resize, where the
// ONNX sampling is PyTorch's: mode nearest with
// coordinate_transformation_mode asymmetric and nearest_mode floor (what
// nn.Upsample(mode="nearest") exports), and mode linear with half_pixel,
// pytorch_half_pixel (align_corners=False) or align_corners. The output
// size comes from sizes, or from scales that give a whole size (the
// coordinates then agree: mlbuild samples by in/out, ONNX by 1/scale).
// Anything else is refused, naming the attribute or input.
func importResize(c *nodeCtx) (string, error) {
	x, err := c.runtime(0)
	if err != nil {
		return "", err
	}
	if len(x.shape) != 3 {
		return "", unsupported("", "%s of %s per sample: mlbuild resizes [channels, height, width] images only", c.n.OpType, shapeText(x.shape))
	}
	mode, err := c.resizeMode()
	if err != nil {
		return "", err
	}
	scales, sizes, err := c.resizeTargets()
	if err != nil {
		return "", err
	}
	l := c.newLayer("resize", nil)
	if mode != "nearest" {
		l.Fields = append(l.Fields, Field{"mode", "bilinear"})
	}
	if mode == "align_corners" {
		l.Fields = append(l.Fields, Field{"alignCorners", true})
	}
	out := [2]int{}
	switch {
	case sizes != nil:
		if sizes[0] != x.shape[0] {
			return "", unsupported("", "sizes %v change the channels from %d to %d; mlbuild resizes the height and width only", sizes, x.shape[0], sizes[0])
		}
		out = [2]int{sizes[1], sizes[2]}
		l.Fields = append(l.Fields, Field{"size", []int{out[0], out[1]}})
	default:
		if scales[0] != 1 {
			return "", unsupported("", "scales %v (channels, height, width) scale the channels; mlbuild resizes the height and width only", shortFloats(scales))
		}
		whole := true
		for i, s := range scales[1:] {
			o := float64(x.shape[i+1]) * s
			if o != math.Floor(o) || o < 1 || o > MaxElements {
				return "", unsupported("export with size= instead of scale_factor=, or a factor that gives a whole size",
					"scales %v (channels, height, width) give a %s of %d × %v = %.8g, not a whole size; mlbuild samples by input size over output size, which is ONNX's 1/scale only when the product is whole", shortFloats(scales), []string{"height", "width"}[i], x.shape[i+1], shortFloat(float32(s)), o)
			}
			out[i] = int(o)
			whole = whole && s >= 1 && s == math.Floor(s)
		}
		if whole {
			l.Fields = append(l.Fields, Field{"scale", pair([2]int{int(scales[1]), int(scales[2])})})
		} else {
			l.Fields = append(l.Fields, Field{"size", []int{out[0], out[1]}})
		}
	}
	if out[0] < 1 || out[1] < 1 || out[0] > MaxElements || out[1] > MaxElements {
		return "", unsupported("", "output size %d×%d", out[0], out[1])
	}
	if mode == "pytorch_half_pixel" && (out[0] == 1 || out[1] == 1) {
		return "", unsupported("", "coordinate_transformation_mode pytorch_half_pixel to an output of one row or column samples position 0, which mlbuild's bilinear resize (half-pixel centres, as PyTorch computes it) does not")
	}
	l.OutShape = []int{x.shape[0], out[0], out[1]}
	return c.emit(l, x)
}

// resizeMode reads the sampling attributes and returns "nearest",
// "half_pixel", "pytorch_half_pixel" or "align_corners" (the last three
// bilinear), or refuses them.
func (c *nodeCtx) resizeMode() (string, error) {
	mode, err := c.attrString("mode", "nearest")
	if err != nil {
		return "", err
	}
	if c.n.OpType == "Upsample" {
		// Upsample samples at x/scale: nearest takes the floor (PyTorch's
		// nearest), linear is asymmetric, which neither bilinear is.
		if mode != "nearest" {
			return "", unsupported("export with opset 11 or later (Resize)", "Upsample mode %q: Upsample interpolates at x/scale (asymmetric), which neither of mlbuild's bilinear resizes (half-pixel centres, aligned corners) does; only mode nearest imports", mode)
		}
		return "nearest", nil
	}
	if c.im.opset < 11 {
		return "", unsupported("export with opset 11 or later", "Resize of opset %d, whose sampling has no coordinate_transformation_mode to say it matches mlbuild's", c.im.opset)
	}
	for _, a := range []struct {
		name, want string
	}{{"keep_aspect_ratio_policy", "stretch"}} {
		if v, err := c.attrString(a.name, a.want); err != nil {
			return "", err
		} else if v != a.want {
			return "", unsupported("", "attribute %s %q; mlbuild resizes to the given size (%s)", a.name, v, a.want)
		}
	}
	if aa, err := c.attrInt("antialias", 0); err != nil {
		return "", err
	} else if aa != 0 {
		return "", unsupported("", "attribute antialias %d; mlbuild's resize does not filter before sampling", aa)
	}
	if axes, ok, err := c.attrInts("axes"); err != nil {
		return "", err
	} else if ok && !(len(axes) == 2 && (axes[0] == 2 || axes[0] == -2) && (axes[1] == 3 || axes[1] == -1)) {
		return "", unsupported("", "attribute axes %v; mlbuild resizes axes 2 and 3 (height and width) only", axes)
	}
	ctm, err := c.attrString("coordinate_transformation_mode", "half_pixel")
	if err != nil {
		return "", err
	}
	switch mode {
	case "nearest":
		nm, err := c.attrString("nearest_mode", "round_prefer_floor")
		if err != nil {
			return "", err
		}
		if ctm != "asymmetric" {
			return "", unsupported("export nn.Upsample(mode=\"nearest\") or F.interpolate(mode=\"nearest\")",
				"mode nearest with coordinate_transformation_mode %q; mlbuild's nearest is PyTorch's (coordinate_transformation_mode asymmetric, nearest_mode floor)", ctm)
		}
		if nm != "floor" {
			return "", unsupported("export nn.Upsample(mode=\"nearest\") or F.interpolate(mode=\"nearest\")",
				"nearest_mode %q; mlbuild's nearest is PyTorch's (coordinate_transformation_mode asymmetric, nearest_mode floor)", nm)
		}
		return "nearest", nil
	case "linear":
		switch ctm {
		case "half_pixel", "pytorch_half_pixel", "align_corners":
			return ctm, nil
		}
		return "", unsupported("export F.interpolate(mode=\"bilinear\") with align_corners False or True",
			"mode linear with coordinate_transformation_mode %q; mlbuild's bilinear resize samples at half-pixel centres (half_pixel, pytorch_half_pixel) or with aligned corners (align_corners)", ctm)
	}
	return "", unsupported("use mode nearest or linear (bilinear)", "mode %q; mlbuild resizes by nearest neighbour or bilinear interpolation", mode)
}

// resizeTargets reads the output size: sizes per sample (channels,
// height, width; the batch entry is the batch) or scales per sample, one
// of them nil.
func (c *nodeCtx) resizeTargets() (scales []float64, sizes []int, err error) {
	present := func(i int) bool {
		return c.has(i) && i < len(c.n.Inputs) && c.n.Inputs[i] != "" && (c.ins[i].konst == nil || c.ins[i].konst.size() > 0)
	}
	read := func(i int, what string) ([]float64, error) {
		k, err := c.konst(i, what)
		if err != nil {
			return nil, err
		}
		if k.size() != 4 {
			return nil, unsupported("", "%s has %d values; want 4 (batch, channels, height, width)", what, k.size())
		}
		for _, v := range k.vals {
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				return nil, unsupported("", "%s %v", what, k.vals)
			}
		}
		return k.vals, nil
	}
	if c.n.OpType == "Upsample" {
		var vals []float64
		if c.im.opset < 9 {
			a := c.n.Attr("scales")
			if a == nil || a.Type != AttrFloats || len(a.Floats) != 4 {
				return nil, nil, unsupported("", "attribute scales must hold 4 floats (batch, channels, height, width)")
			}
			for _, f := range a.Floats {
				vals = append(vals, float64(f))
			}
		} else if vals, err = read(1, "scales"); err != nil {
			return nil, nil, err
		}
		if vals[0] != 1 {
			return nil, nil, unsupported("", "scales %v scale the batch", vals)
		}
		return vals[1:], nil, nil
	}
	sc, sz := present(2), present(3)
	switch {
	case sc && sz:
		return nil, nil, unsupported("", "both scales and sizes are given; ONNX allows one")
	case sz:
		vals, err := read(3, "sizes")
		if err != nil {
			return nil, nil, err
		}
		for _, v := range vals[1:] {
			if v != math.Floor(v) || v > MaxElements {
				return nil, nil, unsupported("", "sizes %v", vals)
			}
		}
		return nil, []int{int(vals[1]), int(vals[2]), int(vals[3])}, nil
	case sc:
		vals, err := read(2, "scales")
		if err != nil {
			return nil, nil, err
		}
		if vals[0] != 1 {
			return nil, nil, unsupported("", "scales %v scale the batch", vals)
		}
		return vals[1:], nil, nil
	}
	return nil, nil, unsupported("", "neither scales nor sizes is given: %s needs one", c.n.OpType)
}

// shortFloats is shortFloat of each float32 value of vs, for messages.
func shortFloats(vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = shortFloat(float32(v))
	}
	return out
}
