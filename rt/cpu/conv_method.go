package cpu

// Convolution methods, as the planner records them and `mlbuild plan`
// shows them.
const (
	ConvDirect = "direct"      // shifted planes, no columns (conv_direct.go)
	ConvIm2col = "im2col+gemm" // packed columns and the GEMM microkernels (conv_packed.go)
)

// ForwardMethod is how Conv2DFwd computes a convolution of geometry g.
func (g Conv) ForwardMethod() string {
	if convDirectOK(g.norm()) {
		return ConvDirect
	}
	return ConvIm2col
}

// BackwardMethod is how Conv2DBwd computes it; needDx says whether the
// input gradient is wanted (the first layer's is not).
func (g Conv) BackwardMethod(needDx bool) string {
	n := g.norm()
	if !needDx && convDirectOK(n) || convDirectDxOK(n) {
		return ConvDirect
	}
	return ConvIm2col
}
