package planner

// chooseMethods records, on every conv2d and conv2d_bwd step, how the
// backend will compute it (Attr.Method), so that `mlbuild plan` shows the
// choice and the cache key covers it.
//
// Before: the plan is lowered and, when training, differentiated (whether
// a conv2d_bwd computes dx is final). After: every convolution step has a
// non-empty Method; nothing else changed.
func chooseMethods(p *Plan, method func(g ConvGeom, backward, needDx bool) string) {
	for _, ph := range []Phase{p.Forward, p.Backward} {
		for i := range ph {
			s := &ph[i]
			switch s.Kernel {
			case KConv2D:
				s.Attr.Method = method(*s.Attr.Conv, false, false)
			case KConv2DBwd:
				needDx := len(s.Out) > 0 && s.Out[0] != NoBuf
				s.Attr.Method = method(*s.Attr.Conv, true, needDx)
			}
		}
	}
}
