package emit

import (
	"bytes"
	"fmt"
	"go/format"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild"
	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// The Metal backend's program: the same three plans as the CPU backend
// (training at the spec's batch, inference at the spec's batch and at batch
// 1), lowered to GPU ops by emit/gpu, rendered as tables that a fixed host
// (metal_host.go) encodes into command buffers through mps.Engine. Each
// plan step also gets a CPU reference function (the CPU backend's kernel
// call on copies of the arenas) for the program's selftest.

// mpsImport is the import path of the Metal runtime in mlbuild's module,
// rewritten to ModulePath+"/mps" in generated programs.
const mpsImport = "github.com/mlbuild/mlbuild/mps"

// MetalConvScratch is the convolution scratch the Metal program needs for
// one convolution step: gpu.ConvScratch, the im2col columns and output
// rows of a round of images (emit/gpu lowers a convolution a round of
// images at a time). Plans for the Metal backend are built with
// planner.Options{ConvScratch: MetalConvScratch}.
func MetalConvScratch(g planner.ConvGeom) int {
	return gpu.ConvScratch(g)
}

// MPSFiles copies the Metal runtime (mps/*.go, no tests) and, when withFake
// is set, its recording fake (mps/fakemetal, for tests that run a
// program's host code off a Mac), with imports rewritten to the generated
// module.
func MPSFiles(withFake bool) ([]File, error) {
	dirs := []string{"mps"}
	if withFake {
		dirs = append(dirs, "mps/fakemetal")
	}
	var out []File
	for _, dir := range dirs {
		entries, err := fs.ReadDir(mlbuild.MPSSources, dir)
		if err != nil {
			return nil, fmt.Errorf("emit: the Metal runtime %s is not embedded in this mlbuild: %v", dir, err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasSuffix(name, "_test.go") || !strings.HasSuffix(name, ".go") {
				continue
			}
			data, err := fs.ReadFile(mlbuild.MPSSources, path.Join(dir, name))
			if err != nil {
				return nil, err
			}
			data = bytes.ReplaceAll(data, []byte(`"`+mpsImport), []byte(`"`+ModulePath+"/mps"))
			out = append(out, File{Path: path.Join(dir, name), Data: data})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// MetalSources is what the Metal emitter renders besides the runtime: the
// model's main.go (tables, CPU references, meta), host.go (the fixed host
// code), kernels.go (the MSL as a Go constant) and the MSL itself.
type MetalSources struct {
	Main, Host, Kernels []byte
	MSL                 string
}

// metalProgram returns the module of a Metal program.
func metalProgram(in *Input) ([]File, error) {
	src, err := RenderMetal(in)
	if err != nil {
		return nil, err
	}
	vendor, err := VendorFiles(Purego)
	if err != nil {
		return nil, err
	}
	files := []File{
		{Path: "go.mod", Data: GoMod(Purego)},
		{Path: "main.go", Data: src.Main},
		{Path: "host.go", Data: src.Host},
		{Path: "kernels.go", Data: src.Kernels},
	}
	rtFiles, err := RuntimeFiles(runtimePackages...)
	if err != nil {
		return nil, err
	}
	mpsFiles, err := MPSFiles(false)
	if err != nil {
		return nil, err
	}
	return append(append(append(files, rtFiles...), mpsFiles...), vendor...), nil
}

// metalPlan is one plan being rendered for Metal: its prefix (t, e, o), its
// lowered program, and the GPU ops of each plan step.
type metalPlan struct {
	*planView
	work     string // arena constant of its work arena
	prog     *gpu.Program
	forward  [][]gpu.Op
	backward [][]gpu.Op
	update   [][]gpu.Op
	infer    [][]gpu.Op
}

// metalGen renders a Metal program. It embeds the CPU generator to reuse
// its kernel calls as the selftest's reference.
type metalGen struct {
	*generator
	kernels     []*gpu.Kernel     // all plans' kernels, deduplicated, renamed
	kernelNames map[string]string // printed body -> global name
	gemmShapes  []string          // distinct GEMM shapes, as literals
	gemmSeen    map[string]bool
	trainParams map[string]int // param name -> state offset in the training plan
}

// RenderMetal renders the generated files of a Metal program.
func RenderMetal(in *Input) (*MetalSources, error) {
	if in.Train == nil || in.Infer == nil || in.Infer1 == nil {
		return nil, fmt.Errorf("emit: missing plan")
	}
	g := &metalGen{
		generator:   &generator{in: in, trainState: map[string]string{}},
		kernelNames: map[string]string{},
		gemmSeen:    map[string]bool{},
		trainParams: map[string]int{},
	}
	plans := []*metalPlan{
		{planView: &planView{prefix: "t", plan: in.Train}, work: "arenaTrainWork"},
		{planView: &planView{prefix: "e", plan: in.Infer}, work: "arenaEvalWork"},
		{planView: &planView{prefix: "o", plan: in.Infer1}, work: "arenaOneWork"},
	}
	for _, p := range in.Train.Params {
		g.trainParams[p.Name] = in.Train.Buffers[p.Buf].Offset
	}
	for _, mp := range plans {
		if err := planner.Verify(mp.plan); err != nil {
			return nil, fmt.Errorf("emit: plan for batch %d does not verify (a bug in mlbuild's planner): %v", mp.plan.Batch, err)
		}
		if err := g.lower(mp); err != nil {
			return nil, err
		}
	}
	copyName, err := g.register(copyKernel(in.Train.Buffers[in.Train.Output].Size), "copy_output")
	if err != nil {
		return nil, err
	}
	msl, err := gpu.Source(gpu.Metal, g.kernels)
	if err != nil {
		return nil, fmt.Errorf("emit: printing the Metal kernels: %v", err)
	}
	main, err := g.renderMain(plans, copyName)
	if err != nil {
		return nil, err
	}
	kernels := fmt.Sprintf("// Code generated by mlbuild %s. DO NOT EDIT.\n\npackage main\n\n"+
		"// metalSource is the Metal Shading Language source of every kernel of the\n"+
		"// model's plans, compiled when the program starts (Apple's offline\n"+
		"// compiler does not run where mlbuild does).\nconst metalSource = %s\n", comment(in.Version), goString(msl))
	kernelsSrc, err := format.Source([]byte(kernels))
	if err != nil {
		return nil, fmt.Errorf("emit: kernels.go does not parse (a bug in mlbuild): %v", err)
	}
	host, err := format.Source([]byte(metalHostSource))
	if err != nil {
		return nil, fmt.Errorf("emit: host.go does not parse (a bug in mlbuild): %v", err)
	}
	return &MetalSources{Main: main, Host: host, Kernels: kernelsSrc, MSL: msl}, nil
}

// goString quotes s as a raw string literal when it can (readable MSL in
// kernels.go), else as an interpreted one.
func goString(s string) string {
	if !strings.Contains(s, "`") && !strings.Contains(s, "\r") {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// copyKernel copies n floats: the training prediction into its own buffer
// inside the training step's command buffer, before the backward pass may
// reuse the prediction's storage.
func copyKernel(n int) *gpu.Kernel {
	const tg = 256
	gid := gpu.Builtin{Kind: gpu.GlobalID}
	return &gpu.Kernel{
		Name: "copy",
		Doc:  fmt.Sprintf("copy %d elements", n),
		Params: []gpu.Param{
			{Name: "x", Elem: gpu.Float, Size: n},
			{Name: "y", Elem: gpu.Float, Mutable: true, Size: n},
		},
		Threadgroup: tg,
		Groups:      (n + tg - 1) / tg,
		Body: []gpu.Stmt{gpu.If{
			Cond: gpu.Binary{Op: gpu.OpLt, L: gid, R: gpu.IntLit{V: int64(n)}},
			Then: []gpu.Stmt{gpu.Store{Buf: "y", Index: gid, Value: gpu.Load{Buf: "x", Index: gid}}},
		}},
	}
}

// register adds a kernel to the program's library, reusing the name of an
// identical kernel of another plan. Names are KernelPrefix, a counter in
// plan order and the kind, as emit/gpu names them within one plan.
func (g *metalGen) register(k *gpu.Kernel, kind string) (string, error) {
	k = gpu.Rewrite(k, gpu.Metal)
	k.Name = "KERNEL"
	var b strings.Builder
	if err := gpu.PrintKernel(&b, gpu.Metal, k); err != nil {
		return "", fmt.Errorf("emit: %v", err)
	}
	if name, ok := g.kernelNames[b.String()]; ok {
		return name, nil
	}
	k.Name = fmt.Sprintf("%s%03d_%s", gpu.KernelPrefix, len(g.kernels), kind)
	g.kernelNames[b.String()] = k.Name
	g.kernels = append(g.kernels, k)
	return k.Name, nil
}

// lower lowers one plan, renames its kernels into the program's library,
// and splits each phase's ops by plan step (by lowering each step alone and
// counting its ops, since gpu.Op does not carry its step's index).
func (g *metalGen) lower(mp *metalPlan) error {
	pl := mp.plan
	prog, err := gpu.Lower(pl, gpu.Metal)
	if err != nil {
		return fmt.Errorf("emit: lowering the batch-%d plan for Metal: %v", pl.Batch, err)
	}
	rename := map[string]string{}
	for _, k := range prog.Kernels {
		kind := k.Name
		if _, rest, ok := strings.Cut(k.Name, "_"); ok {
			kind = rest
		}
		kc := *k
		name, err := g.register(&kc, kind)
		if err != nil {
			return err
		}
		rename[k.Name] = name
	}
	for _, ops := range [][]gpu.Op{prog.Forward, prog.Backward, prog.Update, prog.Infer} {
		for _, op := range ops {
			if op.Launch != nil {
				name, ok := rename[op.Launch.Kernel]
				if !ok {
					return fmt.Errorf("emit: launch of kernel %s, which the lowered program does not define (a bug in emit/gpu)", op.Launch.Kernel)
				}
				op.Launch.Kernel = name
			}
		}
	}
	mp.prog = prog
	split := func(phase string, steps planner.Phase, ops []gpu.Op) ([][]gpu.Op, error) {
		var out [][]gpu.Op
		rest := ops
		for i, st := range steps {
			one := *pl
			one.Forward, one.Backward, one.Update = nil, nil, nil
			var n int
			switch phase {
			case "forward", "infer":
				one.Forward = planner.Phase{st}
			case "backward":
				one.Backward = planner.Phase{st}
			case "update":
				one.Update = planner.Phase{st}
			}
			p1, err := gpu.Lower(&one, gpu.Metal)
			if err != nil {
				return nil, fmt.Errorf("emit: lowering %s step %d (%s, layer %s) alone: %v", phase, i, st.Kernel, st.Layer, err)
			}
			switch phase {
			case "forward":
				n = len(p1.Forward)
			case "infer":
				n = len(p1.Infer)
			case "backward":
				n = len(p1.Backward)
			case "update":
				n = len(p1.Update)
			}
			if n > len(rest) {
				return nil, fmt.Errorf("emit: %s step %d (layer %s) lowers to %d ops alone but only %d remain (a bug in emit/gpu)", phase, i, st.Layer, n, len(rest))
			}
			for _, op := range rest[:n] {
				if op.Layer != st.Layer || op.Kernel != string(st.Kernel) {
					return nil, fmt.Errorf("emit: %s step %d (%s, layer %s) got an op of %s, layer %s, when split (a bug in emit/gpu)", phase, i, st.Kernel, st.Layer, op.Kernel, op.Layer)
				}
			}
			out = append(out, rest[:n])
			rest = rest[n:]
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("emit: %d %s ops left over after splitting by step (a bug in emit/gpu)", len(rest), phase)
		}
		return out, nil
	}
	if mp.prefix == "t" {
		if mp.forward, err = split("forward", pl.Forward, prog.Forward); err != nil {
			return err
		}
		if mp.backward, err = split("backward", pl.Backward, prog.Backward); err != nil {
			return err
		}
		if mp.update, err = split("update", pl.Update, prog.Update); err != nil {
			return err
		}
		return nil
	}
	mp.infer, err = split("infer", pl.Forward, prog.Infer)
	return err
}

// location is where a plan buffer lives in the program: an arena (a
// constant of host.go) and an element offset in it.
type location struct {
	arena string
	off   int
}

// refArena names the arena slices of a reference function.
var refArena = map[string]string{
	"arenaState": "sa", "arenaTrainWork": "wa", "arenaEvalWork": "wa", "arenaOneWork": "wa",
	"arenaTrainInput": "xa", "arenaTrainLabels": "ya",
}

func (g *metalGen) locate(mp *metalPlan, id planner.BufID) (location, error) {
	pl := mp.plan
	if id < 0 || int(id) >= len(pl.Buffers) {
		return location{}, fmt.Errorf("buffer id %d out of range", id)
	}
	b := pl.Buffers[id]
	root := b
	for root.AliasOf != planner.NoBuf {
		root = pl.Buffers[root.AliasOf]
	}
	if mp.prefix == "t" && root.ID == pl.Input {
		return location{"arenaTrainInput", b.Offset - root.Offset}, nil
	}
	if mp.prefix == "t" && root.ID == pl.Labels {
		return location{"arenaTrainLabels", b.Offset - root.Offset}, nil
	}
	if b.Arena == planner.ArenaState {
		if mp.prefix == "t" {
			return location{"arenaState", b.Offset}, nil
		}
		for _, p := range pl.Params {
			if p.Buf == root.ID {
				off, ok := g.trainParams[p.Name]
				if !ok {
					return location{}, fmt.Errorf("inference param %s has no training counterpart", p.Name)
				}
				return location{"arenaState", off + b.Offset - root.Offset}, nil
			}
		}
		return location{}, fmt.Errorf("inference buffer %s is in the state arena but is no param", b.Name)
	}
	return location{mp.work, b.Offset}, nil
}

// renderMain writes main.go: sizes, kernel table, per-plan step tables,
// CPU reference functions and the model's meta.
func (g *metalGen) renderMain(plans []*metalPlan, copyName string) ([]byte, error) {
	t, e, o := plans[0], plans[1], plans[2]
	tp := t.plan
	outLoc, err := g.locate(t, tp.Output)
	if err != nil {
		return nil, err
	}
	lossLoc, err := g.locate(t, tp.Loss)
	if err != nil {
		return nil, err
	}
	outSize := tp.Buffers[tp.Output].Size
	var body bytes.Buffer
	saved := g.buf
	g.buf = body

	g.p("// Arena sizes in float32 elements. The state arena is shared by all plans;")
	g.p("// each plan has its own work arena; the training batch is double-buffered.")
	g.p("const (")
	g.p("stateSize = %d", tp.StateSize)
	for _, mp := range plans {
		g.p("%sWorkSize = %d // naive: %d", mp.prefix, mp.plan.WorkSize, mp.plan.NaiveWorkSize)
	}
	g.p("trainInputSize = %d // %s", tp.Buffers[tp.Input].Size, shapeText(tp.Buffers[tp.Input].Shape))
	g.p("trainLabelsSize = %d // %s", tp.Buffers[tp.Labels].Size, shapeText(tp.Buffers[tp.Labels].Shape))
	g.p("outputSize = %d // the training prediction, %s", outSize, shapeText(tp.Buffers[tp.Output].Shape))
	g.p(")")
	g.p("")
	g.p("// Where the plans' inputs and outputs are (arena, element offset).")
	g.p("var (")
	g.p("trainOutput = region{%s, %d, outputSize}", outLoc.arena, outLoc.off)
	g.p("trainLoss = region{%s, %d, 1}", lossLoc.arena, lossLoc.off)
	for _, mp := range []*metalPlan{e, o} {
		pl := mp.plan
		il, err := g.locate(mp, pl.Input)
		if err != nil {
			return nil, err
		}
		ol, err := g.locate(mp, pl.Output)
		if err != nil {
			return nil, err
		}
		g.p("%sInput = region{%s, %d, %d}", mp.prefix, il.arena, il.off, pl.Buffers[pl.Input].Size)
		g.p("%sOutput = region{%s, %d, %d}", mp.prefix, ol.arena, ol.off, pl.Buffers[pl.Output].Size)
	}
	g.p(")")
	g.p("")
	g.p("// copyOutput keeps the training prediction in its own buffer, inside the")
	g.p("// training step's command buffer, before the backward pass reuses its storage.")
	g.p("var copyOutput = gpuOp{kernel: %q, binds: []bind{{%s, %d, %d}, {arenaLogits, 0, %d}}, groups: %d, threadgroup: 256}",
		copyName, outLoc.arena, 4*outLoc.off, 4*outSize, 4*outSize, (outSize+255)/256)
	g.p("")
	g.p("// kernels lists every kernel of metalSource with the bytes each buffer")
	g.p("// argument needs, so every pipeline is built (and checked) at start.")
	g.p("var kernels = []kernelInfo{")
	for _, k := range g.kernels {
		var sizes []string
		for _, prm := range k.Params {
			sizes = append(sizes, strconv.Itoa(4*prm.Size))
		}
		g.p("{%q, []int{%s}},", k.Name, strings.Join(sizes, ", "))
	}
	g.p("}")
	g.p("")

	phases := []struct {
		mp    *metalPlan
		name  string
		short string
		steps planner.Phase
		ops   [][]gpu.Op
		train bool
	}{
		{t, "Forward", "Fwd", tp.Forward, t.forward, true},
		{t, "Backward", "Bwd", tp.Backward, t.backward, true},
		{t, "Update", "Upd", tp.Update, t.update, true},
		{e, "Infer", "Inf", e.plan.Forward, e.infer, false},
		{o, "Infer", "Inf", o.plan.Forward, o.infer, false},
	}
	var refs bytes.Buffer
	for _, ph := range phases {
		g.p("// %s%s is the %s of the %s plan (batch %d), one entry per plan step.", ph.mp.prefix, ph.name,
			strings.ToLower(ph.name), map[string]string{"t": "training", "e": "inference", "o": "one-sample inference"}[ph.mp.prefix], ph.mp.plan.Batch)
		g.p("var %s%s = []planStep{", ph.mp.prefix, ph.name)
		for i, st := range ph.steps {
			ref, entry, err := g.renderStep(ph.mp, ph.short, i, st, ph.ops[i], ph.train)
			if err != nil {
				return nil, fmt.Errorf("emit: %s %s step %d (%s, layer %s): %v", ph.mp.prefix, strings.ToLower(ph.name), i, st.Kernel, st.Layer, err)
			}
			g.p("%s", entry)
			refs.WriteString(ref)
		}
		g.p("}")
		g.p("")
	}
	g.p("// gemmShapes are the distinct MPS GEMMs of all plans, checked one by one")
	g.p("// against cpu.Sgemm by selftest.")
	g.p("var gemmShapes = []gemmShape{")
	for _, s := range g.gemmShapes {
		g.p("%s,", s)
	}
	g.p("}")
	g.p("")
	g.buf.Write(refs.Bytes())
	g.renderMeta()
	body = g.buf
	g.buf = saved

	g.fileHeader("metal",
		"the plans' GEMMs run on MPSMatrixMultiplication and every other op on a",
		"Metal kernel generated for its constant shapes (kernels.go). host.go",
		"encodes the tables below; each step also has its CPU reference, which",
		"selftest compares with the GPU. Run it with no arguments for its commands.")
	g.p("var dropoutRand = cpu.NewRand(1) // the evaluation-mode reference takes one; unused there")
	g.p("")
	g.sharedDecls("Constant shapes and element-wise chains of the reference steps.")
	g.buf.Write(body.Bytes())
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("emit: generated Metal code does not parse (a bug in mlbuild): %v\n%s", err, g.buf.Bytes())
	}
	return src, nil
}

// renderStep returns a step's reference function and its planStep entry.
func (g *metalGen) renderStep(mp *metalPlan, short string, i int, st planner.Step, ops []gpu.Op, training bool) (string, string, error) {
	pl := mp.plan
	fn := fmt.Sprintf("%sRef%s%d", mp.prefix, short, i)
	// Operands: slices of the reference arenas.
	slice := func(id planner.BufID) (operand, error) {
		if id == planner.NoBuf {
			return operand{}, nil
		}
		loc, err := g.locate(mp, id)
		if err != nil {
			return operand{}, err
		}
		b := pl.Buffers[id]
		return operand{param: fmt.Sprintf("%s[%d:%d]", refArena[loc.arena], loc.off, loc.off+b.Size), buf: b}, nil
	}
	var ins, outs []operand
	for _, id := range st.In {
		o, err := slice(id)
		if err != nil {
			return "", "", err
		}
		ins = append(ins, o)
	}
	for _, id := range st.Out {
		o, err := slice(id)
		if err != nil {
			return "", "", err
		}
		outs = append(outs, o)
	}
	// The CPU kernels need their own convolution scratch (a different
	// layout and size from the GPU's columns).
	if st.Kernel == planner.KConv2D || st.Kernel == planner.KConv2DBwd {
		c := st.Attr.Conv
		if c == nil {
			return "", "", fmt.Errorf("convolution without geometry")
		}
		cols := fmt.Sprintf("make([]float32, %s.ColsSize())", convLit(c))
		if st.Kernel == planner.KConv2D && len(outs) > 1 {
			outs[1].param = cols
		}
		if st.Kernel == planner.KConv2DBwd && len(ins) > 4 {
			ins[4].param = cols
		}
	}
	var body string
	var c stepCall
	if st.Kernel == planner.KDropout && training && st.Attr.Rate > 0 {
		if len(outs) < 2 || outs[1].param == "" {
			return "", "", fmt.Errorf("training dropout without a mask")
		}
		rate := float32(st.Attr.Rate)
		scale := 1 / (1 - rate)
		body = fmt.Sprintf("x, y, mask := %s, %s, %s\nfor i := range y {\nm := float32(0)\nif dropoutUniform(seed, uint32(step), uint32(i)) >= %s {\nm = %s\n}\nmask[i] = m\ny[i] = x[i] * m\n}",
			ins[0].slice(), outs[0].slice(), outs[1].slice(), float(float64(rate)), float(float64(scale)))
	} else {
		var err error
		body, err = g.kernelCall(st, ins, outs, training, &c)
		if err != nil {
			return "", "", err
		}
	}
	if !c.loss {
		body += "\nreturn 0"
	}
	note := comment(st.Layer) + ": " + string(st.Kernel)
	if len(st.Fused) > 0 {
		note += " (fused " + comment(strings.Join(st.Fused, " + ")) + ")"
	}
	ref := fmt.Sprintf("// %s is the CPU reference of %s.\nfunc %s(sa, wa, xa, ya []float32, lr float32, step int, seed uint32) float32 {\n%s\n}\n\n", fn, note, fn, body)

	// Regions selftest compares: the outputs, the optimizer's state and
	// batch norm's running statistics (updated in place), never the
	// convolution columns (a workspace whose layout differs by backend).
	var check []string
	seen := map[planner.BufID]bool{}
	addCheck := func(id planner.BufID) error {
		if id == planner.NoBuf || seen[id] {
			return nil
		}
		seen[id] = true
		loc, err := g.locate(mp, id)
		if err != nil {
			return err
		}
		check = append(check, fmt.Sprintf("{%s, %d, %d}", loc.arena, loc.off, pl.Buffers[id].Size))
		return nil
	}
	for k, id := range st.Out {
		if st.Kernel == planner.KConv2D && k == 1 {
			continue
		}
		if err := addCheck(id); err != nil {
			return "", "", err
		}
	}
	switch {
	case st.Kernel == planner.KSGD || st.Kernel == planner.KAdam:
		for _, id := range st.In[1:] {
			if err := addCheck(id); err != nil {
				return "", "", err
			}
		}
	case st.Kernel == planner.KBatchNorm && training && len(st.In) >= 5:
		for _, id := range st.In[3:5] {
			if err := addCheck(id); err != nil {
				return "", "", err
			}
		}
	}

	var opLits []string
	for _, op := range ops {
		lit, err := g.opLiteral(mp, op)
		if err != nil {
			return "", "", err
		}
		opLits = append(opLits, lit)
	}
	head := fmt.Sprintf("name: %s, layer: %s, ref: %s, reduce: %d, check: []region{%s}",
		quote(fmt.Sprintf("%s %d %s: %s", strings.ToLower(short), i, st.Layer, st.Kernel)), quote(st.Layer), fn, reduceLen(pl, st), strings.Join(check, ", "))
	entry := "{" + head + "},"
	if len(opLits) > 0 {
		entry = "{" + head + ", ops: []gpuOp{\n" + strings.Join(opLits, ",\n") + ",\n}},"
	}
	return ref, entry, nil
}

// opLiteral renders one GPU op as a gpuOp literal, byte offsets resolved.
func (g *metalGen) opLiteral(mp *metalPlan, op gpu.Op) (string, error) {
	if op.Launch != nil {
		l := op.Launch
		var binds []string
		for _, b := range l.Bindings {
			if b.StepArgs {
				binds = append(binds, fmt.Sprintf("{arenaArgs, 0, %d}", 4*b.Size))
				continue
			}
			loc, err := g.locate(mp, b.Buf)
			if err != nil {
				return "", err
			}
			binds = append(binds, fmt.Sprintf("{%s, %d, %d}", loc.arena, 4*(loc.off+b.Offset), 4*b.Size))
		}
		return fmt.Sprintf("{kernel: %q, binds: []bind{%s}, groups: %d, threadgroup: %d}", l.Kernel, strings.Join(binds, ", "), l.Groups, l.Threadgroup), nil
	}
	gm := op.Gemm
	if gm == nil {
		return "", fmt.Errorf("an op with neither a launch nor a GEMM")
	}
	mat := func(x gpu.Matrix) (string, error) {
		loc, err := g.locate(mp, x.Buf)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("matrix{%s, %d, %d}", loc.arena, 4*(loc.off+x.Offset), 4*x.LD), nil
	}
	a, err := mat(gm.A)
	if err != nil {
		return "", err
	}
	b, err := mat(gm.B)
	if err != nil {
		return "", err
	}
	c, err := mat(gm.C)
	if err != nil {
		return "", err
	}
	shape := fmt.Sprintf("gemmShape{transA: %v, transB: %v, m: %d, n: %d, k: %d, alpha: %s, beta: %s}",
		gm.TransA, gm.TransB, gm.M, gm.N, gm.K, float(float64(gm.Alpha)), float(float64(gm.Beta)))
	if !g.gemmSeen[shape] {
		g.gemmSeen[shape] = true
		g.gemmShapes = append(g.gemmShapes, shape)
	}
	return fmt.Sprintf("{gemm: &gemmOp{shape: %s, a: %s, b: %s, c: %s}}", shape, a, b, c), nil
}

// reduceLen is the longest sum behind one output element of a step, which
// scales selftest's tolerance: float32 rounding grows with it.
func reduceLen(pl *planner.Plan, st planner.Step) int {
	size := func(k int, ids []planner.BufID) int {
		if k < len(ids) && ids[k] != planner.NoBuf {
			return pl.Buffers[ids[k]].Size
		}
		return 1
	}
	shape := func(k int, ids []planner.BufID) []int {
		if k < len(ids) && ids[k] != planner.NoBuf {
			return pl.Buffers[ids[k]].Shape
		}
		return nil
	}
	r := 1
	switch st.Kernel {
	case planner.KGemm, planner.KGemmBwd:
		w := shape(1, st.In)
		if len(w) == 2 {
			r = max(w[0], w[1], size(0, st.In)/max(w[1], 1))
		}
	case planner.KConv2D, planner.KConv2DBwd:
		if c := st.Attr.Conv; c != nil {
			gr := max(c.Groups, 1)
			r = max(c.C/gr*c.KH*c.KW, c.OC/gr*c.KH*c.KW, c.N*c.OH*c.OW)
		}
	case planner.KMatMul, planner.KMatMulBwd:
		for _, s := range [][]int{shape(0, st.In), shape(1, st.In)} {
			for _, d := range s {
				r = max(r, d)
			}
		}
	case planner.KMaxPool2D, planner.KAvgPool2D, planner.KMaxPool2DBwd, planner.KAvgPool2DBwd:
		if c := st.Attr.Conv; c != nil {
			r = c.KH * c.KW
		}
	case planner.KSoftmaxXent, planner.KMSE, planner.KMAE, planner.KHuber, planner.KBatchNorm, planner.KBatchNormBwd, planner.KBinaryBwd,
		planner.KGlobalAvgPool, planner.KGlobalAvgPoolBwd:
		r = size(0, st.In)
	case planner.KSoftmax, planner.KLogSoftmax, planner.KSoftmaxBwd, planner.KLogSoftmaxBwd:
		if s := shape(0, st.In); st.Attr.Axis < len(s) {
			r = s[st.Attr.Axis]
		}
	}
	return r
}
