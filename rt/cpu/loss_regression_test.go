package cpu

import (
	"math"
	"testing"
)

// TestRegressionLossesAgainstFormulaAndFiniteDifferences checks MAE and
// Huber (with residuals on both sides of delta) against their formulas and
// their gradients against finite differences.
func TestRegressionLossesAgainstFormulaAndFiniteDifferences(t *testing.T) {
	r := newTestRand(31)
	n := 17
	pred, target := randSlice(r, n, 3), randSlice(r, n, 3)
	const delta = 0.8
	var wantMAE, wantHuber float64
	below := 0
	for i := range pred {
		e := math.Abs(float64(pred[i]) - float64(target[i]))
		wantMAE += e / float64(n)
		if e <= delta {
			wantHuber += 0.5 * e * e / float64(n)
			below++
		} else {
			wantHuber += delta * (e - delta/2) / float64(n)
		}
	}
	if below == 0 || below == n {
		t.Fatalf("%d of %d residuals within delta: the test must cover both pieces", below, n)
	}
	dMAE := make([]float32, n)
	if got := MAE(pred, target, dMAE, n); math.Abs(float64(got)-wantMAE) > 1e-6*math.Max(1, wantMAE) {
		t.Errorf("MAE = %.7g, want %.7g", got, wantMAE)
	}
	dHuber := make([]float32, n)
	if got := Huber(pred, target, dHuber, n, delta); math.Abs(float64(got)-wantHuber) > 1e-6*math.Max(1, wantHuber) {
		t.Errorf("Huber = %.7g, want %.7g", got, wantHuber)
	}
	kinkyCheck.run(t, "mae", []float32{1}, func() []float32 { return []float32{MAE(pred, target, nil, n)} }, gradInput{"pred", pred, dMAE})
	kinkyCheck.run(t, "huber", []float32{1}, func() []float32 { return []float32{Huber(pred, target, nil, n, delta)} }, gradInput{"pred", pred, dHuber})
	// Equal prediction and target: no gradient, as PyTorch's L1Loss.
	d := []float32{5}
	MAE([]float32{1}, []float32{1}, d, 1)
	if d[0] != 0 {
		t.Errorf("MAE gradient at a zero residual = %v, want 0", d[0])
	}
}
