package cpu

import "math"

// BatchNormFwd normalises x [n,c,spatial] per channel c. In training it
// uses the batch's mean and biased variance, saves the mean and 1/sqrt(var+eps)
// for the backward pass, and moves the running statistics by momentum
// (running var taking the unbiased variance, as PyTorch does). In evaluation
// it uses the running statistics (and saves those). y = gamma·x̂ + beta.
func BatchNormFwd(x, gamma, beta, runMean, runVar, y, saveMean, saveInvStd []float32, n, c, spatial int, eps, momentum float32, training bool) {
	count := n * spatial
	ParallelFor(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			var mean, invStd float64
			if training {
				var s float64
				for i := 0; i < n; i++ {
					for _, v := range x[(i*c+ch)*spatial : (i*c+ch+1)*spatial] {
						s += float64(v)
					}
				}
				mean = s / float64(count)
				var ss float64
				for i := 0; i < n; i++ {
					for _, v := range x[(i*c+ch)*spatial : (i*c+ch+1)*spatial] {
						d := float64(v) - mean
						ss += d * d
					}
				}
				variance := ss / float64(count)
				invStd = 1 / math.Sqrt(variance+float64(eps))
				unbiased := variance
				if count > 1 {
					unbiased = ss / float64(count-1)
				}
				m := float64(momentum)
				runMean[ch] = float32((1-m)*float64(runMean[ch]) + m*mean)
				runVar[ch] = float32((1-m)*float64(runVar[ch]) + m*unbiased)
			} else {
				mean = float64(runMean[ch])
				invStd = 1 / math.Sqrt(float64(runVar[ch])+float64(eps))
			}
			if saveMean != nil {
				saveMean[ch] = float32(mean)
			}
			if saveInvStd != nil {
				saveInvStd[ch] = float32(invStd)
			}
			scale := float32(invStd)
			if gamma != nil {
				scale *= gamma[ch]
			}
			shift := -float32(mean) * scale
			if beta != nil {
				shift += beta[ch]
			}
			for i := 0; i < n; i++ {
				off := (i*c + ch) * spatial
				yr := y[off : off+spatial]
				for j, v := range x[off : off+spatial] {
					yr[j] = v*scale + shift
				}
			}
		}
	})
}

// BatchNormBwd is the backward pass of training-mode BatchNormFwd, from the
// saved batch statistics: dbeta = Σ dy, dgamma = Σ dy·x̂ and
// dx = gamma·invStd·(dy - dbeta/m - x̂·dgamma/m) with m = n·spatial.
// dx, dgamma and dbeta may each be nil.
func BatchNormBwd(x, gamma, saveMean, saveInvStd, dy, dx, dgamma, dbeta []float32, n, c, spatial int) {
	count := float64(n * spatial)
	ParallelFor(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			mean, invStd := saveMean[ch], float64(saveInvStd[ch])
			var sdy, sdyx float64
			for i := 0; i < n; i++ {
				off := (i*c + ch) * spatial
				xr := x[off : off+spatial]
				for j, d := range dy[off : off+spatial] {
					sdy += float64(d)
					sdyx += float64(d) * float64(xr[j]-mean)
				}
			}
			sdyx *= invStd // Σ dy·x̂
			if dbeta != nil {
				dbeta[ch] = float32(sdy)
			}
			if dgamma != nil {
				dgamma[ch] = float32(sdyx)
			}
			if dx == nil {
				continue
			}
			g := 1.0
			if gamma != nil {
				g = float64(gamma[ch])
			}
			k := float32(g * invStd)
			a := float32(sdy / count)
			b := float32(sdyx / count * invStd)
			for i := 0; i < n; i++ {
				off := (i*c + ch) * spatial
				xr := x[off : off+spatial]
				dxr := dx[off : off+spatial]
				for j, d := range dy[off : off+spatial] {
					dxr[j] = k * (d - a - (xr[j]-mean)*b)
				}
			}
		}
	})
}

// FoldBatchNorm folds an evaluation-mode batch norm into the convolution
// or dense layer before it: w holds oc filters of len(w)/oc weights each
// (output channel first), b their bias (nil: none). It writes
// wOut = w·scale per filter and bOut = b·scale + shift, with scale and
// shift computed as BatchNormFwd computes them from the running
// statistics, so that the layer with wOut and bOut gives BatchNormFwd's
// output of the layer's, up to float32 rounding.
func FoldBatchNorm(w, b, gamma, beta, runMean, runVar, wOut, bOut []float32, oc int, eps float32) {
	per := len(w) / oc
	ParallelFor(oc, max(1, 4096/max(per, 1)), func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			scale := float32(1 / math.Sqrt(float64(runVar[ch])+float64(eps)))
			if gamma != nil {
				scale *= gamma[ch]
			}
			shift := -runMean[ch] * scale
			if beta != nil {
				shift += beta[ch]
			}
			bias := float32(0)
			if b != nil {
				bias = b[ch]
			}
			bOut[ch] = bias*scale + shift
			dst := wOut[ch*per : (ch+1)*per]
			for i, v := range w[ch*per : (ch+1)*per] {
				dst[i] = v * scale
			}
		}
	})
}
