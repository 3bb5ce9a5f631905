package planner

import "testing"

// TestChooseLossRows: for a target with LossRows, the softmax_xent step of
// a classifier gets a scratch of B rows and that of a token model one of
// B·T, as its third output; without LossRows (the CPU) the step keeps two
// outputs, and an inference plan has no loss to give one to.
func TestChooseLossRows(t *testing.T) {
	gpu := CPU
	gpu.LossRows = true
	for _, c := range []struct {
		name string
		p    *Plan
		rows int // 0: no loss rows
	}{
		{"mlp, LossRows", mustBuild(t, mlp(), Options{Training: true, Target: gpu}), mlp().Training.BatchSize},
		{"mlp, CPU", mustBuild(t, mlp(), Options{Training: true}), 0},
		{"tokens, LossRows", mustBuild(t, tokens(), Options{Training: true, Target: gpu}), -1},
	} {
		steps := stepsOf(c.p, KSoftmaxXent)
		if len(steps) != 1 {
			t.Fatalf("%s: %d softmax_xent steps, want 1", c.name, len(steps))
		}
		s := steps[0]
		if c.rows == 0 {
			if len(s.Out) != 2 {
				t.Errorf("%s: outputs %v, want the loss and dlogits alone", c.name, s.Out)
			}
			continue
		}
		z := c.p.shapeOf(s.In[0])
		want := z[0]
		if c.rows < 0 { // [B, T, C]
			if len(z) != 3 {
				t.Fatalf("%s: logits %v, want [B, T, C]", c.name, z)
			}
			want = z[0] * z[1]
		} else if want != c.rows {
			t.Errorf("%s: logits %v, want a batch of %d", c.name, z, c.rows)
		}
		if len(s.Out) != 3 {
			t.Fatalf("%s: outputs %v, want a third, the loss rows", c.name, s.Out)
		}
		b := c.p.Buffers[s.Out[2]]
		if b.Kind != KindScratch || b.Size != want || b.Name != s.Layer+".loss_rows" {
			t.Errorf("%s: the loss rows are %s %q of %d, want scratch %q of %d", c.name, b.Kind, b.Name, b.Size, s.Layer+".loss_rows", want)
		}
	}
}
