package planner

import "fmt"

// fuseActBwd folds a convolution's activation derivative into the max
// pool backward that computes its dy, where the target allows it
// (Target.PoolBwdAct): the pool's backward already reads x, the
// activation's output, at every value it routes, so it multiplies dy by
// the derivative there instead of the convolution's backward making a
// pass of its own over dy and y (models/mnist.cue on an H100: 12 µs a
// step for the second layer, and y's 25 MB read in the first layer's
// weight gradient).
//
// Before: Backward is differentiated. After: every maxpool2d_bwd step
// whose x is the output of a conv2d step with a fused activation, and
// whose dx is that convolution's dy (the pool is the output's only
// reader) written by no other step and read by the conv2d_bwd alone,
// has the activation in Attr.Act and Attr.Alpha, and that conv2d_bwd has
// Attr.ActApplied. Buffers, IDs and the order of steps are unchanged.
func fuseActBwd(p *Plan, t Target) {
	if !t.PoolBwdAct {
		return
	}
	for i := range p.Backward {
		pool := &p.Backward[i]
		if pool.Kernel != KMaxPool2DBwd || pool.Attr.Act != "" || len(pool.In) != 3 || len(pool.Out) != 1 {
			continue
		}
		x, dx := pool.In[0], pool.Out[0]
		if dx == NoBuf || p.Buffers[dx].AliasOf != NoBuf || p.Buffers[x].AliasOf != NoBuf {
			continue
		}
		fwd := forwardWriter(p, x)
		if fwd == nil || fwd.Kernel != KConv2D || fwd.Attr.Act == "" {
			continue
		}
		conv := -1
		ok := true
		for j := range p.Backward {
			s := &p.Backward[j]
			if j != i && writes(s, dx) {
				ok = false
			}
			if j != i && reads(s, dx) {
				if s.Kernel == KConv2DBwd && len(s.In) > 3 && s.In[2] == x && s.In[3] == dx && conv < 0 {
					conv = j
				} else {
					ok = false
				}
			}
		}
		if !ok || conv < 0 || p.Backward[conv].Attr.Act != fwd.Attr.Act {
			continue
		}
		pool.Attr.Act, pool.Attr.Alpha = fwd.Attr.Act, fwd.Attr.Alpha
		p.Backward[conv].Attr.ActApplied = true
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s backward + %s's %s derivative -> maxpool2d_bwd (the convolution's backward applies none)",
			pool.Layer, fwd.Layer, fwd.Attr.Act))
	}
}

// forwardWriter returns the forward step that writes id, or nil.
func forwardWriter(p *Plan, id BufID) *Step {
	for i := range p.Forward {
		if writes(&p.Forward[i], id) {
			return &p.Forward[i]
		}
	}
	return nil
}

func writes(s *Step, id BufID) bool {
	for _, o := range s.Out {
		if o == id {
			return true
		}
	}
	return false
}

func reads(s *Step, id BufID) bool {
	for _, in := range s.In {
		if in == id {
			return true
		}
	}
	return false
}
