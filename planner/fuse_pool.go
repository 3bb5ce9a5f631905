package planner

import (
	"fmt"
	"strings"
)

// fusePool folds a max pool into the convolution that produces its input,
// in inference plans, where the target's chosen method can pool in its
// epilogue: the convolution computes each pool window's outputs in
// registers and writes only their maximum, so its full-size output (4×
// the pooled one for 2×2 windows) never goes to memory and the pool's
// pass over it is gone. A training plan keeps both steps: the backward
// of the convolution and of the pool read the unpooled output.
//
// Before: Forward is fused (fuse_epilogue.go, fuse_elementwise.go) and
// every convolution has its method (choose_methods.go: the target's rule
// is asked about the method that will run). After, when the plan is for
// inference and t.PoolEpilogue is set: every conv2d step without a pool
// whose output is read by exactly one step, a maxpool2d, and by nothing
// else (not the plan's output, not a view), and whose target accepts
// (its geometry, its method, the pool's geometry), writes the pool's
// output itself, with Attr.Pool holding the pool's geometry and the pool
// appended to Fused; the pool step and the convolution's full-size output
// buffer are gone. Average pools stay steps of their own. Params keep
// their buffers and IDs; the other steps are unchanged.
func fusePool(p *Plan, t Target) {
	if p.Training || t.PoolEpilogue == nil {
		return
	}
	fused := make([]bool, len(p.Forward))
	for i := range p.Forward {
		s := &p.Forward[i]
		if fused[i] || s.Kernel != KConv2D || s.Attr.Pool != nil || s.Attr.Conv == nil {
			continue
		}
		j, ok := soleForwardReader(p, s.Out[0])
		if !ok {
			continue
		}
		r := &p.Forward[j]
		if r.Kernel != KMaxPool2D || r.Attr.Conv == nil || !t.PoolEpilogue(*s.Attr.Conv, s.Attr.Method, *r.Attr.Conv) {
			continue
		}
		pool := *r.Attr.Conv
		s.Attr.Pool = &pool
		s.Out[0] = r.Out[0]
		s.Fused = append(fusedNames(s), r.Layer)
		fused[j] = true
		r.In = nil // dead now: later searches must not count its read
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s -> conv2d (max pool %dx%d stride %d epilogue, %s)",
			strings.Join(s.Fused, " + "), pool.KH, pool.KW, pool.SH, s.Attr.Method))
	}
	var kept Phase
	for i, s := range p.Forward {
		if !fused[i] {
			kept = append(kept, s)
		}
	}
	p.Forward = kept
	p.removeUnused()
}
