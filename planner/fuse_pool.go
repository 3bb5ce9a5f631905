package planner

import (
	"fmt"
	"strings"
)

// fusePool folds a max pool into the convolution that produces its input,
// where the target's chosen method can pool in its epilogue: the
// convolution computes each pool window's outputs in registers and writes
// only their maximum, so its full-size output (4× the pooled one for 2×2
// windows) never goes to memory and the pool's pass over it is gone. In a
// training plan the convolution also writes each window's argmax, and the
// pool's backward routes dy through it instead of searching the
// full-size output again (models/mnist.cue on an H100: the first layer's
// 25 MB output written, read by the pool and read again by the pool's
// backward). The convolution's backward must then need no full-size
// output: its activation's derivative is applied by the pool's backward
// (fuse_act_bwd.go) or it has none.
//
// Before: Forward is fused (fuse_epilogue.go, fuse_elementwise.go), every
// convolution has its method (choose_methods.go: the target's rule is
// asked about the method that will run), and a training plan's Backward
// is differentiated with fuseActBwd run. After, when t.PoolEpilogue is
// set (and, for a training plan, t.PoolArgmax): every conv2d step without
// a pool whose output is read by exactly one forward step, a maxpool2d,
// and by nothing else in the forward pass (not the plan's output, not a
// view), whose target accepts (its geometry, its method, the pool's
// geometry), and, in a training plan, whose output no backward or update
// step reads but the pool's maxpool2d_bwd (as its x) and the
// convolution's conv2d_bwd (as its y, with ActApplied or no Act), writes
// the pool's output itself, with Attr.Pool holding the pool's geometry
// and the pool appended to Fused; the pool step and the convolution's
// full-size output buffer are gone. In a training plan the conv2d step
// has a third output, "<pool>.argmax" (scratch shaped like the pool's
// output), the pool's backward step is a maxpool2d_argmax_bwd reading
// (argmax, the pool's output, dy) with the same Attr, and the conv2d_bwd
// reads no y (NoBuf). Average pools stay steps of their own. Params keep
// their buffers and IDs; the other steps are unchanged.
func fusePool(p *Plan, t Target) {
	if t.PoolEpilogue == nil || p.Training && !t.PoolArgmax {
		return
	}
	fused := make([]bool, len(p.Forward))
	for i := range p.Forward {
		s := &p.Forward[i]
		if fused[i] || s.Kernel != KConv2D || s.Attr.Pool != nil || s.Attr.Conv == nil || len(s.Out) != 2 {
			continue
		}
		y := s.Out[0]
		j, ok := onlyForwardReader(p, y)
		if !ok {
			continue
		}
		r := &p.Forward[j]
		if r.Kernel != KMaxPool2D || r.Attr.Conv == nil || !t.PoolEpilogue(*s.Attr.Conv, s.Attr.Method, *r.Attr.Conv) {
			continue
		}
		yp := r.Out[0]
		poolBwd, convBwd := -1, -1
		if p.Training {
			if poolBwd, convBwd, ok = pooledBackward(p, s, y, yp); !ok {
				continue
			}
		}
		pool := *r.Attr.Conv
		s.Attr.Pool = &pool
		s.Out[0] = yp
		s.Fused = append(fusedNames(s), r.Layer)
		fused[j] = true
		r.In = nil // dead now: later searches must not count its read
		note := ""
		if p.Training {
			argmax := p.addBuffer(p.freeName(r.Layer+".argmax"), KindScratch, p.shapeOf(yp))
			s.Out = append(s.Out, argmax)
			if poolBwd >= 0 {
				b := &p.Backward[poolBwd]
				b.Kernel = KMaxPool2DArgmaxBwd
				b.In = []BufID{argmax, yp, b.In[2]}
			}
			if convBwd >= 0 {
				p.Backward[convBwd].In[2] = NoBuf
			}
			note = fmt.Sprintf(" writing each window's argmax; %s backward -> maxpool2d_argmax_bwd", r.Layer)
		}
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s -> conv2d (max pool %dx%d stride %d epilogue, %s)%s",
			strings.Join(s.Fused, " + "), pool.KH, pool.KW, pool.SH, s.Attr.Method, note))
	}
	p.dropForward(fused)
}

// onlyForwardReader returns the index of the only forward step that reads
// buffer id, once, provided that id owns its storage, is not the plan's
// output and no view shares its storage. Other phases are not looked at.
func onlyForwardReader(p *Plan, id BufID) (int, bool) {
	if p.Buffers[id].AliasOf != NoBuf || p.root(p.Output) == id {
		return 0, false
	}
	for _, b := range p.Buffers {
		if b.AliasOf == id {
			return 0, false
		}
	}
	reader, uses := -1, 0
	for i, s := range p.Forward {
		for _, in := range s.In {
			if in == id {
				reader, uses = i, uses+1
			}
		}
	}
	return reader, uses == 1
}

// pooledBackward finds the backward steps that read conv's output y in a
// training plan: the max pool's backward (index, or -1), which reads y as
// its x and the pool's output yp as its y, and conv's own backward (or
// -1), which reads y as its y and needs it for nothing (its Act's
// derivative applied by the pool or no Act). ok is false when any other
// step reads y, or those steps read it otherwise.
func pooledBackward(p *Plan, conv *Step, y, yp BufID) (poolBwd, convBwd int, ok bool) {
	poolBwd, convBwd = -1, -1
	for i := range p.Backward {
		s := &p.Backward[i]
		if !reads(s, y) {
			continue
		}
		uses := 0
		for _, in := range s.In {
			if in == y {
				uses++
			}
		}
		switch {
		case uses == 1 && poolBwd < 0 && s.Kernel == KMaxPool2DBwd && len(s.In) == 3 && s.In[0] == y && s.In[1] == yp &&
			(s.Attr.Act == "" || s.Attr.Act == conv.Attr.Act):
			poolBwd = i
		case uses == 1 && convBwd < 0 && s.Kernel == KConv2DBwd && len(s.In) == 5 && s.In[2] == y &&
			s.In[0] == conv.In[0] && s.In[1] == conv.In[1] && (s.Attr.ActApplied || s.Attr.Act == ""):
			convBwd = i
		default:
			return -1, -1, false
		}
	}
	for i := range p.Update {
		if reads(&p.Update[i], y) {
			return -1, -1, false
		}
	}
	return poolBwd, convBwd, true
}

// freeName returns name, or name with a counter when a buffer has it.
func (p *Plan) freeName(name string) string {
	taken := map[string]bool{}
	for _, b := range p.Buffers {
		taken[b.Name] = true
	}
	n := name
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s.%d", name, i)
	}
	return n
}
