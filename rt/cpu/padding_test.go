package cpu

import (
	"math"
	"testing"
)

// TestSoftmaxPaddedHandMade: padding masks on scores worked out by hand.
// Two samples of one head, three queries and three keys; sample 0's key 2
// and sample 1's key 0 are padding. Scores ln 1, ln 3, ln 2 along each row
// give the unmasked keys probabilities in ratio 1 : 3 : 2.
func TestSoftmaxPaddedHandMade(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	row := []float32{ln(1), ln(3), ln(2)}
	var x []float32
	for range 6 {
		x = append(x, row...)
	}
	ids := []float32{4, 5, 9, 9, 0, 1} // pad id 9
	cases := []struct {
		causal bool
		want   []float64
	}{
		{false, []float64{
			1. / 4, 3. / 4, 0, 1. / 4, 3. / 4, 0, 1. / 4, 3. / 4, 0,
			0, 3. / 5, 2. / 5, 0, 3. / 5, 2. / 5, 0, 3. / 5, 2. / 5}},
		// query i sees keys 0..i; sample 1's query 0 sees only padding
		{true, []float64{
			1, 0, 0, 1. / 4, 3. / 4, 0, 1. / 4, 3. / 4, 0,
			0, 0, 0, 0, 1, 0, 0, 3. / 5, 2. / 5}},
	}
	for _, c := range cases {
		y := make([]float32, len(x))
		for i := range y {
			y[i] = float32(math.NaN()) // every element must be written
		}
		SoftmaxPaddedFwd(x, y, ids, 2, 3, 3, c.causal, 9)
		for i, w := range c.want {
			if math.Abs(float64(y[i])-w) > 1e-6 {
				t.Errorf("causal %v: y[%d] = %g, want %g", c.causal, i, y[i], w)
			}
		}
		// the backward is SoftmaxBwd: no gradient reaches a masked key
		dy := make([]float32, len(x))
		for i := range dy {
			dy[i] = float32(i%5) - 2
		}
		dx := make([]float32, len(x))
		SoftmaxBwd(y, dy, dx, 6, 3, 1)
		for i, w := range c.want {
			if w == 0 && dx[i] != 0 {
				t.Errorf("causal %v: dx[%d] = %g at a masked key, want 0", c.causal, i, dx[i])
			}
		}
	}
}
