package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// The shape rules of the convolutions, and the window rule they share with
// the pools (checkShapes in verify.go dispatches to them).

// conv checks a conv2d or conv2d_bwd step against its geometry, with an
// epilogue pool's output and argmax.
func (r shapeRules) conv(s *Step) error {
	in, out := s.In, s.Out
	g := s.Attr.Conv
	if g == nil {
		return fmt.Errorf("no convolution geometry")
	}
	if err := checkWindow(g, true); err != nil {
		return err
	}
	if err := checkAct(s.Attr); err != nil {
		return err
	}
	x := []int{g.N, g.C, g.H, g.W}
	w := []int{g.OC, g.C / g.Groups, g.KH, g.KW}
	y := []int{g.N, g.OC, g.OH, g.OW}
	wKinds := []BufKind{KindParam}
	if s.Kernel == KConv2D && !r.p.Training {
		wKinds = append(wKinds, KindFolded) // a batch norm folded in (fold_batchnorm.go)
	}
	common := first(r.is("x", in[0], x), r.is("W", in[1], w), r.kindIs(in[1], wKinds...))
	if s.Kernel == KConv2D {
		if pg := s.Attr.Pool; pg != nil {
			if err := checkWindow(pg, false); err != nil {
				return fmt.Errorf("epilogue pool: %w", err)
			}
			if pg.N != g.N || pg.C != g.OC || pg.H != g.OH || pg.W != g.OW {
				return fmt.Errorf("epilogue pool reads [%d,%d,%d,%d], the convolution writes %s", pg.N, pg.C, pg.H, pg.W, shapeString(y))
			}
			y = []int{g.N, g.OC, pg.OH, pg.OW}
		}
		argmax := NoBuf
		if len(out) > 2 {
			argmax = out[2]
		}
		return first(common, r.is("b", in[2], []int{g.OC}), r.is("y", out[0], y), r.kindIs(out[1], KindScratch),
			r.is("argmax", argmax, y), r.kindIs(argmax, KindScratch))
	}
	if in[2] == NoBuf && s.Attr.Act != "" && !s.Attr.ActApplied {
		return fmt.Errorf("no y, but the step applies %s's derivative", s.Attr.Act)
	}
	return first(common, r.is("y", in[2], y), r.is("dy", in[3], y), r.kindIs(in[4], KindScratch),
		r.is("dx", out[0], x), r.is("dW", out[1], w), r.is("db", out[2], []int{g.OC}))
}

// checkWindow checks the output size of a convolution or pooling window:
// OH = (H + 2·PH − DH·(KH−1) − 1) / SH + 1, rounded down, or for a max
// pool with Ceil rounded up less a last window starting past the input
// (spec.WindowOutSize); likewise OW.
func checkWindow(g *ConvGeom, conv bool) error {
	if g.N < 1 || g.C < 1 || g.KH < 1 || g.KW < 1 || g.SH < 1 || g.SW < 1 || g.DH < 1 || g.DW < 1 || g.Groups < 1 || g.PH < 0 || g.PW < 0 {
		return fmt.Errorf("geometry %+v has a non-positive size, stride, dilation or group count", *g)
	}
	if conv && (g.C%g.Groups != 0 || g.OC%g.Groups != 0) {
		return fmt.Errorf("%d input and %d output channels do not split into %d groups", g.C, g.OC, g.Groups)
	}
	if !conv && g.OC != g.C {
		return fmt.Errorf("pooling changes the channels from %d to %d", g.C, g.OC)
	}
	if conv && g.Ceil {
		return fmt.Errorf("a convolution cannot round its output size up (Ceil)")
	}
	oh := spec.WindowOutSize(g.H, g.KH, g.SH, g.PH, g.DH, g.Ceil)
	ow := spec.WindowOutSize(g.W, g.KW, g.SW, g.PW, g.DW, g.Ceil)
	if oh != g.OH || ow != g.OW || oh < 1 || ow < 1 {
		return fmt.Errorf("output %dx%d, but the window rule gives %dx%d", g.OH, g.OW, oh, ow)
	}
	return nil
}
