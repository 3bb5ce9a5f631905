package planner

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints p for people: the steps of each phase (kernel, layer,
// shapes in and out, FLOPs), the buffers with their arena offsets, the
// fusion decisions, the dense steps' precisions when the plan asks for
// another than f32, and the totals per training step. The output depends
// only on the plan, so it can be kept as a golden file.
func WriteText(w io.Writer, p *Plan) error {
	ew := &errWriter{w: w}
	mode := "inference"
	if p.Training {
		mode = "training"
	}
	fusion := "off"
	if p.Fusion {
		fusion = "on"
	}
	// A plan in another precision than f32 names it, and each
	// matrix-product step's (gemm, gemm_bwd, conv2d, conv2d_bwd); f32
	// plans print as they did before precisions existed.
	mixed := p.Precision != "" && p.Precision != PrecisionF32
	precision := ""
	if mixed {
		precision = ", precision " + p.Precision
	}
	batch := fmt.Sprintf("batch %d", p.Batch)
	if p.Accumulate > 1 {
		batch = fmt.Sprintf("batch %d×%d accumulated (%d a step)", p.Accumulate, p.Batch, p.Accumulate*p.Batch)
	}
	ew.printf("plan %s: %s, %s, fusion %s%s\n", p.Model, batch, mode, fusion, precision)
	ew.printf("input %s, output %s", p.Buffers[p.Input].Name, p.Buffers[p.Output].Name)
	if p.Loss != NoBuf {
		ew.printf(", labels %s, loss %s", p.Buffers[p.Labels].Name, p.Buffers[p.Loss].Name)
	}
	ew.printf("\n")
	for _, ph := range []struct {
		name  string
		steps Phase
	}{{"forward", p.Forward}, {"backward", p.Backward}, {"update", p.Update}} {
		if len(ph.steps) == 0 {
			continue
		}
		ew.printf("\n%s (%d steps)\n", ph.name, len(ph.steps))
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight*0)
		fmt.Fprintf(tw, "  #\tkernel\tlayer\tin -> out\tflops\tbytes\n")
		for i, s := range ph.steps {
			layer := s.Layer
			if len(s.Fused) > 1 {
				layer = strings.Join(s.Fused, "+")
			}
			kernel := string(s.Kernel)
			a := stepAttr(s, mixed)
			if p.ChannelsLastOperand(s) != NoBuf { // its layout, where a tensor it names is stored channels last
				a = strings.TrimSpace(a + " nhwc")
			}
			if a != "" {
				kernel += "(" + a + ")"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s -> %s\t%s\t%s\n", i, kernel, layer,
				operandShapes(p, s.In), operandShapes(p, s.Out), human(s.FLOPs, ""), human(s.Bytes, "B"))
		}
		tw.Flush()
	}
	ew.printf("\nbuffers (%d; offset and size in float32 elements, 4 bytes each)\n", len(p.Buffers))
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  id\tname\tkind\tshape\tarena\toffset\tsize\n")
	for _, b := range p.Buffers {
		where := fmt.Sprint(b.Offset)
		if b.AliasOf != NoBuf {
			where += " (view of " + p.Buffers[b.AliasOf].Name + ")"
		}
		kind := string(b.Kind)
		if b.Layout != "" {
			kind += " " + b.Layout
		}
		if b.Elem != "" {
			kind += " " + b.Elem // a twin: Slots() places of 4 bytes
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%d\n", b.ID, b.Name, kind, shapeString(b.Shape), b.Arena, where, b.Slots())
	}
	tw.Flush()
	if len(p.Fusions) > 0 {
		ew.printf("\nfusions (%d)\n", len(p.Fusions))
		for _, f := range p.Fusions {
			ew.printf("  %s\n", f)
		}
	}
	if len(p.Methods) > 0 {
		ew.printf("\nconvolution methods\n")
		for _, m := range p.Methods {
			ew.printf("  %s\n", m)
		}
	}
	if mixed {
		dense, other := 0, len(p.Precisions)
		for _, ph := range []Phase{p.Forward, p.Backward} {
			for _, s := range ph {
				if gemmBacked(s.Kernel) || s.Attr.Precision != "" {
					dense++
				}
			}
		}
		ew.printf("\nprecision: %d of %d matrix-product steps in %s\n", dense-other, dense, p.Precision)
		for _, l := range p.Precisions {
			ew.printf("  %s\n", l)
		}
	}
	if len(p.Twins) > 0 {
		ew.printf("\nbf16 operands (%d twins: the GEMMs read bfloat16 that the value's producer writes beside it)\n", len(p.Twins))
		for _, t := range p.Twins {
			ew.printf("  %s\n", t.Note)
		}
	}
	if len(p.Stored) > 0 {
		ew.printf("\nbf16 storage: %s\n", p.StoredNote)
	}
	st := p.Stats()
	ew.printf("\ntotals per %s step\n", map[bool]string{true: "training", false: "inference"}[p.Training])
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  \tsteps\tflops\tbytes moved\n")
	fmt.Fprintf(tw, "  forward\t%d\t%d\t%d\n", st.ForwardSteps, st.ForwardFLOPs, st.ForwardBytes)
	if st.FoldSteps > 0 {
		fmt.Fprintf(tw, "  fold (when the weights change)\t%d\t%d\t%d\n", st.FoldSteps, st.FoldFLOPs, st.FoldBytes)
	}
	if p.Training {
		fmt.Fprintf(tw, "  backward\t%d\t%d\t%d\n", st.BackwardSteps, st.BackwardFLOPs, st.BackwardBytes)
		fmt.Fprintf(tw, "  update\t%d\t%d\t%d\n", st.UpdateSteps, st.UpdateFLOPs, st.UpdateBytes)
		fmt.Fprintf(tw, "  total\t%d\t%d\t%d\n", st.ForwardSteps+st.BackwardSteps+st.UpdateSteps, st.TotalFLOPs, st.TotalBytes)
	}
	tw.Flush()
	ew.printf("params: %d in %d tensors\n", st.Params, st.ParamTensors)
	saved := 0.0
	if st.NaiveWorkBytes > 0 {
		saved = 100 * (1 - float64(st.PeakWorkBytes)/float64(st.NaiveWorkBytes))
	}
	folded := ""
	if st.FoldedBytes > 0 {
		folded = ", folded " + formatBytes(st.FoldedBytes)
	}
	ew.printf("memory: state %s%s, work %s peak vs %s naive (%.1f%% saved)\n",
		formatBytes(st.StateBytes), folded, formatBytes(st.PeakWorkBytes), formatBytes(st.NaiveWorkBytes), saved)
	writeMemory(ew, p)
	return ew.err
}

// writeMemory prints where the plan's memory goes (Plan.Memory).
func writeMemory(ew *errWriter, p *Plan) {
	m := p.Memory()
	ew.printf("\nmemory by use\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	row := func(what string, n int64) { fmt.Fprintf(tw, "  %s\t%s\n", what, formatBytes(n)) }
	row("weights (params and statistics)", m.Weights)
	if p.Training {
		row("gradients of the weights", m.Gradients)
		row("optimizer state", m.Optimizer)
	}
	if pad := m.Total - m.Work - m.Folded - m.Weights - m.Gradients - m.Optimizer; pad > 0 {
		row("alignment between state buffers", pad)
	}
	if m.Folded > 0 {
		row("folded weights (batch norms in their layers)", m.Folded)
	}
	fmt.Fprintf(tw, "  work arena\t%s, at its fullest in %s step %d (%s):\n", formatBytes(m.Work), m.PeakPhase, m.PeakStep, m.PeakLayer)
	if p.Training {
		row("  activations kept for backward", m.KeptForBackward)
		row("  other activations", m.Activations)
		row("  gradients of activations", m.ActivationGrads)
	} else {
		row("  activations", m.Activations)
	}
	row("  workspace (scratch)", m.Scratch)
	row("  free (gaps and alignment)", m.Work-m.KeptForBackward-m.Activations-m.ActivationGrads-m.Scratch)
	row("peak (state and work arenas"+map[bool]string{true: " and folded weights", false: ""}[m.Folded > 0]+")", m.Total)
	tw.Flush()
}

// stepAttr prints the attributes that tell steps of one kernel apart;
// with precision, a matrix-product step's precision too.
func stepAttr(s Step, precision bool) string {
	a := s.Attr
	var parts []string
	if s.Kernel == KBatchNorm && len(s.In) > 5 {
		parts = append(parts, "+ residual") // fuse_norm_sum.go: act(bn(x) + z)
	}
	if s.Kernel == KUnaryBwd && len(s.In) > 2 {
		parts = append(parts, "of dy + dy2") // fuse_accumulate_act.go
	}
	if a.Act != "" {
		switch {
		case s.Kernel == KMaxPool2DBwd || s.Kernel == KMaxPool2DArgmaxBwd:
			parts = append(parts, a.Act+"'")
		case a.ActApplied:
			parts = append(parts, a.Act+" (derivative applied by the pool)")
		default:
			parts = append(parts, a.Act)
		}
	}
	if a.Conv != nil {
		g := a.Conv
		if g.OneD {
			parts = append(parts, fmt.Sprintf("1-D k%d s%d p%d", g.KW, g.SW, g.PW))
		} else {
			parts = append(parts, fmt.Sprintf("k%dx%d s%d p%d", g.KH, g.KW, g.SH, g.PH))
		}
	}
	if a.Method != "" {
		parts = append(parts, a.Method)
	}
	if precision && a.Precision != "" {
		parts = append(parts, a.Precision)
	}
	if g := a.Pool; g != nil {
		parts = append(parts, fmt.Sprintf("maxpool k%dx%d s%d", g.KH, g.KW, g.SH))
	}
	if a.AccumulateDx {
		parts = append(parts, "dx +=")
	}
	if a.KeptCols {
		parts = append(parts, "forward's workspace")
	}
	if len(a.Chain) > 0 {
		parts = append(parts, strings.Join(ChainOps(a.Chain), ","))
	}
	if a.FromOutput {
		parts = append(parts, "from y")
	}
	if a.BinOp != "" {
		parts = append(parts, a.BinOp)
	}
	if a.Perm != nil {
		parts = append(parts, fmt.Sprint(a.Perm))
	}
	if s.Kernel == KSoftmax || s.Kernel == KLogSoftmax || s.Kernel == KConcat || s.Kernel == KConcatBwd ||
		s.Kernel == KSoftmaxBwd || s.Kernel == KLogSoftmaxBwd {
		parts = append(parts, fmt.Sprintf("axis %d", a.Axis))
	}
	if a.Causal {
		parts = append(parts, "causal")
	}
	if a.Padding {
		parts = append(parts, fmt.Sprintf("padding id %d", a.PadID))
	}
	if s.Kernel == KAttention || s.Kernel == KAttentionBwd {
		parts = append(parts, fmt.Sprintf("scale %.4g", a.Scale))
		if a.Rate > 0 {
			parts = append(parts, fmt.Sprintf("dropout %g", a.Rate))
		}
	}
	if a.Mode != "" {
		parts = append(parts, a.Mode)
	}
	if a.AlignCorners {
		parts = append(parts, "align corners")
	}
	if s.Kernel == KSlice || s.Kernel == KSliceBwd {
		parts = append(parts, fmt.Sprintf("axis %d from %d", a.Axis, a.Start))
	}
	if s.Kernel == KClipGradNorm {
		parts = append(parts, fmt.Sprintf("to norm %g", a.ClipNorm))
	}
	if s.Kernel == KGradMean {
		parts = append(parts, fmt.Sprintf("scale 1/%.4g", 1/a.Scale))
	}
	if a.Decoupled {
		parts = append(parts, "decoupled")
		switch {
		case a.Decays != nil:
			parts = append(parts, fmt.Sprintf("decay %v", a.Decays))
		case a.WeightDecay != 0:
			parts = append(parts, fmt.Sprintf("decay %g", a.WeightDecay))
		default:
			parts = append(parts, "no decay")
		}
	}
	return strings.Join(parts, " ")
}

// operandShapes prints the shapes of a step's operands; "-" for NoBuf.
func operandShapes(p *Plan, ids []BufID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		if id == NoBuf {
			parts[i] = "-"
		} else {
			parts[i] = shapeString(p.Buffers[id].Shape)
		}
	}
	return strings.Join(parts, " ")
}

// human prints n with a decimal SI prefix (1.5M), exact below 1000.
func human(n int64, unit string) string {
	f := float64(n)
	for _, pre := range []string{"", "k", "M", "G", "T"} {
		if f < 1000 || pre == "T" {
			if pre == "" {
				return fmt.Sprintf("%d%s", n, unit)
			}
			return fmt.Sprintf("%.1f%s%s", f, pre, unit)
		}
		f /= 1000
	}
	return ""
}

// errWriter keeps the first write error so printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
