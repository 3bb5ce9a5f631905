package cpu

import "math"

// LayerNormFwd normalises each of the rows of x [rows, cols] by its own
// mean and biased variance: y = gamma·(x − mean)/sqrt(var + eps) + beta,
// with gamma and beta [cols] (beta may be nil). Unlike batch normalisation
// the statistics are the sample's own, so training and inference compute
// alike. It saves each row's mean and 1/sqrt(var+eps) for the backward
// pass (either may be nil).
func LayerNormFwd(x, gamma, beta, y, saveMean, saveInvStd []float32, rows, cols int, eps float32) {
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			var s float64
			for _, v := range xr {
				s += float64(v)
			}
			mean := s / float64(cols)
			var ss float64
			for _, v := range xr {
				d := float64(v) - mean
				ss += d * d
			}
			inv := 1 / math.Sqrt(ss/float64(cols)+float64(eps))
			if saveMean != nil {
				saveMean[r] = float32(mean)
			}
			if saveInvStd != nil {
				saveInvStd[r] = float32(inv)
			}
			for j, v := range xr {
				o := (float64(v) - mean) * inv * float64(gamma[j])
				if beta != nil {
					o += float64(beta[j])
				}
				yr[j] = float32(o)
			}
		}
	})
}

// LayerNormBwd writes the gradients of LayerNormFwd from the saved
// statistics: with x̂ = (x − mean)·inv and g = dy·gamma,
// dx = inv·(g − mean(g) − x̂·mean(g·x̂)) per row, dgamma = Σ_rows dy·x̂ and
// dbeta = Σ_rows dy. dx and dbeta may be nil; dx may alias dy (the
// parameter gradients are summed before dx is written).
func LayerNormBwd(x, gamma, saveMean, saveInvStd, dy, dx, dgamma, dbeta []float32, rows, cols int) {
	ParallelFor(cols, max(1, 4096/max(rows, 1)), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			var sg, sb float64
			for r := 0; r < rows; r++ {
				g := float64(dy[r*cols+j])
				sg += g * (float64(x[r*cols+j]) - float64(saveMean[r])) * float64(saveInvStd[r])
				sb += g
			}
			if dgamma != nil {
				dgamma[j] = float32(sg)
			}
			if dbeta != nil {
				dbeta[j] = float32(sb)
			}
		}
	})
	if dx == nil {
		return
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, dyr, dxr := x[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
			mean, inv := float64(saveMean[r]), float64(saveInvStd[r])
			var s1, s2 float64
			for j, d := range dyr {
				g := float64(d) * float64(gamma[j])
				s1 += g
				s2 += g * (float64(xr[j]) - mean) * inv
			}
			s1 /= float64(cols)
			s2 /= float64(cols)
			for j, d := range dyr {
				g := float64(d) * float64(gamma[j])
				xh := (float64(xr[j]) - mean) * inv
				dxr[j] = float32(inv * (g - s1 - xh*s2))
			}
		}
	})
}
