package emit

import (
	"bytes"
	"fmt"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// A GPU program's KV-cache decode: planner.DeriveDecode's one-position
// plan of the batch-1 inference plan, lowered with the same kernels as
// the other plans (and the decode's own two, emit/gpu/lower_decode.go)
// into the tables of a gpuhost.Decode, which rt/gpuhost records as one
// sequence a token and runs as the model's app.TokenModel.

// decodePlan is the decode plan being rendered: the plan (prefix d, its
// work arena arenaDecodeWork) and the ops of its steps, split where
// planner.Decode.Tail splits them.
type decodePlan struct {
	*gpuPlan
	dec *planner.Decode
	// fills are the prefill's copies, gpuhost.CacheFill literals: after
	// a step of the batch-1 inference plan, a key or value buffer into
	// its cache.
	fills []string
}

// decodePlan derives and lowers the decode plan of the batch-1 inference
// plan one. It returns nil and why when the planner does not recognise
// the model (or the GPU kernels cannot run it), which main.go then says
// in a comment for a model of token ids ("" for other models): such a
// program generates with the whole forward pass a token. It lowers into
// a library of its own first, so that a refused decode leaves no kernel
// in the program's.
func (g *gpuGen) decodePlan(o *gpuPlan) (*decodePlan, string) {
	one := o.plan
	dec, err := planner.DeriveDecode(one)
	if err != nil {
		if tokenVocab(one) > 0 {
			return nil, err.Error()
		}
		return nil, ""
	}
	if _, err := gpu.LowerInto(gpu.NewLibrary(g.dev.dialect), dec.Plan); err != nil {
		return nil, err.Error()
	}
	mp := &gpuPlan{planView: &planView{prefix: "d", plan: dec.Plan}, work: "arenaDecodeWork", decodeContext: dec.Context}
	if err := g.lower(mp); err != nil {
		return nil, err.Error()
	}
	d := &decodePlan{gpuPlan: mp, dec: dec}
	if err := g.cacheFills(o, d); err != nil {
		return nil, err.Error()
	}
	return d, ""
}

// cacheFills writes the prefill's copies (planner.Decode.Fills): one
// launch of the copy kernel a cache, of all its T rows (those past the
// window's are never read), from the batch-1 inference plan o's buffer.
func (g *gpuGen) cacheFills(o *gpuPlan, d *decodePlan) error {
	for i, f := range d.dec.Fills {
		c := d.dec.Caches[i]
		n := d.plan.Buffers[c].Size
		if s := o.plan.Buffers[f.Buf].Size; s != n {
			return fmt.Errorf("cache %s holds %d values, its rows in the forward pass %d (a bug in mlbuild's planner)", d.plan.Buffers[c].Name, n, s)
		}
		src, err := g.locate(o, f.Buf)
		if err != nil {
			return err
		}
		dst, err := g.locate(d.gpuPlan, c)
		if err != nil {
			return err
		}
		k := gpu.CopyKernel(n)
		name, err := g.register(k, "copy_cache")
		if err != nil {
			return err
		}
		d.fills = append(d.fills, fmt.Sprintf("{After: %d, Copy: op{Kernel: %q, Binds: []bind{{%s, %d, %d}, {%s, %d, %d}}, Groups: %d, Threadgroup: %d}}",
			f.After, name, src.arena, 4*src.off, 4*n, dst.arena, 4*dst.off, 4*n, k.Groups, k.Threadgroup))
	}
	return nil
}

// renderDecodeFields writes the Program's Decode and DecodeWorkSize.
func (g *gpuGen) renderDecodeFields(d *decodePlan) error {
	pl := d.plan
	in, err := g.locate(d.gpuPlan, pl.Input)
	if err != nil {
		return err
	}
	out, err := g.locate(d.gpuPlan, pl.Output)
	if err != nil {
		return err
	}
	g.p("// The KV-cache decode: a token is dStep and dLast, one sequence; a")
	g.p("// window is the one-sample inference with the Fills' copies.")
	g.p("Decode: &gpuhost.Decode{Context: %d, Input: region{%s, %d, 1}, Output: region{%s, %d, %d}, Step: dStep, Last: dLast, Fills: []gpuhost.CacheFill{",
		d.dec.Context, in.arena, in.off, out.arena, out.off, pl.Buffers[pl.Output].Size)
	for _, f := range d.fills {
		g.p("%s,", f)
	}
	g.p("}},")
	g.p("DecodeWorkSize: %d, // the rows of one position and the caches", pl.WorkSize)
	return nil
}

// renderDecodeTables writes dStep and dLast, each step with its CPU
// reference (the CPU program's decode call at the position the reference
// gets as its step argument) into refs.
func (g *gpuGen) renderDecodeTables(d *decodePlan, refs *bytes.Buffer) error {
	fw, tail := d.plan.Forward, d.dec.Tail
	for _, part := range []struct {
		name, short, about string
		from, to           int
	}{{"dStep", "Step", "computes one position of the KV-cache decode, its caches updated", 0, tail},
		{"dLast", "Last", "computes the logits of the position dStep computed", tail, len(fw)}} {
		g.p("// %s %s.", part.name, part.about)
		g.p("var %s = []step{", part.name)
		for i := part.from; i < part.to; i++ {
			ref, entry, err := g.renderStep(d.gpuPlan, part.short, i, fw[i], d.infer[i], false)
			if err != nil {
				return fmt.Errorf("emit: decode step %d (%s, layer %s): %v", i, fw[i].Kernel, fw[i].Layer, err)
			}
			g.p("%s", entry)
			refs.WriteString(ref)
		}
		g.p("}")
		g.p("")
	}
	return nil
}
