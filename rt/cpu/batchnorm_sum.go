package cpu

// BatchNormSumFwd is BatchNormFwd followed by a residual sum that the
// planner fused into it (fuse_norm_sum.go): y = bn(x) + z, then, with
// relu, max(y, 0) as BinaryReLUFwd clamps. z has x's shape and may be y.
func BatchNormSumFwd(x, gamma, beta, runMean, runVar, z, y, saveMean, saveInvStd []float32, n, c, spatial int, eps, momentum float32, training, relu bool) {
	bn := y
	if len(z) > 0 && len(y) > 0 && &z[0] == &y[0] {
		bn = make([]float32, len(y)) // z is y: keep it until it is added
	}
	BatchNormFwd(x, gamma, beta, runMean, runVar, bn, saveMean, saveInvStd, n, c, spatial, eps, momentum, training)
	ParallelFor(len(y), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := bn[i] + z[i]
			if relu && v < 0 {
				v = 0
			}
			y[i] = v
		}
	})
}
