// Package cpu is the CPU runtime that every program mlbuild produces links:
// the kernels behind each planner.Kernel, forward and backward, on float32
// slices in row-major (NCHW) layout. The emitter calls them with constant
// sizes; nothing here allocates inside a training step.
//
// Conventions shared by all kernels: shapes handed to the broadcasting
// kernels are full shapes (batch included); optional operands are nil;
// scratch (dropout masks, saved statistics) comes from the caller, though
// convolutions keep their packing buffers to themselves; backward kernels
// overwrite their outputs and may overwrite dy. Nothing here chooses
// between methods of one operation at run time: the planner does, once,
// and the program calls the chosen kernel (Conv2DDirectFwd or
// Conv2DIm2colFwd). See docs/kernels-cpu.md.
//
// This package is copied into each generated program's module (it is
// embedded in the mlbuild binary), so it imports only the standard library.
package cpu
