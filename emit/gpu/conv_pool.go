package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Pooling in a convolution's epilogue: in an inference plan, a max pool
// that reads only a convolution's output is folded into that convolution
// (planner/fuse_pool.go, Attr.Pool), so that the convolution writes the
// pooled values and its full-size output never goes to memory. Two
// methods pool: the direct kernel (convDirectKernel: a thread computes its
// pixels' windows of convolution outputs in registers) and the Winograd
// output transform (wgOutputKernel: a thread's m×m output tile holds whole
// windows when the window divides m). The im2col methods write their
// output through a GEMM and do not pool.

// directPoolMaxWindow bounds the windows a direct convolution pools: the
// accumulators of one channel a thread keeps.
const directPoolMaxWindow = 16

// PoolEpilogue is the GPU targets' planner.Target.PoolEpilogue: whether
// the forward convolution of geometry g, computed by method, can write the
// max pool of geometry pool over its output instead of the output itself.
// The pool's window must equal its stride (the windows tile the output
// without overlap), with no padding or dilation; then the direct method
// pools windows of up to directPoolMaxWindow outputs, and Winograd F(m×m)
// windows whose sides divide m.
func PoolEpilogue(g planner.ConvGeom, method string, pool planner.ConvGeom) bool {
	g, pool = normConv(g), normConv(pool)
	if !tilingPool(g, pool) {
		return false
	}
	if method == ConvDirectMethod {
		return DirectFits(g) && pool.KH*pool.KW <= directPoolMaxWindow
	}
	if wa := WinogradByMethod(method); wa != nil {
		return WinogradFits(g) && wa.m%pool.KH == 0 && wa.m%pool.KW == 0
	}
	return false
}

// tilingPool reports whether pool is a pool over g's output whose windows
// tile it: window = stride, no padding, no dilation, and the window rule's
// output size.
func tilingPool(g, pool planner.ConvGeom) bool {
	return pool.N == g.N && pool.C == g.OC && pool.OC == g.OC && pool.H == g.OH && pool.W == g.OW &&
		pool.KH == pool.SH && pool.KW == pool.SW && pool.PH == 0 && pool.PW == 0 && pool.DH == 1 && pool.DW == 1 &&
		pool.KH >= 1 && pool.KW >= 1 && pool.OH == g.OH/pool.KH && pool.OW == g.OW/pool.KW && pool.OH >= 1 && pool.OW >= 1
}

// epiloguePool is the pool a forward convolution step writes (nil for
// none), checked against its method.
func epiloguePool(a planner.Attr) (*planner.ConvGeom, error) {
	if a.Pool == nil {
		return nil, nil
	}
	if !PoolEpilogue(*a.Conv, a.Method, *a.Pool) {
		p := *a.Pool
		return nil, fmt.Errorf("method %q cannot max-pool its output with a %dx%d window of stride %dx%d, padding %dx%d, in its epilogue",
			a.Method, p.KH, p.KW, p.SH, p.SW, p.PH, p.PW)
	}
	pool := normConv(*a.Pool)
	return &pool, nil
}
