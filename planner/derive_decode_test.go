package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestDeriveDecodeGPT: the small GPT's batch-1 plan becomes a plan of
// rows: one attend_cached per block (its matmuls, scale, softmax and
// transposes gone) with a key and a value cache [T,H,hd] each, the
// embedding reading the new position, every other step on [1,1,...] or
// [1,...] rows, and the tail (after the last attention) ending in the
// logits row [1,1,V].
func TestDeriveDecodeGPT(t *testing.T) {
	m, err := spec.Load("../testdata/text/gpt_moby.cue")
	if err != nil {
		t.Fatal(err)
	}
	p := mustBuild(t, m, Options{Batch: 1, Fusion: true, Target: CPU})
	d, err := DeriveDecode(p)
	if err != nil {
		t.Fatalf("DeriveDecode: %v", err)
	}
	q := d.Plan
	if d.Context != 32 || len(d.Caches) != 4 {
		t.Errorf("context %d, %d caches; want 32 and 4 (k and v of 2 blocks)", d.Context, len(d.Caches))
	}
	for _, c := range d.Caches {
		if s := q.Buffers[c].Shape; len(s) != 3 || s[0] != 32 || s[1] != 2 || s[2] != 16 {
			t.Errorf("cache %s is %v, want [32 2 16]", q.Buffers[c].Name, s)
		}
	}
	// Each cache's rows in the full plan: a [1,T,H,hd] buffer that the
	// step After (the head split) reads, k before v, layer by layer.
	if len(d.Fills) != len(d.Caches) {
		t.Fatalf("%d fills for %d caches", len(d.Fills), len(d.Caches))
	}
	for i, f := range d.Fills {
		b, st := p.Buffers[f.Buf], p.Forward[f.After]
		if s := b.Shape; len(s) != 4 || s[0] != 1 || s[1] != 32 || s[2] != 2 || s[3] != 16 {
			t.Errorf("fill %d: %s is %v, want [1 32 2 16]", i, b.Name, s)
		}
		if st.Kernel != KTranspose || st.In[0] != f.Buf || (i > 0 && f.After <= d.Fills[i-1].After) {
			t.Errorf("fill %d: after step %d (%s of %v), want the transpose that reads %s, after fill %d's", i, f.After, st.Kernel, st.In, b.Name, i-1)
		}
		want := "_k"
		if i%2 == 1 {
			want = "_v"
		}
		if !strings.Contains(b.Name, want) {
			t.Errorf("fill %d: %s is not the %s projection", i, b.Name, want)
		}
	}
	if len(q.Params) != len(p.Params) {
		t.Errorf("%d params, want the full plan's %d", len(q.Params), len(p.Params))
	}
	// The GPU programs bind each work buffer at its offset: aligned, and
	// no two owners overlapping.
	end := 0
	for _, b := range q.Buffers {
		if b.Arena != "work" || b.AliasOf != NoBuf {
			continue
		}
		if b.Offset%Align != 0 || b.Offset < end || b.Offset+b.Size > q.WorkSize {
			t.Errorf("work buffer %s at %d (%d values): want a multiple of %d at or after %d, inside the arena of %d", b.Name, b.Offset, b.Size, Align, end, q.WorkSize)
		}
		end = b.Offset + b.Size
	}
	for _, pr := range q.Params {
		if b := q.Buffers[pr.Buf]; b.Name != pr.Name || b.Arena != "state" {
			t.Errorf("param %s's buffer is %s in the %s arena", pr.Name, b.Name, b.Arena)
		}
	}
	kinds := map[Kernel]int{}
	for i, s := range q.Forward {
		kinds[s.Kernel]++
		for _, b := range append(append([]BufID(nil), s.In...), s.Out...) {
			if b == NoBuf {
				continue
			}
			buf := q.Buffers[b]
			if buf.Arena == "state" || s.Kernel == KAttendCached && (b == s.Out[1] || b == s.Out[2]) {
				continue
			}
			if buf.Size > 4*32 {
				t.Errorf("step %d (%s, %s): %s %v is not one position's row", i, s.Kernel, s.Layer, buf.Name, buf.Shape)
			}
		}
	}
	for k, n := range map[Kernel]int{KDecodeEmbedding: 1, KAttendCached: 2, KMatMul: 0, KTranspose: 0, KSoftmax: 0, KGemm: 13, KLayerNorm: 5} {
		if kinds[k] != n {
			t.Errorf("%d %s steps, want %d (%v)", kinds[k], k, n, kinds)
		}
	}
	if q.Forward[d.Tail-1].Kernel != KAttendCached || q.Forward[len(q.Forward)-1].Layer != "lm_head" {
		t.Errorf("tail starts at %d after %s and ends with %s; want it after the last attention and ending with lm_head",
			d.Tail, q.Forward[d.Tail-1].Kernel, q.Forward[len(q.Forward)-1].Layer)
	}
	if s := q.Buffers[q.Output].Shape; len(s) != 3 || s[1] != 1 || s[2] != 89 {
		t.Errorf("output %v, want [1 1 89]", s)
	}
	for _, st := range q.Forward {
		if st.Kernel == KAttendCached && st.Attr.Alpha != 0.25 {
			t.Errorf("%s scale %v, want 1/√16", st.Layer, st.Attr.Alpha)
		}
	}
}

// TestDeriveDecodeRefuses: models the pass does not recognise get an
// error that says why, and a training plan none at all.
func TestDeriveDecodeRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		m    *spec.Model
		want string
	}{
		{"images", mlp(), "not a token sequence"},
		// one head written without the [T,H,hd] views: q·kᵀ of 2-D operands
		{"2-D attention", tokens(), "not a transpose"},
	} {
		p := mustBuild(t, c.m, Options{Batch: 1, Fusion: true, Target: CPU})
		if _, err := DeriveDecode(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: DeriveDecode error %v, want one saying %q", c.name, err, c.want)
		}
	}
	p := mustBuild(t, tokens(), Options{Batch: 1, Training: true, Fusion: true, Target: CPU})
	if _, err := DeriveDecode(p); err == nil {
		t.Errorf("a training plan: no error")
	}
}

// TestDeriveDecodeFusedAttention: the batch-1 plan of a target with fused
// attention (one attention step a block) derives the same decode plan as
// the CPU's unfused one: the same kernels, layers, attributes and shapes,
// step for step.
func TestDeriveDecodeFusedAttention(t *testing.T) {
	m, err := spec.Load("../testdata/text/gpt_moby.cue")
	if err != nil {
		t.Fatal(err)
	}
	unfused, err := DeriveDecode(mustBuild(t, m, Options{Batch: 1, Fusion: true, Target: CPU}))
	if err != nil {
		t.Fatal(err)
	}
	p := mustBuild(t, m, Options{Batch: 1, Fusion: true, Target: attentionTarget})
	if n := countKernel(p.Forward, KAttention); n != 2 {
		t.Fatalf("%d attention steps in the fused plan, want 2", n)
	}
	fused, err := DeriveDecode(p)
	if err != nil {
		t.Fatalf("DeriveDecode of the fused plan: %v", err)
	}
	if len(fused.Plan.Forward) != len(unfused.Plan.Forward) || fused.Tail != unfused.Tail || len(fused.Caches) != len(unfused.Caches) {
		t.Fatalf("fused: %d steps, tail %d, %d caches; unfused: %d, %d, %d", len(fused.Plan.Forward), fused.Tail, len(fused.Caches),
			len(unfused.Plan.Forward), unfused.Tail, len(unfused.Caches))
	}
	shapes := func(q *Plan, ids []BufID) (s [][]int) {
		for _, b := range ids {
			if b != NoBuf {
				s = append(s, q.Buffers[b].Shape)
			}
		}
		return s
	}
	for i, a := range fused.Plan.Forward {
		b := unfused.Plan.Forward[i]
		if a.Kernel != b.Kernel || a.Layer != b.Layer || a.Attr.Alpha != b.Attr.Alpha ||
			fmt.Sprint(shapes(fused.Plan, a.In), shapes(fused.Plan, a.Out)) != fmt.Sprint(shapes(unfused.Plan, b.In), shapes(unfused.Plan, b.Out)) {
			t.Errorf("step %d: fused %s %s %+v, unfused %s %s %+v", i, a.Kernel, a.Layer, a.Attr, b.Kernel, b.Layer, b.Attr)
		}
	}
}
