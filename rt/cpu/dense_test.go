package cpu

import (
	"fmt"
	"testing"
)

func TestGemmFwdMatchesNaive(t *testing.T) {
	r := newTestRand(1)
	for _, sz := range [][3]int{{1, 1, 1}, {7, 13, 5}, {33, 17, 9}} {
		batch, in, out := sz[0], sz[1], sz[2]
		for _, a := range allActs {
			for _, withBias := range []bool{false, true} {
				x, w := randSlice(r, batch*in, 1), randSlice(r, out*in, 1)
				var b []float32
				if withBias {
					b = randSlice(r, out, 1)
				}
				y := make([]float32, batch*out)
				GemmFwd(x, w, b, y, batch, in, out, a.act, 0.1)
				want := make([]float32, batch*out)
				for i := 0; i < batch; i++ {
					for j := 0; j < out; j++ {
						var s float64
						for k := 0; k < in; k++ {
							s += float64(x[i*in+k]) * float64(w[j*in+k])
						}
						if b != nil {
							s += float64(b[j])
						}
						want[i*out+j] = float32(actRef(s, a.act, 0.1))
					}
				}
				if msg := closeTo(y, want, 1e-5); msg != "" {
					t.Errorf("GemmFwd %v act %s bias %v: %s", sz, a.name, withBias, msg)
				}
			}
		}
	}
}

func TestGemmBwdFiniteDifferences(t *testing.T) {
	r := newTestRand(2)
	batch, in, out := 5, 7, 3
	for _, a := range allActs {
		for _, withBias := range []bool{false, true} {
			name := fmt.Sprintf("gemm act %s bias %v", a.name, withBias)
			x, w := randSlice(r, batch*in, 1), randSlice(r, out*in, 1)
			var b, db []float32
			if withBias {
				b, db = randSlice(r, out, 1), make([]float32, out)
			}
			y := make([]float32, batch*out)
			fwd := func() []float32 { GemmFwd(x, w, b, y, batch, in, out, a.act, 0.1); return y }
			proj := randSlice(r, batch*out, 1)
			fwd()
			dy := cloneF(proj)
			dx, dw := make([]float32, len(x)), make([]float32, len(w))
			GemmBwd(x, w, y, dy, dx, dw, db, batch, in, out, a.act, 0.1)
			inputs := []gradInput{{"x", x, dx}, {"w", w, dw}}
			if withBias {
				inputs = append(inputs, gradInput{"b", b, db})
			}
			check := smoothCheck
			if a.kinky {
				check = kinkyCheck
			}
			check.run(t, name, proj, fwd, inputs...)
			// dx and db are optional: nil must leave dw unchanged.
			dw2 := make([]float32, len(w))
			y2 := make([]float32, len(y))
			GemmFwd(x, w, b, y2, batch, in, out, a.act, 0.1)
			GemmBwd(x, w, y2, cloneF(proj), nil, dw2, nil, batch, in, out, a.act, 0.1)
			if msg := closeTo(dw2, dw, 1e-6); msg != "" {
				t.Errorf("%s: dw without dx/db differs: %s", name, msg)
			}
		}
	}
}

func TestAddAliasing(t *testing.T) {
	r := newTestRand(3)
	a, b := randSlice(r, 1000, 1), randSlice(r, 1000, 1)
	want := make([]float32, len(a))
	for i := range a {
		want[i] = a[i] + b[i]
	}
	Add(a, b, a)
	if msg := closeTo(a, want, 0); msg != "" {
		t.Errorf("Add(a, b, a): %s", msg)
	}
}
