package gpu_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

// The kernels of the runtime's conformance suite (rt/gpuhost/gpuhosttest),
// defined once in the IR and printed in every GPU language into the suite's
// testdata: the runtime reads them from there and never imports the
// compiler. TestConformanceKernels keeps the files equal to these
// definitions.

// The suite's kernel sizes (gpuhosttest's Kernels gives each one's grid and
// argument bytes; TestConformanceKernels checks them against these).
const (
	saxpyN     = 1000
	sumBlocks  = 4
	sumPerBlk  = 1024
	sumThreads = 256
	accN       = 256
)

func confIn(name string, n int) gpu.Param { return gpu.Param{Name: name, Elem: gpu.Float, Size: n} }
func confOut(name string, n int) gpu.Param {
	return gpu.Param{Name: name, Elem: gpu.Float, Mutable: true, Size: n}
}

func lit(v int) gpu.Expr { return gpu.IntLit{V: int64(v)} }

var (
	gid  gpu.Expr = gpu.Builtin{Kind: gpu.GlobalID}
	lid  gpu.Expr = gpu.Builtin{Kind: gpu.LocalID}
	tgid gpu.Expr = gpu.Builtin{Kind: gpu.GroupID}
)

func bin(op gpu.BinOp, l, r gpu.Expr) gpu.Expr { return gpu.Binary{Op: op, L: l, R: r} }

// conformanceKernels are the suite's kernels, in gpuhosttest.Kernels'
// order: saxpy (y = a·x + y over 1000 elements, a guarded partial last
// block), a block sum with shared memory and barriers (4 blocks of 256
// threads, each summing 1024 values), and acc += x (the replay check).
func conformanceKernels() []*gpu.Kernel {
	saxpy := &gpu.Kernel{
		Name: "conf_saxpy", Doc: "y = a[0]*x + y", Threadgroup: 128, Groups: (saxpyN + 127) / 128,
		Params: []gpu.Param{confIn("x", saxpyN), confOut("y", saxpyN), confIn("a", 1)},
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
		Params: []gpu.Param{confIn("x", sumBlocks*sumPerBlk), confOut("out", sumBlocks)},
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
		Params: []gpu.Param{confIn("x", accN), confOut("acc", accN)},
		Body: []gpu.Stmt{
			gpu.Store{Buf: "acc", Index: gid, Value: bin(gpu.OpAdd, gpu.Load{Buf: "acc", Index: gid}, gpu.Load{Buf: "x", Index: gid})},
		},
	}
	return []*gpu.Kernel{saxpy, sum, acc}
}

// TestConformanceKernels prints the suite's kernels in each GPU language
// and compares them with the files gpuhosttest embeds
// (rt/gpuhost/gpuhosttest/testdata/conformance.<language>), and checks that
// what gpuhosttest says of each kernel (name, argument bytes, grid) is what
// the IR declares. MLBUILD_UPDATE=1 rewrites the files.
func TestConformanceKernels(t *testing.T) {
	irs := conformanceKernels()
	ks := gpuhosttest.Kernels()
	if len(ks) != len(irs) {
		t.Fatalf("gpuhosttest has %d kernels, the IR %d", len(ks), len(irs))
	}
	for i, ir := range irs {
		k := ks[i]
		var argBytes []int
		for _, p := range ir.Params {
			argBytes = append(argBytes, 4*p.Size)
		}
		if k.Info.Name != ir.Name || !slices.Equal(k.Info.ArgBytes, argBytes) || k.Groups != ir.Groups || k.Threadgroup != ir.Threadgroup {
			t.Errorf("gpuhosttest's kernel %d is %s, args %v bytes, %d groups of %d; the IR is %s, args %v bytes, %d groups of %d",
				i, k.Info.Name, k.Info.ArgBytes, k.Groups, k.Threadgroup, ir.Name, argBytes, ir.Groups, ir.Threadgroup)
		}
	}
	for _, c := range []struct {
		d    *gpu.Dialect
		lang gpuhosttest.Language
	}{{gpu.CUDA, gpuhosttest.CUDA}, {gpu.Metal, gpuhosttest.Metal}} {
		var rewritten []*gpu.Kernel
		for _, k := range irs {
			rewritten = append(rewritten, gpu.Rewrite(k, c.d))
		}
		src, err := gpu.Source(c.d, rewritten)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "rt", "gpuhost", "gpuhosttest", filepath.FromSlash(gpuhosttest.SourceFile(c.lang)))
		if os.Getenv("MLBUILD_UPDATE") != "" {
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
		}
		if string(want) != src {
			t.Errorf("%s differs from the suite's kernels printed in %s; review the diff and rerun with MLBUILD_UPDATE=1", path, c.d.Name)
		}
	}
}
