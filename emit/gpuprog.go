package emit

import (
	"bytes"
	"fmt"
	"go/format"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// A GPU backend's program: the same three plans as the CPU backend
// (training at the spec's batch, inference at the spec's batch and at batch
// 1), lowered to GPU ops by emit/gpu in the device's kernel language and
// rendered as the tables of a gpuhost.Program, which the carried host
// package rt/gpuhost records into sequences on the device (package mps for
// Metal, cuda for CUDA). Each plan step also gets a CPU reference function
// (the CPU backend's kernel call on copies of the arenas) for the program's
// selftest. Nothing in the generated main.go depends on the GPU family but
// the kernel language and the device's Open function.

// gpuDevice is what one GPU family adds to a GPU program.
type gpuDevice struct {
	backend string       // the Backend's name
	dialect *gpu.Dialect // the kernel language
	pkg     string       // the device package mlbuild carries: "mps", "cuda"
	fake    string       // its fake, a subpackage: "fakemetal", "fakecuda"
	about   []string     // lines of main.go's header comment on how it runs
	// replicas are the GPU counts of data-parallel training the program
	// gets tables for, where they divide the batch (none: one GPU only);
	// openReplicas is the device package's function that opens them.
	replicas     []int
	openReplicas string
	target       planner.Target // the backend's planning rules, for the replicas' plans
}

// MetalConvScratch is the convolution scratch a GPU program needs for one
// convolution step: gpu.ConvScratch, the im2col columns and output rows of
// a round of images (emit/gpu lowers a convolution a round of images at a
// time).
func MetalConvScratch(g planner.ConvGeom) int {
	return gpu.ConvScratch(g)
}

// DeviceFiles copies the device package of a GPU backend (mps/*.go or
// cuda/*.go, no tests) into a program and, when withFake is set, its fake
// (for tests that run a program's host code off the real GPU), with imports
// rewritten to the generated module.
func (b *Backend) DeviceFiles(withFake bool) ([]File, error) {
	if b.gpu == nil {
		return nil, nil
	}
	return b.gpu.files(withFake)
}

func (d *gpuDevice) files(withFake bool) ([]File, error) {
	dirs := []string{d.pkg}
	if withFake {
		dirs = append(dirs, d.pkg+"/"+d.fake)
	}
	return carriedFiles(dirs...)
}

// GPUSources is what the GPU emitter renders besides the runtime: the
// model's main.go (tables, CPU references, meta), kernels.go (the kernel
// source as a Go constant) and the kernel source itself.
type GPUSources struct {
	Main, Kernels []byte
	KernelSource  string
}

// gpuProgram returns the module of a GPU program.
func (d *gpuDevice) program(in *Input) ([]File, error) {
	src, err := d.render(in)
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
		{Path: "kernels.go", Data: src.Kernels},
	}
	rtFiles, err := RuntimeFiles(append(runtimePackages, "gpuhost", "rendezvous")...)
	if err != nil {
		return nil, err
	}
	devFiles, err := d.files(false)
	if err != nil {
		return nil, err
	}
	return append(append(append(files, rtFiles...), devFiles...), vendor...), nil
}

// gpuPlan is one plan being rendered for a GPU: its prefix (t, e, o), its
// lowered program, and the GPU ops of each plan step.
type gpuPlan struct {
	*planView
	work     string // arena constant of its work arena
	shares   int    // a replica's GPU count (0: the program's own plan)
	prog     *gpu.Program
	forward  [][]gpu.Op
	backward [][]gpu.Op
	update   [][]gpu.Op
	infer    [][]gpu.Op
	// decodeContext is T for the KV-cache decode's plan (0 for others),
	// whose CPU references take the position as their step argument.
	decodeContext int
}

// gpuGen renders a GPU program into a mainFile, as every backend does;
// its CPU references are the CPU backend's kernel calls (cpu), written
// into the same file.
type gpuGen struct {
	*mainFile
	cpu         *generator // the CPU backend's kernel calls, the selftest's reference
	dev         *gpuDevice
	lib         *gpu.Library // all plans' kernels, each once
	gemmShapes  []string     // distinct GEMM shapes, as literals
	gemmSeen    map[string]bool
	trainParams map[string]int // param name -> state offset in the training plan
}

// render renders the generated files of a GPU program.
func (d *gpuDevice) render(in *Input) (*GPUSources, error) {
	if in.Train == nil || in.Infer == nil || in.Infer1 == nil {
		return nil, fmt.Errorf("emit: missing plan")
	}
	file := &mainFile{in: in}
	g := &gpuGen{
		mainFile:    file,
		cpu:         &generator{mainFile: file, trainState: map[string]string{}, reference: true},
		dev:         d,
		lib:         gpu.NewLibrary(d.dialect),
		gemmSeen:    map[string]bool{},
		trainParams: map[string]int{},
	}
	plans := []*gpuPlan{
		{planView: &planView{prefix: "t", plan: in.Train}, work: "arenaTrainWork"},
		{planView: &planView{prefix: "e", plan: in.Infer}, work: "arenaEvalWork"},
		{planView: &planView{prefix: "o", plan: in.Infer1}, work: "arenaOneWork"},
	}
	for _, p := range in.Train.Params {
		g.trainParams[p.Name] = in.Train.Buffers[p.Buf].Offset
	}
	for _, t := range in.Train.Twins { // the weights' bfloat16 twins, which every plan reads from the training plan's place
		if b := in.Train.Buffers[t.Twin]; b.Kind == planner.KindParamBF16 {
			g.trainParams[b.Name] = b.Offset
		}
	}
	for _, mp := range plans {
		if err := planner.Verify(mp.plan); err != nil {
			return nil, fmt.Errorf("emit: plan for batch %d does not verify (a bug in mlbuild's planner): %v", mp.plan.Batch, err)
		}
		if err := g.lower(mp); err != nil {
			return nil, err
		}
	}
	tp := in.Train
	copyName, err := g.register(gpu.CopyKernel(tp.Buffers[tp.Output].Size), "copy_output")
	if err != nil {
		return nil, err
	}
	res, err := g.residentKernels(tp)
	if err != nil {
		return nil, err
	}
	replicas, err := g.replicaPlans()
	if err != nil {
		return nil, err
	}
	dec, noDecode := g.decodePlan(plans[2])
	source, err := g.lib.Source()
	if err != nil {
		return nil, fmt.Errorf("emit: printing the %s kernels: %v", d.backend, err)
	}
	main, err := g.renderMain(plans, copyName, res, replicas, dec, noDecode)
	if err != nil {
		return nil, err
	}
	kernels := fmt.Sprintf("// Code generated by mlbuild %s. DO NOT EDIT.\n\npackage main\n\n"+
		"// kernelSource is the %s source of every kernel of the model's plans,\n"+
		"// compiled for the device when the program starts.\nconst kernelSource = %s\n", comment(in.Version), d.dialect.Name, goString(source))
	kernelsSrc, err := format.Source([]byte(kernels))
	if err != nil {
		return nil, fmt.Errorf("emit: kernels.go does not parse (a bug in mlbuild): %v", err)
	}
	return &GPUSources{Main: main, Kernels: kernelsSrc, KernelSource: source}, nil
}

// goString quotes s as a raw string literal when it can (readable kernels
// in kernels.go), else as an interpreted one.
func goString(s string) string {
	if !strings.Contains(s, "`") && !strings.Contains(s, "\r") {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// register adds a kernel of the host's own (not a plan step's) to the
// program's library.
func (g *gpuGen) register(k *gpu.Kernel, kind string) (string, error) {
	name, err := g.lib.Add(k, kind)
	if err != nil {
		return "", fmt.Errorf("emit: %v", err)
	}
	return name, nil
}

// lower lowers one plan into the program's kernel library; gpu.Lower
// groups the ops by plan step.
func (g *gpuGen) lower(mp *gpuPlan) error {
	pl := mp.plan
	prog, err := gpu.LowerShareInto(g.lib, pl, max(mp.shares, 1))
	if err != nil {
		return fmt.Errorf("emit: lowering the batch-%d plan for %s: %w", pl.Batch, g.dev.backend, err)
	}
	mp.prog = prog
	if mp.training() {
		mp.forward, mp.backward, mp.update = prog.ForwardSteps, prog.BackwardSteps, prog.UpdateSteps
		return nil
	}
	mp.infer = prog.InferSteps
	return nil
}

// training says whether mp is a training plan (the program's or a
// replica's).
func (mp *gpuPlan) training() bool { return mp.work == "arenaTrainWork" }

// location is where a plan buffer lives in the program: an arena (a
// constant of main.go, naming a gpuhost arena) and an element offset in it.
type location struct {
	arena string
	off   int
}

// refArena names the arena slices of a reference function.
var refArena = map[string]string{
	"arenaState": "sa", "arenaTrainWork": "wa", "arenaEvalWork": "wa", "arenaOneWork": "wa", "arenaDecodeWork": "wa",
	"arenaTrainInput": "xa", "arenaTrainLabels": "ya",
}

func (g *gpuGen) locate(mp *gpuPlan, id planner.BufID) (location, error) {
	pl := mp.plan
	if id < 0 || int(id) >= len(pl.Buffers) {
		return location{}, fmt.Errorf("buffer id %d out of range", id)
	}
	b := pl.Buffers[id]
	root := b
	for root.AliasOf != planner.NoBuf {
		root = pl.Buffers[root.AliasOf]
	}
	if mp.training() && root.ID == pl.Input {
		return location{"arenaTrainInput", b.Offset - root.Offset}, nil
	}
	if mp.training() && root.ID == pl.Labels {
		return location{"arenaTrainLabels", b.Offset - root.Offset}, nil
	}
	if b.Arena == planner.ArenaState {
		if mp.training() {
			return location{"arenaState", b.Offset}, nil
		}
		if b.Kind == planner.KindParamBF16 {
			off, ok := g.trainParams[b.Name]
			if !ok {
				// (a KRSC twin is named so: one in another order has another name)
				return location{}, fmt.Errorf("inference plan's bfloat16 twin %s has no training counterpart (a bug in mlbuild's planner: the training plan gives the weight no twin, or one in another order)", b.Name)
			}
			return location{"arenaState", off}, nil
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
	if b.Arena == planner.ArenaFolded {
		return location{mp.work, foldedAt(pl) + b.Offset}, nil
	}
	return location{mp.work, b.Offset}, nil
}

// foldedAt is where an inference plan's folded weights (its folded arena,
// fold_batchnorm.go) begin in the program's work arena of that plan:
// after the plan's work buffers, aligned. Only the plan's own sequences
// touch that arena, and its fold sequence writes them when the weights
// changed (gpuhost.Program.EvalFolds), so they last between batches.
func foldedAt(pl *planner.Plan) int {
	return (pl.WorkSize + planner.Align - 1) / planner.Align * planner.Align
}

// workSize is the elements of the program's work arena of plan pl: its
// work buffers and then its folded weights.
func workSize(pl *planner.Plan) int {
	if pl.FoldedSize == 0 {
		return pl.WorkSize
	}
	return foldedAt(pl) + pl.FoldedSize
}

// residentKernels adds the kernels of device-resident training of the
// training plan tp to the library and returns the gpuhost.ResidentKernels
// literal naming them: for a text dataset, the kernels of windows of one
// stream of tokens (labels the next tokens one-hot, accuracy counted per
// position); otherwise of rows of inputs and labels.
func (g *gpuGen) residentKernels(tp *planner.Plan) (string, error) {
	B := tp.Batch
	in, labels := tp.Buffers[tp.Input].Size, tp.Buffers[tp.Labels].Size
	rows, classes := B, 0 // as countCorrect: argmax rows when prediction and labels have one shape
	if tp.Buffers[tp.Output].Size == labels {
		classes = labels / B
	}
	gx, gy := gpu.GatherKernel(B, in/B, in/B), gpu.GatherKernel(B, labels/B, labels/B)
	windows := 0
	if g.in.Model.Dataset.Format == "text" {
		// input [T] token ids, labels [T, V]: as the host's textSource
		T := in / B
		if T == 0 || labels%(B*T) != 0 || classes == 0 {
			return "", fmt.Errorf("emit: a text dataset's training plan has input %v and labels %v, not [T] ids and [T, V] next tokens", tp.Buffers[tp.Input].Shape, tp.Buffers[tp.Labels].Shape)
		}
		windows, rows, classes = T, B*T, labels/(B*T)
		gx, gy = gpu.GatherKernel(B, T, 1), gpu.WindowLabelsKernel(B, T, classes)
	}
	// one group: 256 threads, more up to 1024 so that none takes more
	// than 16 rows (a GPT's 16,384 positions)
	recordThreads := 256
	for recordThreads < 1024 && recordThreads*16 < rows {
		recordThreads *= 2
	}
	cp := gpu.CopyKernel(tp.StateSize)
	var names [5]string
	for i, k := range []struct {
		k    *gpu.Kernel
		kind string
	}{{gpu.AdvanceKernel(), "advance"}, {gx, "gather"}, {gy, "gather"},
		{gpu.RecordKernel(rows, classes, recordThreads), "record"}, {cp, "copy_state"}} {
		name, err := g.register(k.k, k.kind)
		if err != nil {
			return "", err
		}
		names[i] = name
	}
	win := ""
	if windows > 0 {
		win = fmt.Sprintf("Windows: %d,\n", windows)
	}
	return fmt.Sprintf("&gpuhost.ResidentKernels{\nAdvance: %q,\nGatherInput: %q, GatherLabels: %q, GatherGroups: [2]int{%d, %d}, GatherThreads: %d,\n%s"+
		"Record: %q, RecordThreads: %d,\nCopyState: %q, CopyGroups: %d, CopyThreads: %d,\n}",
		names[0], names[1], names[2], gx.Groups, gy.Groups, gx.Threadgroup, win, names[3], recordThreads, names[4], cp.Groups, cp.Threadgroup), nil
}

// renderMain writes main.go: the program's tables (sizes, kernel library,
// per-plan step tables), CPU reference functions and the model's meta.
func (g *gpuGen) renderMain(plans []*gpuPlan, copyName, resident string, replicas []*replicaPlan, dec *decodePlan, noDecode string) ([]byte, error) {
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

	if len(replicas) > 0 {
		g.p("func main() { gpuhost.MainReplicated(%s.OpenHostDevice, %s.%s, &program) }", g.dev.pkg, g.dev.pkg, g.dev.openReplicas)
	} else {
		g.p("func main() { gpuhost.Main(%s.OpenHostDevice, &program) }", g.dev.pkg)
	}
	g.p("")
	g.p("// program is the model's part of the GPU program; rt/gpuhost runs it.")
	g.p("var program = gpuhost.Program{")
	g.p("Meta: &meta,")
	g.p("Source: kernelSource,")
	g.p("Kernels: kernels,")
	g.p("// Arena sizes in float32 elements. The state arena is shared by all plans;")
	g.p("// each plan has its own work arena.")
	g.p("StateSize: %d,", tp.StateSize)
	for _, mp := range plans {
		folded := ""
		if mp.plan.FoldedSize > 0 {
			folded = fmt.Sprintf("; the folded weights %d from %d", mp.plan.FoldedSize, foldedAt(mp.plan))
		}
		g.p("%s: %d, // naive: %d%s", map[string]string{"t": "TrainWorkSize", "e": "EvalWorkSize", "o": "OneWorkSize"}[mp.prefix], workSize(mp.plan), mp.plan.NaiveWorkSize, folded)
	}
	for _, mp := range plans[1:] {
		if n := mp.plan.FoldSteps(); n > 0 {
			g.p("%sFolds: %d, // the inference's first steps fold its batch norms: run when the weights changed", map[string]string{"e": "Eval", "o": "One"}[mp.prefix], n)
		}
	}
	g.p("TrainInputSize: %d, // %s", tp.Buffers[tp.Input].Size, shapeText(tp.Buffers[tp.Input].Shape))
	g.p("TrainLabelsSize: %d, // %s", tp.Buffers[tp.Labels].Size, shapeText(tp.Buffers[tp.Labels].Shape))
	g.p("OutputSize: %d, // the training prediction, %s", outSize, shapeText(tp.Buffers[tp.Output].Shape))
	if layer := tokenLayer(tp); layer != "" {
		g.p("TokenLayer: %s, // its embedding: the host checks every id before the device reads it", quote(layer))
	}
	g.p("// Where the plans' inputs and outputs are (arena, element offset, elements).")
	g.p("TrainOutput: region{%s, %d, %d},", outLoc.arena, outLoc.off, outSize)
	g.p("TrainLoss: region{%s, %d, 1},", lossLoc.arena, lossLoc.off)
	for _, mp := range []*gpuPlan{e, o} {
		pl := mp.plan
		il, err := g.locate(mp, pl.Input)
		if err != nil {
			return nil, err
		}
		ol, err := g.locate(mp, pl.Output)
		if err != nil {
			return nil, err
		}
		name := map[string]string{"e": "Eval", "o": "One"}[mp.prefix]
		g.p("%sInput: region{%s, %d, %d},", name, il.arena, il.off, pl.Buffers[pl.Input].Size)
		g.p("%sOutput: region{%s, %d, %d},", name, ol.arena, ol.off, pl.Buffers[pl.Output].Size)
	}
	g.p("CopyOutput: op{Kernel: %q, Binds: []bind{{%s, %d, %d}, {arenaLogits, 0, %d}}, Groups: %d, Threadgroup: 256},",
		copyName, outLoc.arena, 4*outLoc.off, 4*outSize, 4*outSize, (outSize+255)/256)
	g.p("TrainForward: tForward, TrainBackward: tBackward, TrainUpdate: tUpdate,")
	g.p("EvalInfer: eInfer, OneInfer: oInfer,")
	g.p("GemmShapes: gemmShapes,")
	if err := g.renderTwins(t); err != nil {
		return nil, err
	}
	g.p("Resident: %s,", resident)
	if len(replicas) > 0 {
		if err := g.renderReplicaFields(replicas); err != nil {
			return nil, err
		}
	}
	if dec != nil {
		if err := g.renderDecodeFields(dec); err != nil {
			return nil, err
		}
	}
	g.p("}")
	g.p("")
	if noDecode != "" {
		g.p("// No KV cache: generate runs the whole forward pass a token (%s).", comment(noDecode))
		g.p("")
	}
	g.p("// Short names for the host's table types.")
	g.p("type (")
	g.p("bind = gpuhost.Bind")
	g.p("matrix = gpuhost.Matrix")
	g.p("gemmShape = gpuhost.GemmShape")
	g.p("gemmOp = gpuhost.GemmOp")
	g.p("op = gpuhost.Op")
	g.p("region = gpuhost.Region")
	g.p("step = gpuhost.PlanStep")
	g.p(")")
	g.p("")
	g.p("const (")
	arenas := []string{"State", "TrainWork", "EvalWork", "OneWork", "TrainInput", "TrainLabels", "Args", "Logits"}
	if dec != nil {
		arenas = append(arenas, "DecodeWork")
	}
	for _, a := range arenas {
		g.p("arena%s = gpuhost.Arena%s", a, a)
	}
	g.p(")")
	g.p("")
	g.p("var dropoutUniform = gpuhost.DropoutUniform")
	g.p("")
	g.p("// kernels lists every kernel of kernelSource with the bytes each buffer")
	g.p("// argument needs, so every kernel is loaded (and checked) at start.")
	g.p("var kernels = []gpuhost.KernelInfo{")
	for _, k := range g.lib.Kernels {
		var sizes []string
		for _, prm := range k.Params {
			sizes = append(sizes, strconv.Itoa(prm.Bytes()))
		}
		g.p("{Name: %q, ArgBytes: []int{%s}},", k.Name, strings.Join(sizes, ", "))
	}
	g.p("}")
	g.p("")

	phases := []struct {
		mp    *gpuPlan
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
		g.p("var %s%s = []step{", ph.mp.prefix, ph.name)
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
	if err := g.renderReplicaTables(replicas); err != nil {
		return nil, err
	}
	if dec != nil {
		if err := g.renderDecodeTables(dec, &refs); err != nil {
			return nil, err
		}
	}
	g.p("// gemmShapes are the distinct GEMMs of all plans, checked one by one")
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

	g.imports = []string{ModulePath + "/rt/gpuhost", ModulePath + "/" + g.dev.pkg}
	g.fileHeader(g.dev.backend, g.dev.about...)
	g.p("var dropoutRand = cpu.NewRand(1) // the evaluation-mode reference takes one; unused there")
	g.p("")
	g.sharedDecls("Constant shapes and element-wise chains of the reference steps.")
	g.buf.Write(body.Bytes())
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("emit: generated %s code does not parse (a bug in mlbuild): %v\n%s", g.dev.backend, err, g.buf.Bytes())
	}
	return src, nil
}

// renderStep returns a step's reference function and its planStep entry.
func (g *gpuGen) renderStep(mp *gpuPlan, short string, i int, st planner.Step, ops []gpu.Op, training bool) (string, string, error) {
	pl := mp.plan
	if mp.shares > 0 { // a replica's: its ops alone (selftest checks the program's own plan)
		opLits, err := g.opLiterals(mp, ops)
		if err != nil {
			return "", "", err
		}
		head := fmt.Sprintf("Name: %s, Layer: %s", quote(fmt.Sprintf("%s %d %s: %s", strings.ToLower(short), i, st.Layer, st.Kernel)), quote(st.Layer))
		return "", stepEntry(head, opLits), nil
	}
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
		return operand{param: fmt.Sprintf("%s[%d:%d]", refArena[loc.arena], loc.off, loc.off+b.Slots()), buf: b}, nil
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
	copies := widenStored(ins, outs)
	var body string
	var c stepCall
	var err error
	if st.Kernel == planner.KDropout && training && st.Attr.Rate > 0 {
		body, err = gpuDropoutRefCall(st, ins, outs)
	} else {
		body, err = g.cpu.kernelCall(st, ins, outs, training, &c)
	}
	if err != nil {
		return "", "", err
	}
	// Only the copies the reference uses: it takes no workspace, so the
	// library convolutions' KRSC filters and dW, which only the GPU's
	// lowering writes, are left out.
	var pre, post string
	for _, cp := range copies {
		if !strings.Contains(body, cp.v+"[") {
			continue
		}
		pre += cp.widen + "\n"
		if cp.narrow != "" {
			post += "\n" + cp.narrow
		}
	}
	if c.loss && post != "" {
		return "", "", fmt.Errorf("step %s of %s: a loss step writes a tensor stored in bfloat16 (a bug in mlbuild)", st.Kernel, st.Layer)
	}
	body = pre + body + post
	if !c.loss {
		body += "\nreturn 0"
	}
	if mp.decodeContext > 0 { // a decode step's reference computes position step
		body = fmt.Sprintf("dPos, dScores := step, make([]float32, %d)\n_, _ = dPos, dScores\n", mp.decodeContext) + body
	}
	note := comment(st.Layer) + ": " + string(st.Kernel)
	if len(st.Fused) > 0 {
		note += " (fused " + comment(strings.Join(st.Fused, " + ")) + ")"
	}
	ref := fmt.Sprintf("// %s is the CPU reference of %s.\nfunc %s(sa, wa, xa, ya []float32, lr float32, step int, seed uint32) float32 {\n%s\n}\n\n", fn, note, fn, body)

	// Regions selftest compares: the outputs, the optimizer's state and
	// batch norm's running statistics (updated in place), never the
	// convolution columns (a workspace whose layout differs by backend)
	// nor a pooling convolution's argmax: two outputs of a window that
	// round a little differently on the two devices may tie on one and
	// not the other, so the argmax may differ where the pooled values
	// agree; the pool's backward step is checked from the GPU's argmax.
	var check, checkBF16 []string
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
		if pl.Buffers[id].Elem == planner.ElemBF16 {
			checkBF16 = append(checkBF16, fmt.Sprintf("{%s, %d, %d}", loc.arena, loc.off, pl.Buffers[id].Size))
			return nil
		}
		check = append(check, fmt.Sprintf("{%s, %d, %d}", loc.arena, loc.off, pl.Buffers[id].Size))
		return nil
	}
	for k, id := range st.Out {
		if st.Kernel == planner.KConv2D && k >= 1 {
			continue
		}
		// The rows' losses of a softmax cross-entropy are the GPU's
		// scratch: the CPU reference sums in one pass.
		if st.Kernel == planner.KSoftmaxXent && k >= 2 {
			continue
		}
		// An inference batch norm's saved mean and 1/std feed no backward:
		// the GPU's kernel leaves them alone while the CPU reference fills
		// them, so they are not compared (selftest failed every batch-norm
		// spec on a discrete GPU by comparing them).
		if st.Kernel == planner.KBatchNorm && !training && k >= 1 {
			continue
		}
		// A channels-last batch norm's partial sums (Out[3]) are the
		// GPU's scratch: the CPU reference sums in one pass.
		if (st.Kernel == planner.KBatchNorm || st.Kernel == planner.KBatchNormBwd) && k >= 3 {
			continue
		}
		if err := addCheck(id); err != nil {
			return "", "", err
		}
	}
	for _, id := range updatedInputs(st, training) {
		if err := addCheck(id); err != nil {
			return "", "", err
		}
	}

	opLits, err := g.opLiterals(mp, ops)
	if err != nil {
		return "", "", err
	}
	head := fmt.Sprintf("Name: %s, Layer: %s, Ref: %s, Reduce: %d, Check: []region{%s}",
		quote(fmt.Sprintf("%s %d %s: %s", strings.ToLower(short), i, st.Layer, st.Kernel)), quote(st.Layer), fn, reduceLen(pl, st), strings.Join(check, ", "))
	if len(checkBF16) > 0 {
		head += fmt.Sprintf(", CheckBF16: []region{%s}", strings.Join(checkBF16, ", "))
	}
	// kernels that multiply on tensor tiles round their operands: selftest
	// widens the step's tolerance for it as for a fast GEMM
	for _, op := range ops {
		if op.Launch == nil || op.Launch.Precision == "" {
			continue
		}
		c, ok := gemmPrecisions[op.Launch.Precision]
		if !ok {
			return "", "", fmt.Errorf("kernel %s multiplies in precision %q, which rt/gpuhost does not name (a bug in mlbuild)", op.Launch.Kernel, op.Launch.Precision)
		}
		head += ", Precision: gpuhost." + c
		break
	}
	return ref, stepEntry(head, opLits), nil
}

// storedCopy is a float32 copy v that a step's CPU reference makes of
// a tensor the plan stores in bfloat16: the statement that widens it and,
// for an output, the one that narrows it back ("" for an input).
type storedCopy struct{ v, widen, narrow string }

// widenStored makes a step's CPU reference compute in float32 on the
// tensors the plan stores in bfloat16: one copy of each such operand's
// storage (once, where operands share it), widened (and in the order of
// its shape where it is stored channels last), at which it points the
// operands; an output's copy is stored back rounded to bfloat16 as the
// GPU's kernels round it.
func widenStored(ins, outs []operand) []storedCopy {
	var copies []storedCopy
	at := map[string]int{} // storage expression → index in copies
	for k, ops := range [][]operand{ins, outs} {
		for i := range ops {
			o := &ops[i]
			if o.param == "" || o.buf.Elem != planner.ElemBF16 {
				continue
			}
			j, ok := at[o.param]
			if !ok {
				j = len(copies)
				at[o.param] = j
				v := fmt.Sprintf("f%d", j)
				widen := fmt.Sprintf("%s := gpuhost.WidenBF16(%s, %d)", v, o.param, o.buf.Size)
				if s := o.buf.Shape; o.buf.Layout == planner.LayoutNHWC && len(s) == 4 {
					widen = fmt.Sprintf("%s := gpuhost.WidenBF16NHWC(%s, %d, %d, %d)", v, o.param, s[0], s[1], s[2]*s[3])
				}
				copies = append(copies, storedCopy{v: v, widen: widen})
			}
			cp := &copies[j]
			if k == 1 && cp.narrow == "" {
				cp.narrow = fmt.Sprintf("gpuhost.NarrowBF16(%s, %s)", o.param, cp.v)
				if s := o.buf.Shape; o.buf.Layout == planner.LayoutNHWC && len(s) == 4 {
					cp.narrow = fmt.Sprintf("gpuhost.NarrowBF16NHWC(%s, %s, %d, %d, %d)", o.param, cp.v, s[0], s[1], s[2]*s[3])
				}
			}
			o.param = cp.v
		}
	}
	return copies
}

// opLiterals renders a step's GPU ops.
func (g *gpuGen) opLiterals(mp *gpuPlan, ops []gpu.Op) ([]string, error) {
	var opLits []string
	for _, op := range ops {
		lit, err := g.opLiteral(mp, op)
		if err != nil {
			return nil, err
		}
		opLits = append(opLits, lit)
	}
	return opLits, nil
}

// stepEntry is a planStep literal of head's fields and ops.
func stepEntry(head string, opLits []string) string {
	if len(opLits) == 0 {
		return "{" + head + "},"
	}
	return "{" + head + ", Ops: []op{\n" + strings.Join(opLits, ",\n") + ",\n}},"
}

// updatedInputs are the inputs a step updates in place, which selftest
// compares with its outputs: an optimizer's state and, in training, batch
// norm's running statistics.
func updatedInputs(st planner.Step, training bool) []planner.BufID {
	switch {
	case st.Kernel == planner.KSGD || st.Kernel == planner.KAdam: // KAdamMulti's moments and KSGDMulti's velocities are among their outputs
		return st.In[1:]
	case st.Kernel == planner.KBatchNorm && training && len(st.In) >= 5:
		return st.In[3:5]
	}
	return nil
}

// opLiteral renders one GPU op as a gpuOp literal, byte offsets resolved.
func (g *gpuGen) opLiteral(mp *gpuPlan, op gpu.Op) (string, error) {
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
			es := elemBytes(mp.plan, b.Buf)
			binds = append(binds, fmt.Sprintf("{%s, %d, %d}", loc.arena, 4*loc.off+es*b.Offset, es*b.Size))
		}
		return fmt.Sprintf("{Kernel: %q, Binds: []bind{%s}, Groups: %d, Threadgroup: %d}", l.Kernel, strings.Join(binds, ", "), l.Groups, l.Threadgroup), nil
	}
	if op.Sum != nil { // a collective point of synchronised batch norm
		var binds []string
		for _, b := range op.Sum {
			loc, err := g.locate(mp, b.Buf)
			if err != nil {
				return "", err
			}
			binds = append(binds, fmt.Sprintf("{%s, %d, %d}", loc.arena, 4*(loc.off+b.Offset), 4*b.Size))
		}
		return fmt.Sprintf("{Binds: []bind{%s}, Sum: true}", strings.Join(binds, ", ")), nil
	}
	if op.Conv != nil {
		return g.convLiteral(mp, op.Conv)
	}
	gm := op.Gemm
	if gm == nil {
		return "", fmt.Errorf("an op with neither a launch, a GEMM nor a convolution")
	}
	mat := func(x gpu.Matrix) (string, error) {
		loc, err := g.locate(mp, x.Buf)
		if err != nil {
			return "", err
		}
		es := elemBytes(mp.plan, x.Buf)
		return fmt.Sprintf("matrix{%s, %d, %d}", loc.arena, 4*loc.off+es*x.Offset, es*x.LD), nil
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
	batch := ""
	if gm.Batch > 1 {
		batch = fmt.Sprintf(", Batch: %d", gm.Batch)
	}
	// An f32 GEMM names no precision (gpuhost's zero value), so f32
	// programs are what they were before precisions existed.
	if gm.Precision != "" {
		c, ok := gemmPrecisions[gm.Precision]
		if !ok {
			return "", fmt.Errorf("a GEMM in precision %q, which rt/gpuhost does not name (a bug in mlbuild)", gm.Precision)
		}
		batch += ", Precision: gpuhost." + c
	}
	shape := fmt.Sprintf("gemmShape{TransA: %v, TransB: %v, M: %d, N: %d, K: %d, Alpha: %s, Beta: %s%s}",
		gm.TransA, gm.TransB, gm.M, gm.N, gm.K, float(float64(gm.Alpha)), float(float64(gm.Beta)), batch)
	if !g.gemmSeen[shape] {
		g.gemmSeen[shape] = true
		g.gemmShapes = append(g.gemmShapes, shape)
	}
	// bfloat16 A and B (twins their producers wrote) say so; float32
	// GEMMs name no element type, as before twins existed.
	elem := ""
	switch gm.Elem {
	case "":
	case planner.ElemBF16:
		elem = ", Elem: gpuhost.ElemBF16"
	default:
		return "", fmt.Errorf("a GEMM of %q operands, which rt/gpuhost does not name (a bug in mlbuild)", gm.Elem)
	}
	if gm.Batch > 1 {
		return fmt.Sprintf("{Gemm: &gemmOp{Shape: %s, A: %s, B: %s, C: %s, MatrixBytes: [3]int{%d, %d, %d}%s}}", shape, a, b, c,
			elemBytes(mp.plan, gm.A.Buf)*gm.Stride[0], elemBytes(mp.plan, gm.B.Buf)*gm.Stride[1], 4*gm.Stride[2], elem), nil
	}
	return fmt.Sprintf("{Gemm: &gemmOp{Shape: %s, A: %s, B: %s, C: %s%s}}", shape, a, b, c, elem), nil
}

// convProducts are rt/gpuhost's constants of a library convolution's
// products (gpu.Conv.Product).
var convProducts = map[string]string{gpu.ConvForward: "ConvForward", gpu.ConvInputGrad: "ConvInputGrad", gpu.ConvWeightGrad: "ConvWeightGrad"}

// convLiteral renders a library convolution as a gpuhost.ConvOp literal,
// its tensors' byte offsets resolved.
func (g *gpuGen) convLiteral(mp *gpuPlan, c *gpu.Conv) (string, error) {
	product, ok := convProducts[c.Product]
	if !ok {
		return "", fmt.Errorf("a library convolution's product %q, which rt/gpuhost does not name (a bug in mlbuild)", c.Product)
	}
	var ts [3]string
	for i, b := range []gpu.Binding{c.X, c.W, c.Y} {
		loc, err := g.locate(mp, b.Buf)
		if err != nil {
			return "", err
		}
		if es := elemBytes(mp.plan, b.Buf); es != map[bool]int{false: 4, true: 2}[c.BF16] {
			return "", fmt.Errorf("a library convolution's tensor of %d-byte elements, want bfloat16 tensors: %v (a bug in mlbuild)", es, c.BF16)
		}
		es := elemBytes(mp.plan, b.Buf)
		ts[i] = fmt.Sprintf("bind{%s, %d, %d}", loc.arena, 4*loc.off+es*b.Offset, es*b.Size)
	}
	cg := c.Geom
	geom := fmt.Sprintf("gpuhost.ConvGeom{N: %d, C: %d, H: %d, W: %d, OC: %d, KH: %d, KW: %d, PH: %d, PW: %d, SH: %d, SW: %d, DH: %d, DW: %d, Groups: %d, OH: %d, OW: %d}",
		cg.N, cg.C, cg.H, cg.W, cg.OC, cg.KH, cg.KW, cg.PH, cg.PW, cg.SH, cg.SW, cg.DH, cg.DW, cg.Groups, cg.OH, cg.OW)
	extra := ""
	if c.Beta != 0 {
		extra += ", Beta: " + float(float64(c.Beta))
	}
	if c.BF16 {
		extra += ", Elem: gpuhost.ElemBF16"
	}
	if c.NHWC {
		extra += ", NHWC: true"
	}
	if c.Precision != "" {
		pc, ok := gemmPrecisions[c.Precision]
		if !ok {
			return "", fmt.Errorf("a library convolution in precision %q, which rt/gpuhost does not name (a bug in mlbuild)", c.Precision)
		}
		extra += ", Precision: gpuhost." + pc
	}
	for _, e := range []struct {
		name string
		b    *gpu.Binding
	}{{"Bias", c.Bias}, {"Z", c.Z}} {
		if e.b == nil {
			continue
		}
		loc, err := g.locate(mp, e.b.Buf)
		if err != nil {
			return "", err
		}
		es := elemBytes(mp.plan, e.b.Buf)
		extra += fmt.Sprintf(", %s: &bind{%s, %d, %d}", e.name, loc.arena, 4*loc.off+es*e.b.Offset, es*e.b.Size)
	}
	switch c.Act {
	case "":
	case "relu":
		extra += ", Act: gpuhost.ConvActReLU"
	default:
		return "", fmt.Errorf("a library convolution's epilogue with activation %q, which rt/gpuhost does not name (a bug in mlbuild)", c.Act)
	}
	return fmt.Sprintf("{Conv: &gpuhost.ConvOp{Geom: %s, Product: gpuhost.%s, X: %s, W: %s, Y: %s, Alpha: %s%s}}",
		geom, product, ts[0], ts[1], ts[2], float(float64(c.Alpha)), extra), nil
}

// elemBytes is the bytes of one element of buffer id: 2 for a bfloat16
// twin, else 4.
func elemBytes(p *planner.Plan, id planner.BufID) int {
	if id >= 0 && int(id) < len(p.Buffers) && p.Buffers[id].Elem == planner.ElemBF16 {
		return 2
	}
	return 4
}

// gemmPrecisions are rt/gpuhost's constants of the plan's fast
// precisions (planner's Attr.Precision).
var gemmPrecisions = map[string]string{
	planner.PrecisionBF16: "PrecisionBF16",
	planner.PrecisionTF32: "PrecisionTF32",
}

// reduceLen is the longest sum behind one output element of a step, which
// scales selftest's tolerance: float32 rounding grows with it. A step whose
// GEMMs run in bf16 or tf32 (their gemmShape's Precision) is compared with
// its float32 CPU reference within a tolerance that rt/gpuhost widens from
// this same length: u·sqrt(reduceLen) of the outputs' scale, u = 2^-8 for
// bf16 and 2^-11 for tf32 (rt/gpuhost's tolerance, where it is argued).
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
	case planner.KMaxPool2D, planner.KAvgPool2D, planner.KMaxPool2DBwd, planner.KMaxPool2DArgmaxBwd, planner.KAvgPool2DBwd:
		if c := st.Attr.Conv; c != nil {
			r = c.KH * c.KW
		}
	case planner.KSoftmaxXent, planner.KMSE, planner.KMAE, planner.KHuber, planner.KBatchNorm, planner.KBatchNormBwd,
		planner.KGlobalAvgPool, planner.KGlobalAvgPoolBwd, planner.KLayerNorm, planner.KLayerNormBwd, planner.KReduceMean:
		r = size(0, st.In)
	case planner.KClipGradNorm: // the norm sums every gradient
		r = 0
		for k := range st.In {
			r += size(k, st.In)
		}
	case planner.KEmbeddingBwd: // a table row sums the dy rows of its id, up to every row
		r = size(0, st.In)
	case planner.KBinaryBwd: // a and b may be NoBuf (keep_less.go): dy's size bounds the sums
		r = size(2, st.In)
	case planner.KSoftmax, planner.KLogSoftmax, planner.KSoftmaxBwd, planner.KLogSoftmaxBwd:
		if s := shape(0, st.In); st.Attr.Axis < len(s) {
			r = s[st.Attr.Axis]
		}
	case planner.KAttention, planner.KAttentionBwd: // a score sums D products, an output (or gradient) every key's or query's term
		q, kt, _, _ := planner.AttentionHeadShapes(shape(0, st.In), shape(1, st.In), shape(2, st.In), st.Attr.Perm)
		for _, s := range [][]int{q, kt} {
			for _, d := range s[max(len(s)-2, 0):] {
				r = max(r, d)
			}
		}
	}
	return r
}

// renderTwins writes the Program's BF16Twins: the training plan's weights
// with bfloat16 twins, which the host writes whenever it writes the
// state (none, and no line, in a program without them), a filter's KRSC
// twin with its geometry.
func (g *gpuGen) renderTwins(t *gpuPlan) error {
	pl := t.plan
	var lits []string
	for _, tw := range pl.Twins {
		if pl.Buffers[tw.Twin].Kind != planner.KindParamBF16 {
			continue
		}
		of, err := g.locate(t, tw.Of)
		if err != nil {
			return err
		}
		twin, err := g.locate(t, tw.Twin)
		if err != nil {
			return err
		}
		order := ""
		if b := pl.Buffers[tw.Twin]; b.Layout == planner.LayoutNHWC && len(b.Shape) == 4 { // a filter's KRSC twin (store_channels_last.go)
			order = fmt.Sprintf(", KRSC: [3]int{%d, %d, %d}", b.Shape[0], b.Shape[1], b.Shape[2]*b.Shape[3])
		}
		lits = append(lits, fmt.Sprintf("{Of: region{%s, %d, %d}, Offset: %d%s}, // %s", of.arena, of.off, pl.Buffers[tw.Of].Size, twin.off, order, comment(pl.Buffers[tw.Twin].Name)))
	}
	if len(lits) == 0 {
		return nil
	}
	g.p("// The weights' bfloat16 twins, which the bf16 GEMMs read.")
	g.p("BF16Twins: []gpuhost.BF16Twin{")
	for _, l := range lits {
		g.p("%s", l)
	}
	g.p("},")
	return nil
}
