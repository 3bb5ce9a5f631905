package spec

import (
	"fmt"
	"math"
	"math/bits"
)

// The size bounds of a spec (the schema's #MaxCount and #MaxFLOPs; a test
// keeps the two in step). The schema checks them layer by layer as CUE
// evaluates; CheckLimits checks them again on the decoded Model, with the
// model totals CUE does not add up. Together they keep every count that
// mlbuild shapes, the planner and a produced program compute exact in
// 64-bit integers.
const (
	// MaxCount bounds every count: a dimension, a tensor's elements (per
	// sample and at the batch), a layer's parameters, the model's
	// parameters and the batch size. 2^40 float32 elements are 4 TiB.
	MaxCount int64 = 1 << 40
	// MaxFLOPs bounds forward FLOPs: one layer's per sample, one layer's
	// at the batch, and the model's at the batch. A training step does a
	// small multiple of its forward FLOPs, so its total stays below 2^63.
	MaxFLOPs int64 = 1 << 56
)

// BytesPerElement is the size of one element of the only dtype, f32.
const BytesPerElement = 4

// MulCount returns a·b for non-negative counts, and whether the product is
// exact; on overflow (or a negative operand) it returns math.MaxInt64 and
// false, so that a caller that only prints the result never prints a
// negative or wrapped-around count.
func MulCount(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return math.MaxInt64, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64, false
	}
	return int64(lo), true
}

// AddCount returns a+b for non-negative counts, and whether the sum is
// exact; like MulCount it saturates at math.MaxInt64.
func AddCount(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return math.MaxInt64, false
	}
	return a + b, true
}

// ShapeCount returns the number of elements of a shape, and whether that
// count is exact (no dimension negative and the product below 2^63).
func ShapeCount(shape []int) (int64, bool) {
	n, exact := int64(1), true
	for _, d := range shape {
		var ok bool
		n, ok = MulCount(n, int64(d))
		exact = exact && ok
	}
	return n, exact
}

// FormatBytes prints a byte count with a binary unit, e.g. "4.00 TiB".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<60:
		return fmt.Sprintf("%.2f EiB", float64(n)/(1<<60))
	case n >= 1<<50:
		return fmt.Sprintf("%.2f PiB", float64(n)/(1<<50))
	case n >= 1<<40:
		return fmt.Sprintf("%.2f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// elementsText describes n elements with their bytes as f32, or "more than
// 2^63 elements" when n is saturated.
func elementsText(n int64, exact bool) string {
	if !exact {
		return "more than 2^63 elements"
	}
	bytes, ok := MulCount(n, BytesPerElement)
	if !ok {
		return fmt.Sprintf("%d elements (more than 2^63 bytes as f32)", n)
	}
	return fmt.Sprintf("%d elements (%d bytes, %s as f32)", n, bytes, FormatBytes(bytes))
}

// CheckLimits checks m against the size bounds at its training batch size:
// see CheckLimitsAt.
func CheckLimits(m *Model) error {
	return CheckLimitsAt(m, m.Training.BatchSize)
}

// CheckLimitsAt checks that every count mlbuild computes for m at batch
// size batch is within MaxCount or MaxFLOPs: each node's output elements
// per sample and at the batch, its parameters and forward FLOPs, and the
// model's total parameters and forward FLOPs at the batch. A violation is
// reported at the node where the count is made (for a total, the node at
// which it passes the bound), naming the count and its bytes. The planner
// calls it with the batch it plans for, which a command line may set apart
// from the spec's. The result is an Errors value or nil.
func CheckLimitsAt(m *Model, batch int) error {
	var es Errors
	add := func(n *Node, format string, args ...any) {
		es = append(es, Error{Pos: n.Pos, Layer: n.Name, Message: fmt.Sprintf(format, args...)})
	}
	if batch < 1 || int64(batch) > MaxCount {
		at := Pos{File: m.File, Line: 1, Col: 1}
		if len(m.Nodes) > 0 {
			at = m.Nodes[0].Pos
		}
		return Errors{{Pos: at, Message: fmt.Sprintf("batch size %d is outside 1..%d (2^40)", batch, MaxCount)}}
	}
	b := int64(batch)
	var params, flops int64
	paramsOver, flopsOver := false, false
	// A batch too large for one layer is usually too large for the layers
	// after it: the first is reported, with how many more there are.
	batchFirst, batchMore := -1, 0 // index in es, and how many more
	atBatch := func(n *Node, format string, args ...any) {
		if batchFirst >= 0 {
			batchMore++
			return
		}
		add(n, format, args...)
		batchFirst = len(es) - 1
	}
	for i := range m.Nodes {
		n := &m.Nodes[i]
		numel, exact := ShapeCount(n.OutShape)
		batched, bexact := MulCount(numel, b)
		switch {
		case !exact || numel > MaxCount:
			add(n, "the output %s holds %s per sample, more than the %d (2^40) mlbuild allows in one tensor", shapeText(n.OutShape), elementsText(numel, exact), MaxCount)
			continue // its parameters and FLOPs are not meaningful
		case !bexact || batched > MaxCount:
			atBatch(n, "at batch %d the output %s holds %s, more than the %d (2^40) mlbuild allows in one tensor; lower the batch size or shrink this layer", batch, shapeText(n.OutShape), elementsText(batched, bexact), MaxCount)
		case batched > math.MaxInt:
			add(n, "at batch %d the output %s holds %s, more than this mlbuild (built with %d-bit integers) can plan", batch, shapeText(n.OutShape), elementsText(batched, bexact), bits.UintSize)
		}
		p, pexact := n.paramsChecked()
		if !pexact || p > MaxCount {
			add(n, "%s are more than the %d (2^40) parameters mlbuild allows in one layer", countText(p, pexact, "parameters"), MaxCount)
		} else if sum, ok := AddCount(params, p); !paramsOver && (!ok || sum > MaxCount) {
			paramsOver = true
			add(n, "with this layer's %d parameters the model has more than %d (2^40), the most mlbuild allows", p, MaxCount)
		} else {
			params = sum
		}
		f, fexact := n.forwardFLOPsChecked()
		fb, fbexact := MulCount(f, b)
		switch {
		case !fexact || f > MaxFLOPs:
			add(n, "%s per sample are more than the %d (2^56) mlbuild counts for one layer", countText(f, fexact, "forward FLOPs"), MaxFLOPs)
		case !fbexact || fb > MaxFLOPs:
			atBatch(n, "at batch %d the forward pass takes %s, more than the %d (2^56) mlbuild counts for one layer; lower the batch size or shrink this layer", batch, countText(fb, fbexact, "FLOPs"), MaxFLOPs)
		default:
			if sum, ok := AddCount(flops, fb); !flopsOver && (!ok || sum > MaxFLOPs) {
				flopsOver = true
				atBatch(n, "with this layer's %d FLOPs the model's forward pass at batch %d takes more than %d (2^56), the most mlbuild counts; lower the batch size or shrink the model", fb, batch, MaxFLOPs)
			} else {
				flops = sum
			}
		}
	}
	if batchMore > 0 {
		es[batchFirst].Message += fmt.Sprintf(" (and %d more counts past a bound at this batch, in this or later layers)", batchMore)
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

// countText is "N what", or "more than 2^63 what" for a saturated count.
func countText(n int64, exact bool, what string) string {
	if !exact {
		return "more than 2^63 " + what
	}
	return fmt.Sprintf("%d %s", n, what)
}

// shapeText formats a per-sample shape as messages do, 64×3×3.
func shapeText(s []int) string {
	if len(s) == 0 {
		return "[]"
	}
	t := ""
	for i, d := range s {
		if i > 0 {
			t += "×"
		}
		t += fmt.Sprint(d)
	}
	return t
}
