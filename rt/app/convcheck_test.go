package app

import (
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// TestConvCheck: the selftest row passes every CPU convolution method on
// models/mnist.cue's second layer and fails a kernel that is off by a
// little in one output.
func TestConvCheck(t *testing.T) {
	g := cpu.Conv{N: 250, C: 32, H: 14, W: 14, OC: 64, OH: 14, OW: 14, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1}
	for name, fwd := range map[string]func(x, w, b, y []float32, g cpu.Conv, act cpu.Act, alpha float32){
		"winograd": cpu.Conv2DWinogradFwd, "winograd F4": cpu.Conv2DWinogradF4Fwd, "direct": cpu.Conv2DDirectFwd, "im2col": cpu.Conv2DIm2colFwd,
	} {
		if r := ConvCheck(name, fwd, g); !(r.MaxError <= r.Tol) || r.Err != nil {
			t.Errorf("%s: %+v, want a pass", name, r)
		}
	}
	off := func(x, w, b, y []float32, g cpu.Conv, act cpu.Act, alpha float32) {
		cpu.Conv2DWinogradFwd(x, w, b, y, g, act, alpha)
		y[777] += 1e-3 * (1 + y[777])
	}
	if r := ConvCheck("off", off, g); r.MaxError <= r.Tol {
		t.Errorf("a kernel off by 1e-3 in one output passes: %+v", r)
	}
}

// TestConvBwdCheck: the backward selftest row passes every CPU method on
// models/mnist.cue's second layer and fails a dw that is off in one
// element.
func TestConvBwdCheck(t *testing.T) {
	g := cpu.Conv{N: 250, C: 32, H: 14, W: 14, OC: 64, OH: 14, OW: 14, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1}
	for name, bwd := range map[string]func(x, w, y, dy, dx, dw, db []float32, g cpu.Conv, act cpu.Act, alpha float32){
		"winograd": cpu.Conv2DWinogradBwd, "winograd F4": cpu.Conv2DWinogradF4Bwd, "direct": cpu.Conv2DDirectBwd, "im2col": cpu.Conv2DIm2colBwd,
	} {
		if r := ConvBwdCheck(name, bwd, g); !(r.MaxError <= r.Tol) || r.Err != nil {
			t.Errorf("%s: %+v, want a pass", name, r)
		}
	}
	off := func(x, w, y, dy, dx, dw, db []float32, g cpu.Conv, act cpu.Act, alpha float32) {
		cpu.Conv2DWinogradBwd(x, w, y, dy, dx, dw, db, g, act, alpha)
		dw[100] += 1e-2 * (1 + dw[100])
	}
	if r := ConvBwdCheck("off", off, g); r.MaxError <= r.Tol {
		t.Errorf("a dw off by 1e-2 in one element passes: %+v", r)
	}
}
