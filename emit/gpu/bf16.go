package gpu

import (
	"fmt"
	"strings"

	"github.com/mlbuild/mlbuild/planner"
)

// BF16Twins are the bfloat16 twins this package's lowerings write (the
// planner's Target.BF16 of a backend whose GEMMs read bfloat16 operands):
// the output of layer norm and of an element-wise chain (a GPT's GELU),
// and in the backward the dx of an element-wise chain's and of a
// dropout's backward (a dense layer's incoming gradient), by their
// kernels beside the float32 output, and every param an SGD or Adam step
// updates, by the update kernel beside the float32 param. A GEMM whose A
// and B both have twins reads the twins (dense's forward and backward).
var BF16Twins = &planner.BF16Twins{
	Producers: map[planner.Kernel][]int{planner.KLayerNorm: {0}, planner.KUnary: {0}, planner.KUnaryBwd: {0}, planner.KDropoutBwd: {0}},
	Updates:   map[planner.Kernel]bool{planner.KSGD: true, planner.KAdam: true, planner.KAdamMulti: true},
}

// twin is the bfloat16 twin of buf's storage in the plan, or NoBuf.
func (l *lowering) twin(buf planner.BufID) planner.BufID {
	if buf == planner.NoBuf {
		return planner.NoBuf
	}
	return l.p.TwinOf(buf)
}

// withTwins returns k with a BF16 parameter after its others for each
// buffer named in bufs (the name followed by "b", in bufs' order, as
// large as the buffer), and every store to such a buffer also writes the
// value, rounded to bfloat16, to the same index of its twin: an update
// kernel that keeps a weight's twin current. The value is computed once,
// into a local.
func withTwins(k *Kernel, bufs []string) *Kernel {
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
	out.Body = twinStores(k.Body, twin)
	out.Doc += ", and " + fmtList(bufs) + " in bfloat16"
	return &out
}

// twinStores copies ss with every store to a buffer of twin followed by
// the same value's bfloat16 store to its twin.
func twinStores(ss []Stmt, twin map[string]string) []Stmt {
	var out []Stmt
	for _, s := range ss {
		switch s := s.(type) {
		case Store:
			tb, ok := twin[s.Buf]
			if !ok {
				out = append(out, s)
				continue
			}
			v := "mlb_t_" + s.Buf
			out = append(out, let(v, Float, s.Value), store(s.Buf, s.Index, vr(v)), storeBF16(tb, s.Index, vr(v)))
		case Store4:
			tb, ok := twin[s.Buf]
			if !ok {
				out = append(out, s)
				continue
			}
			var vals [4]Expr
			for c, e := range s.Values {
				v := fmt.Sprintf("mlb_t%d_%s", c, s.Buf)
				out = append(out, let(v, Float, e))
				vals[c] = vr(v)
			}
			out = append(out, Store4{s.Buf, s.Index, vals})
			for c := range vals {
				out = append(out, storeBF16(tb, add(s.Index, i32(c)), vals[c]))
			}
		case If:
			s.Then, s.Else = twinStores(s.Then, twin), twinStores(s.Else, twin)
			out = append(out, s)
		case For:
			s.Body = twinStores(s.Body, twin)
			out = append(out, s)
		default:
			out = append(out, s)
		}
	}
	return out
}

// fmtList joins names with commas.
func fmtList(names []string) string { return strings.Join(names, ", ") }
