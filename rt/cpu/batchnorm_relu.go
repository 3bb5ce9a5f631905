package cpu

// A ReLU fused into the batch norm before it (the planner's
// fuse_norm_act.go) keeps a value where (x − mean)·scale > −beta, with
// scale = gamma·invStd in float32 and the saved mean and invStd. The rule
// has no sum that could become a fused multiply-add, so the GPU kernels'
// forward and backward, and these references, agree on every element.

// BatchNormReLUKeeps reports whether the fused ReLU keeps x in channel ch.
func BatchNormReLUKeeps(x, mean, invStd, gamma, beta float32) bool {
	return (x-mean)*(gamma*invStd) > -beta
}

// BatchNormReLUFwd is BatchNormFwd followed by the fused ReLU: in
// training, y is 0 wherever BatchNormReLUKeeps does not keep x (from the
// saved statistics, which must not be nil); in evaluation, where no
// backward follows, y = max(y, 0).
func BatchNormReLUFwd(x, gamma, beta, runMean, runVar, y, saveMean, saveInvStd []float32, n, c, spatial int, eps, momentum float32, training bool) {
	BatchNormFwd(x, gamma, beta, runMean, runVar, y, saveMean, saveInvStd, n, c, spatial, eps, momentum, training)
	ParallelFor(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			for i := 0; i < n; i++ {
				off := (i*c + ch) * spatial
				yr := y[off : off+spatial]
				for j, v := range x[off : off+spatial] {
					if training && !BatchNormReLUKeeps(v, saveMean[ch], saveInvStd[ch], gamma[ch], beta[ch]) || !training && yr[j] < 0 {
						yr[j] = 0
					}
				}
			}
		}
	})
}

// BatchNormReLUBwd is BatchNormBwd of a batch norm with a fused ReLU: dy is
// the ReLU's output's gradient, which counts only where
// BatchNormReLUKeeps keeps x. dy is not changed; dx may be dy.
func BatchNormReLUBwd(x, gamma, beta, saveMean, saveInvStd, dy, dx, dgamma, dbeta []float32, n, c, spatial int) {
	masked := make([]float32, len(dy))
	ParallelFor(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			for i := 0; i < n; i++ {
				off := (i*c + ch) * spatial
				for j, v := range x[off : off+spatial] {
					if BatchNormReLUKeeps(v, saveMean[ch], saveInvStd[ch], gamma[ch], beta[ch]) {
						masked[off+j] = dy[off+j]
					}
				}
			}
		}
	})
	BatchNormBwd(x, gamma, saveMean, saveInvStd, masked, dx, dgamma, dbeta, n, c, spatial)
}
