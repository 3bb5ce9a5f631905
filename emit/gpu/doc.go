// Package gpu generates the GPU kernels of a plan: a small kernel IR, one
// C-family printer, a Dialect table per GPU language (Metal Shading Language,
// CUDA), kernel generators for every planner.Kernel in the formulation the
// Metal backend runs, and Lower, which turns a planner.Plan into a Program:
// an ordered list of kernel launches and GEMM calls plus the kernel source.
//
// Every shape is a constant in the generated code, so a kernel is specific to
// one step of one plan; identical kernels are shared. GEMMs are not kernels
// here: the Metal runtime hands them to MPSMatrixMultiplication, and Lower
// describes them as Gemm entries. A convolution is lowered a round of
// images at a time (im2col of the round side by side, one GEMM per group,
// an epilogue kernel into place), so a batch is a few large GEMMs; the
// round size follows from the scratch the planner gave it, which
// ConvScratch sizes.
//
// Differences between GPU languages are data in a Dialect, never branches in
// the printer. A feature a language lacks (Metal has no erf) is rewritten in
// the IR before printing (see Rewrite), not special-cased while printing.
package gpu
