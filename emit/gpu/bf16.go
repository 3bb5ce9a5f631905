package gpu

import (
	"fmt"
	"strings"

	"github.com/mlbuild/mlbuild/planner"
)

// BF16Twins are the bfloat16 twins this package's lowerings write (the
// planner's Target.BF16 of a backend whose GEMMs read bfloat16 operands):
// the output of layer norm, of an element-wise chain (a GPT's GELU) and
// of the fused attention (o, which a GPT's proj reads), and in the
// backward the dx of an element-wise chain's and of a dropout's backward
// (a dense layer's incoming gradient), dq, dk and dv of the fused
// attention's backward (q's, k's and v's) and the loss's gradient of
// softmax cross-entropy (the head's), by their kernels beside the
// float32 output, and every param an SGD or Adam step updates, by the
// update kernel beside the float32 param. A GEMM whose A and B both have
// twins reads the twins (dense's forward and backward).
var BF16Twins = &planner.BF16Twins{
	Producers: map[planner.Kernel][]int{planner.KLayerNorm: {0}, planner.KUnary: {0}, planner.KUnaryBwd: {0}, planner.KDropoutBwd: {0},
		planner.KAttention: {0}, planner.KAttentionBwd: {0, 1, 2}, planner.KSoftmaxXent: {1}},
	Updates: map[planner.Kernel]bool{planner.KSGD: true, planner.KAdam: true, planner.KAdamMulti: true, planner.KSGDMulti: true},
}

// twin is the bfloat16 twin of buf's storage in the plan, or NoBuf.
func (l *lowering) twin(buf planner.BufID) planner.BufID {
	if buf == planner.NoBuf {
		return planner.NoBuf
	}
	return l.p.TwinOf(buf)
}

// twinOut is a kernel parameter and the plan buffer bound to it.
type twinOut struct {
	param string
	buf   planner.BufID
}

// withOutputTwins returns k and its operands ops with a bfloat16 twin
// written beside each output of outs whose buffer has one in the plan
// (withTwins: the twins' parameters after k's others, in outs' order),
// and k and ops unchanged where none has. It is an error for k to have
// no parameter of an output's name.
func (l *lowering) withOutputTwins(k *Kernel, ops []operand, outs ...twinOut) (*Kernel, []operand, error) {
	var names []string
	for _, o := range outs {
		if tw := l.twin(o.buf); present(tw) {
			names = append(names, o.param)
			ops = append(ops, whole(tw))
		}
	}
	if len(names) == 0 {
		return k, ops, nil
	}
	tk := withTwins(k, names)
	if len(tk.Params) != len(k.Params)+len(names) {
		return nil, nil, fmt.Errorf("kernel %q: the outputs %v to write in bfloat16 are not all its parameters", k.Doc, names)
	}
	return tk, ops, nil
}

// withTwins returns k with a BF16 parameter after its others for each
// buffer named in bufs (the name followed by "b", in bufs' order, as
// large as the buffer), and every store to such a buffer also writes the
// value, rounded to bfloat16, to the same index of its twin: an update
// kernel that keeps a weight's twin current. The value is computed once,
// into a local.
func withTwins(k *Kernel, bufs []string) *Kernel { return withTwinsAt(k, bufs, nil) }

// withTwinsAt is withTwins with twins in another order than their
// buffers: a store of index i to a buffer b of at writes its twin at
// at[b](i) (a filter's KRSC twin: krscOfKCRS), to the same index where
// at has no b.
func withTwinsAt(k *Kernel, bufs []string, at map[string]func(Expr) Expr) *Kernel {
	out := *k
	twin := map[string]string{}
	out.Params = append([]Param(nil), k.Params...)
	for _, b := range bufs {
		for _, p := range k.Params {
			if p.Name == b {
				twin[b] = b + "b"
				out.Params = append(out.Params, outBF16(b+"b", p.Size))
			}
		}
	}
	var n int
	out.Body = twinStores(k.Body, twin, at, &n)
	out.Doc += ", and " + fmtList(bufs) + " in bfloat16"
	return &out
}

// twinStores copies ss with every store to a buffer of twin followed by
// the same value's bfloat16 store to its twin, at the same index or,
// for a buffer of at, at at[buffer](index); n counts the locals that
// hold the stored values, so that each has its own name (a kernel may
// store to a buffer many times in one block: the fused attention's
// unrolled fragments).
func twinStores(ss []Stmt, twin map[string]string, at map[string]func(Expr) Expr, n *int) []Stmt {
	place := func(buf string, i Expr) Expr {
		if f := at[buf]; f != nil {
			return f(i)
		}
		return i
	}
	var out []Stmt
	for _, s := range ss {
		switch s := s.(type) {
		case Store:
			tb, ok := twin[s.Buf]
			if !ok {
				out = append(out, s)
				continue
			}
			v := fmt.Sprintf("mlb_t%d_%s", *n, s.Buf)
			*n++
			out = append(out, let(v, Float, s.Value), store(s.Buf, s.Index, vr(v)), storeBF16(tb, place(s.Buf, s.Index), vr(v)))
		case Store4:
			tb, ok := twin[s.Buf]
			if !ok {
				out = append(out, s)
				continue
			}
			var vals [4]Expr
			for c, e := range s.Values {
				v := fmt.Sprintf("mlb_t%d_%s", *n, s.Buf)
				*n++
				out = append(out, let(v, Float, e))
				vals[c] = vr(v)
			}
			out = append(out, Store4{s.Buf, s.Index, vals})
			for c := range vals {
				out = append(out, storeBF16(tb, place(s.Buf, add(s.Index, i32(c))), vals[c]))
			}
		case If:
			s.Then, s.Else = twinStores(s.Then, twin, at, n), twinStores(s.Else, twin, at, n)
			out = append(out, s)
		case For:
			s.Body = twinStores(s.Body, twin, at, n)
			out = append(out, s)
		default:
			out = append(out, s)
		}
	}
	return out
}

// fmtList joins names with commas.
func fmtList(names []string) string { return strings.Join(names, ", ") }

// BF16Storage are the kernels whose lowerings read and write activations
// and gradients that a bf16 plan stores in bfloat16 (the planner's
// Target.BF16Storage): every buffer access of their kernels is a Load,
// Load4, Store or Store4 of a parameter, which launch rewrites to
// bfloat16 for each parameter bound to such a buffer (storedBF16). They
// are the kernels around a convolutional network's library
// convolutions: batch norm, activations, sums, the gradient sums and the
// global average pool, forward and backward.
var BF16Storage = &planner.BF16Storage{
	Kernels: map[planner.Kernel]bool{planner.KBatchNorm: true, planner.KBatchNormBwd: true, planner.KUnary: true, planner.KUnaryBwd: true,
		planner.KBinary: true, planner.KBinaryBwd: true, planner.KAccumulate: true, planner.KGlobalAvgPool: true, planner.KGlobalAvgPoolBwd: true,
		planner.KCast: true},
	Library: ConvLibraryMethod,
	// The direct convolution (an image model's first layer) indexes x
	// and y in either layout (directLayouts), and launch rewrites its
	// loads and stores like the others': CIFAR ResNet-18's stem then
	// writes the bfloat16 channels-last tensor its batch norm reads,
	// which read the float32 NCHW one a float a channel (the stem's
	// batch norm backward took 144 µs, docs/runs/gpu-thirteenth-2026-11-30.txt).
	Direct: ConvDirectMethod,
	// cuDNN's convolutions are faster on channels-last tensors (1.58 ms
	// a CIFAR ResNet-18 step with KRSC filters against 2.79 on NCHW ones,
	// PyTorch's calls on an H200: docs/runs/gpu-conv-layouts-2026-11-30.txt):
	// the batch norm and global pool kernels of kernels_nhwc.go take them.
	BatchNormScratch: BatchNormScratch,
	// A projection's forward and weight gradient on a copy of its
	// sampled pixels (conv_library.go).
	Sampled: SampledConv,
}

// storedBF16 returns k with each float parameter named in names holding
// bfloat16 elements: its loads read bfloat16 (LoadBF16; a Load4 becomes
// a Load4BF16) and its stores round to bfloat16 (StoreBF16; a Store4
// becomes a Store4BF16), so that a kernel written for float32 reads and writes a buffer
// the plan stores in bfloat16, and computes in float32 as before. It is
// an error for a name to be no float parameter of k.
func storedBF16(k *Kernel, names []string) (*Kernel, error) {
	out := *k
	out.Params = append([]Param(nil), k.Params...)
	set := map[string]bool{}
	for _, n := range names {
		found := false
		for i, p := range out.Params {
			if p.Name == n && p.Elem == Float {
				out.Params[i].Elem, found = BF16, true
			}
		}
		if !found {
			return nil, fmt.Errorf("kernel %q: %s is no float parameter, so it cannot hold bfloat16 (a bug in mlbuild)", k.Doc, n)
		}
		set[n] = true
	}
	out.Body = rewriteStmts(storesBF16(k.Body, set), func(e Expr) Expr {
		if l, ok := e.(Load); ok && set[l.Buf] {
			return LoadBF16(l)
		}
		return e
	})
	out.Doc += ", " + fmtList(names) + " in bfloat16 memory"
	return &out, nil
}

// storesBF16 copies ss with every store to a buffer of set a StoreBF16,
// and every Load4 or Store4 of one a Load4BF16 or Store4BF16 (8 bytes
// where 16 were).
func storesBF16(ss []Stmt, set map[string]bool) []Stmt {
	var out []Stmt
	for _, s := range ss {
		switch s := s.(type) {
		case Store:
			if set[s.Buf] {
				out = append(out, storeBF16(s.Buf, s.Index, s.Value))
				continue
			}
		case Load4:
			if set[s.Buf] {
				out = append(out, Load4BF16(s))
				continue
			}
		case Store4:
			if set[s.Buf] {
				out = append(out, Store4BF16(s))
				continue
			}
		case If:
			s.Then, s.Else = storesBF16(s.Then, set), storesBF16(s.Else, set)
			out = append(out, s)
			continue
		case For:
			s.Body = storesBF16(s.Body, set)
			out = append(out, s)
			continue
		}
		out = append(out, s)
	}
	return out
}
