package cpu

// A dense layer on one row (batch-1 inference) is a matrix-vector product.
// Sgemm would pack the whole weight matrix into panels on every call to
// use each weight once; here each output is one dot product over a
// contiguous row of w ([out,in], PyTorch's layout), so no weight is copied.

// gemvMaxBatch is the largest batch GemmFwd runs as dot products rather
// than through Sgemm: beyond a couple of rows, Sgemm's packing of w is
// shared by enough rows to pay for itself.
const gemvMaxBatch = 2

// dotUseVector lets tests force the pure-Go dot product on a machine with
// AVX2.
var dotUseVector = true

// dot returns Σ x[i]·y[i] over len(x) elements.
func dot(x, y []float32) float32 {
	y = y[:len(x)]
	var s float32
	done := 0
	if dotVectorSupported && dotUseVector {
		s, done = dotVector(x, y)
	}
	return s + dotGo(x[done:], y[done:])
}

// dotGo is the pure-Go dot product, with four accumulators so the adds do
// not wait on each other.
func dotGo(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// gemvFwd is GemmFwd for a batch of at most a few rows: y[r,j] =
// act(x[r]·w[j] + b[j]), outputs split over threads in pieces of at least
// about 16k multiply-adds (64 KB of w: a GPT decode's 384×384 layer goes
// to up to 10 threads, where 32k gave it 5 of 16). Each output is one dot
// product summed by one thread in dot's order, so y is the same bit for
// bit for any number of threads.
func gemvFwd(x, w, b, y []float32, batch, in, out int, act Act, alpha float32) {
	grain := max(1, (16<<10)/max(1, in))
	if Threads() == 1 || out <= grain {
		// no closure: a decode's step on one thread allocates nothing
		gemvRows(x, w, b, y, batch, in, out, act, alpha, 0, out)
		return
	}
	ParallelFor(out, grain, func(lo, hi int) {
		gemvRows(x, w, b, y, batch, in, out, act, alpha, lo, hi)
	})
}

// GemvF32 is GemmFwd at batch 1 for a language model's decode: gemvFwd's
// products, split over the decode team (team.go; parts of at least
// teamPartBytes of w, one part on the caller alone) rather than through
// ParallelFor, with the same bits for any number of threads. Only the
// programs that generate link the team.
func GemvF32(x, w, b, y []float32, in, out int, act Act, alpha float32) {
	x, w, y = x[:in], w[:in*out], y[:out]
	if t, ok := teamLock(); ok {
		if parts := t.rowParts(out, 4*in); parts > 1 {
			t.gemv = gemvJob{x: x, w: w, b: b, y: y, in: in, out: out, act: act, alpha: alpha}
			t.run(&t.gemv, parts)
			return
		}
		t.alone()
		gemvRows(x, w, b, y, 1, in, out, act, alpha, 0, out)
		return
	}
	gemvFwd(x, w, b, y, 1, in, out, act, alpha)
}

// gemvRows is gemvFwd's work for outputs lo ≤ j < hi.
func gemvRows(x, w, b, y []float32, batch, in, out int, act Act, alpha float32, lo, hi int) {
	for r := 0; r < batch; r++ {
		xr, yr := x[r*in:(r+1)*in], y[r*out:(r+1)*out]
		dotRows(xr, w[lo*in:], in, yr[lo:hi])
		if b != nil {
			for j := lo; j < hi; j++ {
				yr[j] += b[j]
			}
		}
		applyAct(yr[lo:hi], act, alpha)
	}
}

// zero is +0 in a variable, so that v + zero is computed, not folded.
var zero float32

// dotRows writes y[i] = dot(x, w[i·ldw:i·ldw+len(x)]) for i < len(y), bit
// for bit, four rows at a time where the four-row kernel runs (it loads
// each piece of x once for the four: the rows' streaming is then the only
// traffic).
func dotRows(x, w []float32, ldw int, y []float32) {
	in := len(x)
	i := 0
	if dotVectorSupported && dotUseVector {
		var s [4]float32
		for ; i+4 <= len(y); i += 4 {
			n := dot4Vector(x, w[i*ldw:], ldw, &s)
			if n == 0 {
				break
			}
			if n == in { // no tail: dot adds dotGo's +0 (a -0 sum becomes +0)
				for r, v := range s {
					y[i+r] = v + zero
				}
				continue
			}
			for r, v := range s {
				row := w[(i+r)*ldw : (i+r)*ldw+in]
				y[i+r] = v + dotGo(x[n:], row[n:])
			}
		}
	}
	for ; i < len(y); i++ {
		y[i] = dot(x, w[i*ldw:i*ldw+in])
	}
}
