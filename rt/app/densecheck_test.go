package app

import (
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// TestDenseCheck: the selftest's dense check passes each precision against
// its own rounding, on the benchmark MLP's shapes and a small one, and
// fails float32 products checked as bf16 ones and bf16 products checked
// as float32 ones: it sees whether the operands were rounded.
func TestDenseCheck(t *testing.T) {
	same := func(v float32) float32 { return v }
	for _, s := range [][3]int{{250, 784, 512}, {250, 256, 10}, {20, 3, 5}} {
		for _, c := range []struct {
			p     *cpu.Precision
			round func(float32) float32
			pass  bool
		}{{cpu.BF16, cpu.RoundBF16, true}, {cpu.FP32, same, true}, {cpu.FP32, cpu.RoundBF16, false}, {cpu.BF16, same, false}} {
			r := DenseCheck("fc", c.p, c.round, s[0], s[1], s[2])
			t.Logf("%s: error %.3g, tolerance %.3g", r.Name, r.MaxError, r.Tol)
			if (r.MaxError <= r.Tol) != c.pass {
				t.Errorf("%s (rounding as bf16: %v): error %.3g, tolerance %.3g; want pass %v", r.Name, c.round(1.001) != 1.001, r.MaxError, r.Tol, c.pass)
			}
		}
	}
}
