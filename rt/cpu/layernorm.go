package cpu

import "math"

// LayerNormFwd normalises each of the rows of x [rows, cols] by its own
// mean and biased variance: y = gamma·(x − mean)/sqrt(var + eps) + beta,
// with gamma and beta [cols] (beta may be nil). Unlike batch normalisation
// the statistics are the sample's own, so training and inference compute
// alike. It saves each row's mean and 1/sqrt(var+eps) for the backward
// pass (either may be nil).
func LayerNormFwd(x, gamma, beta, y, saveMean, saveInvStd []float32, rows, cols int, eps float32) {
	path := activeGemmPath.Load().name
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			mean := sum64(xr) / float64(cols)
			inv := 1 / math.Sqrt(sumSquares64(xr, mean)/float64(cols)+float64(eps))
			if saveMean != nil {
				saveMean[r] = float32(mean)
			}
			if saveInvStd != nil {
				saveInvStd[r] = float32(inv)
			}
			gamma := gamma[:len(xr)]
			done := lnYVector(path, xr, gamma, beta, yr, mean, inv)
			if beta == nil {
				for j := done; j < len(xr); j++ {
					yr[j] = float32((float64(xr[j]) - mean) * inv * float64(gamma[j]))
				}
				continue
			}
			beta := beta[:len(xr)]
			for j := done; j < len(xr); j++ {
				yr[j] = float32((float64(xr[j])-mean)*inv*float64(gamma[j]) + float64(beta[j]))
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
	layerNormBwd(x, gamma, saveMean, saveInvStd, dy, dx, dgamma, dbeta, rows, cols, false)
}

// LayerNormBwdAdd is LayerNormBwd adding dx to what dx holds (dx +=,
// each element rounded to float32 once, after its sum): a layer norm
// backward that adds into a gradient sum (planner.Attr.AccumulateDx), in
// a CPU plan and as a GPU plan's CPU reference. dx may not alias dy.
func LayerNormBwdAdd(x, gamma, saveMean, saveInvStd, dy, dx, dgamma, dbeta []float32, rows, cols int) {
	layerNormBwd(x, gamma, saveMean, saveInvStd, dy, dx, dgamma, dbeta, rows, cols, true)
}

// layerNormBwd is LayerNormBwd, or LayerNormBwdAdd when add is set.
func layerNormBwd(x, gamma, saveMean, saveInvStd, dy, dx, dgamma, dbeta []float32, rows, cols int, add bool) {
	// Blocks of columns, each summed over the rows in order (so a column's
	// sum does not depend on the threads), a row of the block at a time.
	const colBlock = 64
	path := activeGemmPath.Load().name
	ParallelFor((cols+colBlock-1)/colBlock, max(1, 64<<10/max(rows*colBlock, 1)), func(lo, hi int) {
		var sg, sb [colBlock]float64
		for b := lo; b < hi; b++ {
			j0, j1 := b*colBlock, min((b+1)*colBlock, cols)
			w := j1 - j0
			clear(sg[:w])
			clear(sb[:w])
			rowsGo := rows
			if w == colBlock && lnGammaVector(path, x[j0:], dy[j0:], cols, rows, saveMean, saveInvStd, &sg, &sb) {
				rowsGo = 0
			}
			for r := 0; r < rowsGo; r++ {
				mean, inv := float64(saveMean[r]), float64(saveInvStd[r])
				dyr, xr := dy[r*cols+j0:r*cols+j1], x[r*cols+j0:r*cols+j1]
				sg, sb := sg[:len(dyr)], sb[:len(dyr)]
				for j, d := range dyr {
					g := float64(d)
					sg[j] += g * (float64(xr[j]) - mean) * inv
					sb[j] += g
				}
			}
			if dgamma != nil {
				for j := range w {
					dgamma[j0+j] = float32(sg[j])
				}
			}
			if dbeta != nil {
				for j := range w {
					dbeta[j0+j] = float32(sb[j])
				}
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
			gamma := gamma[:len(dyr)]
			xr, dxr = xr[:len(dyr)], dxr[:len(dyr)]
			// Two partial sums each, even and odd columns.
			var s1, s2, t1, t2 float64
			j := 0
			for ; j+2 <= len(dyr); j += 2 {
				g0, g1 := float64(dyr[j])*float64(gamma[j]), float64(dyr[j+1])*float64(gamma[j+1])
				s1 += g0
				t1 += g1
				s2 += g0 * (float64(xr[j]) - mean) * inv
				t2 += g1 * (float64(xr[j+1]) - mean) * inv
			}
			if j < len(dyr) {
				g := float64(dyr[j]) * float64(gamma[j])
				s1 += g
				s2 += g * (float64(xr[j]) - mean) * inv
			}
			s1 = (s1 + t1) / float64(cols)
			s2 = (s2 + t2) / float64(cols)
			done := lnDxVector(path, xr, dyr, gamma, dxr, mean, inv, s1, s2, add)
			for j := done; j < len(dyr); j++ {
				d := dyr[j]
				g := float64(d) * float64(gamma[j])
				xh := (float64(xr[j]) - mean) * inv
				if add {
					dxr[j] = float32(float64(dxr[j]) + inv*(g-s1-xh*s2))
				} else {
					dxr[j] = float32(inv * (g - s1 - xh*s2))
				}
			}
		}
	})
}

// sumSquares64 returns Σ (x−mean)² in float64, in four interleaved partial
// sums like sum64.
func sumSquares64(x []float32, mean float64) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		d0, d1, d2, d3 := float64(x[i])-mean, float64(x[i+1])-mean, float64(x[i+2])-mean, float64(x[i+3])-mean
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(x); i++ {
		d := float64(x[i]) - mean
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}
