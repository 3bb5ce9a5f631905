package gpuhosttest

import (
	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// Kernel is one kernel of the suite: its definition in emit/gpu's IR (one
// definition for every GPU language), what it touches, and a Go reference
// for fakes that simulate kernels in Go rather than compile them.
type Kernel struct {
	IR   *gpu.Kernel
	Info gpuhost.KernelInfo
	// Reference runs the kernel over its whole grid on bufs, one float32
	// slice per parameter starting at the bound offset.
	Reference func(bufs [][]float32)
}

// The suite's kernel sizes.
const (
	saxpyN     = 1000
	sumBlocks  = 4
	sumPerBlk  = 1024
	sumThreads = 256
	accN       = 256
)

func in(name string, n int) gpu.Param { return gpu.Param{Name: name, Elem: gpu.Float, Size: n} }
func out(name string, n int) gpu.Param {
	return gpu.Param{Name: name, Elem: gpu.Float, Mutable: true, Size: n}
}

func lit(v int) gpu.Expr { return gpu.IntLit{V: int64(v)} }

var (
	gid  gpu.Expr = gpu.Builtin{Kind: gpu.GlobalID}
	lid  gpu.Expr = gpu.Builtin{Kind: gpu.LocalID}
	tgid gpu.Expr = gpu.Builtin{Kind: gpu.GroupID}
)

func bin(op gpu.BinOp, l, r gpu.Expr) gpu.Expr { return gpu.Binary{Op: op, L: l, R: r} }

// Kernels returns the suite's kernels: saxpy (y = a·x + y over 1000
// elements, a guarded partial last block), a block sum with shared memory
// and barriers (4 blocks of 256 threads, each summing 1024 values), and
// acc += x (the replay check).
func Kernels() []Kernel {
	saxpy := &gpu.Kernel{
		Name: "conf_saxpy", Doc: "y = a[0]*x + y", Threadgroup: 128, Groups: (saxpyN + 127) / 128,
		Params: []gpu.Param{in("x", saxpyN), out("y", saxpyN), in("a", 1)},
		Body: []gpu.Stmt{
			gpu.If{Cond: bin(gpu.OpLt, gid, lit(saxpyN)), Then: []gpu.Stmt{
				gpu.Store{Buf: "y", Index: gid, Value: bin(gpu.OpAdd,
					bin(gpu.OpMul, gpu.Load{Buf: "a", Index: lit(0)}, gpu.Load{Buf: "x", Index: gid}),
					gpu.Load{Buf: "y", Index: gid})},
			}},
		},
	}
	sum := &gpu.Kernel{
		Name: "conf_block_sum", Doc: "out[b] = sum of x[b*1024 : (b+1)*1024]", Threadgroup: sumThreads, Groups: sumBlocks,
		Params: []gpu.Param{in("x", sumBlocks*sumPerBlk), out("out", sumBlocks)},
		Body: []gpu.Stmt{
			gpu.Shared{Name: "part", Size: sumThreads},
			gpu.Let{Name: "acc", Type: gpu.Float, Init: gpu.FloatLit{V: 0}},
			gpu.For{Var: "i", From: lid, To: lit(sumPerBlk), Step: lit(sumThreads), Body: []gpu.Stmt{
				gpu.Assign{Name: "acc", Value: bin(gpu.OpAdd, gpu.Var{Name: "acc"},
					gpu.Load{Buf: "x", Index: bin(gpu.OpAdd, bin(gpu.OpMul, tgid, lit(sumPerBlk)), gpu.Var{Name: "i"})})},
			}},
			gpu.Store{Buf: "part", Index: lid, Value: gpu.Var{Name: "acc"}},
			gpu.Barrier{},
			gpu.For{Var: "k", From: lit(0), To: lit(8), Step: lit(1), Body: []gpu.Stmt{
				gpu.Let{Name: "stride", Type: gpu.Int, Init: bin(gpu.OpShr, lit(sumThreads/2), gpu.Var{Name: "k"})},
				gpu.If{Cond: bin(gpu.OpLt, lid, gpu.Var{Name: "stride"}), Then: []gpu.Stmt{
					gpu.Store{Buf: "part", Index: lid, Value: bin(gpu.OpAdd, gpu.Load{Buf: "part", Index: lid},
						gpu.Load{Buf: "part", Index: bin(gpu.OpAdd, lid, gpu.Var{Name: "stride"})})},
				}},
				gpu.Barrier{},
			}},
			gpu.If{Cond: bin(gpu.OpEq, lid, lit(0)), Then: []gpu.Stmt{
				gpu.Store{Buf: "out", Index: tgid, Value: gpu.Load{Buf: "part", Index: lit(0)}},
			}},
		},
	}
	acc := &gpu.Kernel{
		Name: "conf_accumulate", Doc: "acc += x", Threadgroup: 64, Groups: accN / 64,
		Params: []gpu.Param{in("x", accN), out("acc", accN)},
		Body: []gpu.Stmt{
			gpu.Store{Buf: "acc", Index: gid, Value: bin(gpu.OpAdd, gpu.Load{Buf: "acc", Index: gid}, gpu.Load{Buf: "x", Index: gid})},
		},
	}
	ks := []Kernel{
		{IR: saxpy, Reference: func(b [][]float32) {
			for i := range saxpyN {
				b[1][i] = b[2][0]*b[0][i] + b[1][i]
			}
		}},
		{IR: sum, Reference: func(b [][]float32) {
			for blk := range sumBlocks {
				var s float32
				for _, v := range b[0][blk*sumPerBlk : (blk+1)*sumPerBlk] {
					s += v
				}
				b[1][blk] = s
			}
		}},
		{IR: acc, Reference: func(b [][]float32) {
			for i := range accN {
				b[1][i] += b[0][i]
			}
		}},
	}
	for i := range ks {
		k := ks[i].IR
		ks[i].Info.Name = k.Name
		for _, p := range k.Params {
			ks[i].Info.ArgBytes = append(ks[i].Info.ArgBytes, 4*p.Size)
		}
	}
	return ks
}

// Source prints the suite's kernels in dialect d and returns their infos.
func Source(d *gpu.Dialect) (string, []gpuhost.KernelInfo, error) {
	var irs []*gpu.Kernel
	var infos []gpuhost.KernelInfo
	for _, k := range Kernels() {
		irs = append(irs, gpu.Rewrite(k.IR, d))
		infos = append(infos, k.Info)
	}
	src, err := gpu.Source(d, irs)
	return src, infos, err
}
