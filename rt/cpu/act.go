package cpu

import "math"

// Act is the activation fused into the epilogue of a dense or convolution
// kernel. Its derivative is computed from the activation's output y, so the
// backward kernel needs no copy of the pre-activation.
type Act uint8

// Fused activations. ActLeakyReLU uses the kernel's alpha as its negative
// slope and must have alpha > 0 for the derivative from y to be well defined.
// ActReLU6 is min(max(x, 0), 6), MobileNet's activation (UReLU6's bits):
// its derivative from y is 1 where 0 < y < 6 and 0 elsewhere. ActSiLU is
// x·sigmoid(x), EfficientNet's activation (USiLU's bits), the one
// exception: its derivative needs x, so it is fused in inference only
// and actBackward panics on it.
const (
	ActNone Act = iota
	ActReLU
	ActLeakyReLU
	ActSigmoid
	ActTanh
	ActReLU6
	ActSiLU
)

// epilogueKernels are the vector forms of the passes around a product:
// bias and ReLU over rows, ReLU's derivative, and column sums. Each gives
// the Go loop's results bit for bit (same operations, same order).
type epilogueKernels struct {
	// biasAct adds bias (when flags&1) to each of rows rows of cols
	// contiguous floats, then applies ReLU (when flags&2).
	biasAct func(y, bias *float32, rows, cols, flags int)
	// reluBwd clears dy[i] where y[i] is +0, for i < n.
	reluBwd func(y, dy *float32, n int)
	// sumRows writes dst[j] = Σ_r m[r·ld+j] for j < cols, in row order.
	sumRows func(m, dst *float32, rows, cols, ld int)
	// clamp writes y[i] = min(max(x[i], lo), hi), NaN kept, for i < n
	// (for i < n − n mod clampTail when clampTail is not 0: the caller
	// does the rest). y may alias x.
	clamp     func(x, y *float32, n int, lo, hi float32)
	clampTail int
	// rowBiasAct, when set, is rowBiasActGo's loop (its flags: 1 adds
	// bias, 2 applies ReLU) over rows of cols floats, ld apart: the
	// pointwise method's epilogue, one call a block of its output; for
	// each row's first cols − cols mod rowBiasActTail floats when
	// rowBiasActTail is not 0 (the caller does the rest).
	rowBiasAct     func(y, bias *float32, rows, cols, ld, flags int, lo, hi float32)
	rowBiasActTail int
	// gelu and geluBwd are geluFwd's and geluBwd's loops over n elements
	// (gelu.go), or nil where the Go loops run.
	gelu    func(x, y *float32, n int)
	geluBwd func(x, dy, dx *float32, n int)
	// expShift is expShift's loop over n elements (exp.go), or nil.
	expShift func(x, y *float32, n int, m float32)
	// expShiftSum is expShift's loop returning Σ y (expShiftSum), or nil.
	expShiftSum func(x, y *float32, n int, m float32) float32
	// sigmoid, tanh, silu and siluBwd are sigmoidFwd's, tanhFwd's,
	// siluFwd's and siluBwd's loops over n elements (sigmoid.go), or nil;
	// sigmoid and silu over n − n mod sigmoidTail when sigmoidTail is not
	// 0 (the caller does the rest).
	sigmoid     func(x, y *float32, n int)
	sigmoidTail int
	tanh        func(x, y *float32, n int)
	silu        func(x, y *float32, n int)
	siluBwd     func(x, dy, dx *float32, n int)
	// dropout is dropoutMask's loop over n elements (dropout.go), or nil.
	dropout func(x, y, mask *float32, n int, base, seed, step uint32, rate, keep float32)
}

// epilogue returns the epilogue kernels of the active GEMM path, or nil
// where the Go loops run, so that forcing a path in tests forces them too.
func epilogue() *epilogueKernels { return archEpilogue(activeGemmPath.Load().name) }

// biasActRows adds b (when not nil) to each of the rows of y ([rows,cols])
// and applies act: the epilogue of a dense layer's product.
func biasActRows(y, b []float32, rows, cols int, act Act, alpha float32) {
	y = y[:rows*cols]
	if k := epilogue(); k != nil && (act == ActNone || act == ActReLU) && len(y) > 0 {
		flags := 0
		if b != nil {
			_ = b[cols-1] // the assembly does no bounds checks
			flags |= 1
		}
		if act == ActReLU {
			flags |= 2
		}
		if flags != 0 {
			var bp *float32
			if b != nil {
				bp = &b[0]
			}
			k.biasAct(&y[0], bp, rows, cols, flags)
		}
		return
	}
	for r := 0; r < rows; r++ {
		row := y[r*cols : (r+1)*cols]
		if b != nil {
			for j := range row {
				row[j] += b[j]
			}
		}
		applyAct(row, act, alpha)
	}
}

// rowBiasActFlags says whether rowBiasAct's kernel applies act itself,
// with which flags and clamp bounds; the other activations follow it as
// applyAct.
func rowBiasActFlags(act Act) (flags int, lo, hi float32, ok bool) {
	inf := float32(math.Inf(1))
	switch act {
	case ActNone:
		return 0, -inf, inf, true
	case ActReLU:
		return 2, -inf, inf, true
	case ActReLU6:
		return 0, 0, 6, true
	}
	return 0, -inf, inf, false
}

// rowBiasAct adds b[r] (when b is not nil) to the cols floats of each row
// r < rows of y, ld floats apart, and applies act: the epilogue of one
// block of a product whose bias runs along its rows (a convolution's
// output channels). It gives applyAct's bits for ActReLU and ActReLU6.
func rowBiasAct(y, b []float32, rows, cols, ld int, act Act, alpha float32) {
	if rows <= 0 || cols <= 0 {
		return
	}
	y = y[:(rows-1)*ld+cols]
	flags, lo, hi, ok := rowBiasActFlags(act)
	if b != nil {
		b = b[:rows] // the assembly does no bounds checks
		flags |= 1
	}
	done := 0
	if k := epilogue(); k != nil && k.rowBiasAct != nil {
		done = cols
		if k.rowBiasActTail > 0 {
			done -= cols % k.rowBiasActTail
		}
		if done > 0 {
			var bp *float32
			if b != nil {
				bp = &b[0]
			}
			k.rowBiasAct(&y[0], bp, rows, done, ld, flags, lo, hi)
		}
	}
	if done < cols {
		rowBiasActGo(y[done:], b, rows, cols-done, ld, flags, lo, hi)
	}
	if !ok {
		for r := 0; r < rows; r++ {
			applyAct(y[r*ld:r*ld+cols], act, alpha)
		}
	}
}

// rowBiasActGo is rowBiasAct's loop: y += b[r] when flags&1, ReLU (the
// bits of values with the sign bit set cleared) when flags&2, then
// min(hi, max(lo, y)) with NaN kept.
func rowBiasActGo(y, b []float32, rows, cols, ld, flags int, lo, hi float32) {
	for r := 0; r < rows; r++ {
		row := y[r*ld : r*ld+cols]
		for j, v := range row {
			if flags&1 != 0 {
				v += b[r]
			}
			if flags&2 != 0 {
				bits := math.Float32bits(v)
				v = math.Float32frombits(bits &^ uint32(int32(bits)>>31))
			}
			if v < lo {
				v = lo
			}
			if v > hi {
				v = hi
			}
			row[j] = v
		}
	}
}

// applyAct applies act in place to v.
func applyAct(v []float32, act Act, alpha float32) {
	if k := epilogue(); k != nil && act == ActReLU && len(v) > 0 {
		k.biasAct(&v[0], nil, 1, len(v), 2)
		return
	}
	switch act {
	case ActReLU:
		// Branch-free: clear the bits of negative values (sign bit set),
		// since their signs are as unpredictable as the data.
		for i, x := range v {
			b := math.Float32bits(x)
			v[i] = math.Float32frombits(b &^ uint32(int32(b)>>31))
		}
	case ActLeakyReLU:
		for i, x := range v {
			if x < 0 {
				v[i] = alpha * x
			}
		}
	case ActSigmoid:
		sigmoidFwd(v, v)
	case ActTanh:
		tanhFwd(v, v)
	case ActReLU6:
		clampFloat32(v, v, 0, 6)
	case ActSiLU:
		siluFwd(v, v)
	}
}

// actBackward multiplies dy in place by the derivative of act, taken from
// the activation's output y.
func actBackward(y, dy []float32, act Act, alpha float32) {
	dy = dy[:len(y)]
	if k := epilogue(); k != nil && act == ActReLU && len(y) > 0 {
		k.reluBwd(&y[0], &dy[0], len(y))
		return
	}
	switch act {
	case ActReLU:
		// y is +0 or positive: keep dy where y's bits are non-zero, without
		// a branch (b-1 is negative as an int32 only for b = 0).
		for i, v := range y {
			b := math.Float32bits(v)
			dy[i] = math.Float32frombits(math.Float32bits(dy[i]) &^ uint32(int32(b-1)>>31))
		}
	case ActLeakyReLU:
		for i, v := range y {
			if v <= 0 {
				dy[i] *= alpha
			}
		}
	case ActSigmoid:
		for i, v := range y {
			dy[i] *= v * (1 - v)
		}
	case ActTanh:
		for i, v := range y {
			dy[i] *= 1 - v*v
		}
	case ActSiLU:
		panic("cpu: ActSiLU's derivative needs the pre-activation; the planner fuses it in inference plans only")
	case ActReLU6:
		for i, v := range y {
			var d float32 // dy·0 keeps UnaryBwdFromOutput's −0 and NaN
			if v > 0 && v < 6 {
				d = 1
			}
			dy[i] *= d
		}
	}
}

// ActBwd multiplies dy in place by the derivative of act, taken from the
// activation's output y: a max pool backward that applies its input's
// activation derivative (planner's fuse_act_bwd.go) is MaxPool2DBwd, then
// ActBwd with the pool's x.
func ActBwd(y, dy []float32, act Act, alpha float32) { actBackward(y, dy, act, alpha) }
