package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestFuseAttentionLayoutGPT: models/gpt.cue's training plan for a target
// with fused attention has no transpose step left in any phase (the
// heads' four a layer forward and their backwards), each attention and
// attention_bwd step reads token-major q, k and v [B, T, H, hd] (the
// projections' outputs seen as heads) with Perm [0 2 1 3] and writes o
// (and dq, dk, dv) in that layout, and no buffer of split heads
// [B, H, T, hd] or [B, H, hd, T] is left; the inference plan keeps its
// transposes (4 a layer) and attention over [B, H, T, hd].
func TestFuseAttentionLayoutGPT(t *testing.T) {
	m, err := spec.Load("../models/gpt.cue")
	if err != nil {
		t.Fatal(err)
	}
	const b, h, tt, hd, layers = 64, 6, 256, 64, 6
	tokenMajor := []int{b, tt, h, hd}
	train := mustBuild(t, m, Options{Training: true, Fusion: true, Target: attentionTarget})
	for _, ph := range []Phase{train.Forward, train.Backward} {
		if n := countKernel(ph, KTranspose); n != 0 {
			t.Errorf("training: %d transpose steps left", n)
		}
	}
	n := 0
	for _, ph := range []Phase{train.Forward, train.Backward} {
		for _, s := range ph {
			if s.Kernel != KAttention && s.Kernel != KAttentionBwd {
				continue
			}
			n++
			if !equalShapes(s.Attr.Perm, []int{0, 2, 1, 3}) {
				t.Errorf("%s %s: Perm %v, want [0 2 1 3]", s.Kernel, s.Layer, s.Attr.Perm)
			}
			ids := append(append([]BufID{}, s.In[:3]...), s.Out[0])
			if s.Kernel == KAttentionBwd {
				ids = append(ids, s.In[3], s.In[5], s.Out[1], s.Out[2])
			}
			for _, id := range ids {
				if id != NoBuf && !equalShapes(train.shapeOf(id), tokenMajor) {
					t.Errorf("%s %s: %s is %v, want %v", s.Kernel, s.Layer, train.Buffers[id].Name, train.shapeOf(id), tokenMajor)
				}
			}
		}
	}
	if n != 2*layers {
		t.Errorf("training: %d attention and attention_bwd steps, want %d", n, 2*layers)
	}
	for _, buf := range train.Buffers {
		if equalShapes(buf.Shape, []int{b, h, tt, hd}) || equalShapes(buf.Shape, []int{b, h, hd, tt}) {
			t.Errorf("training: buffer %s %v: heads split, want none", buf.Name, buf.Shape)
		}
	}
	infer := mustBuild(t, m, Options{Training: false, Fusion: true, Target: attentionTarget})
	if n := countKernel(infer.Forward, KTranspose); n != 4*layers {
		t.Errorf("inference: %d transpose steps, want %d", n, 4*layers)
	}
	for _, s := range infer.Forward {
		if s.Kernel == KAttention && s.Attr.Perm != nil {
			t.Errorf("inference: %s: Perm %v, want none", s.Layer, s.Attr.Perm)
		}
	}
}
