package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBatchNormSumFwd: y = bn(x) + z, clamped at 0 with relu, matches
// BatchNormFwd and the sum taken apart, bit for bit, with z its own
// buffer and with z being y; the running statistics move alike.
func TestBatchNormSumFwd(t *testing.T) {
	const n, c, spatial = 3, 4, 5
	r := rand.New(rand.NewPCG(1, 2))
	vec := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = r.Float32()*4 - 2
		}
		return v
	}
	x, gamma, beta, z := vec(n*c*spatial), vec(c), vec(c), vec(n*c*spatial)
	rm, rv := vec(c), vec(c)
	for i := range rv {
		rv[i] += 3
	}
	for _, relu := range []bool{false, true} {
		want, wrm, wrv := make([]float32, len(x)), slices.Clone(rm), slices.Clone(rv)
		BatchNormFwd(x, gamma, beta, wrm, wrv, want, make([]float32, c), make([]float32, c), n, c, spatial, 1e-5, 0.1, true)
		clamped := 0
		for i := range want {
			if want[i] += z[i]; relu && want[i] < 0 {
				want[i] = 0
				clamped++
			}
		}
		if relu && (clamped == 0 || clamped == len(want)) {
			t.Fatalf("the ReLU clamped %d of %d values: the test's data does not exercise it", clamped, len(want))
		}
		for _, alias := range []bool{false, true} {
			y, zz, grm, grv := make([]float32, len(x)), slices.Clone(z), slices.Clone(rm), slices.Clone(rv)
			if alias {
				y = zz
			}
			BatchNormSumFwd(x, gamma, beta, grm, grv, zz, y, make([]float32, c), make([]float32, c), n, c, spatial, 1e-5, 0.1, true, relu)
			if !slices.Equal(y, want) || !slices.Equal(grm, wrm) || !slices.Equal(grv, wrv) {
				t.Errorf("relu %v, z is y %v: y %v\nwant %v (running statistics equal: %v %v)", relu, alias, y, want, slices.Equal(grm, wrm), slices.Equal(grv, wrv))
			}
		}
	}
}
