// Package cuda is the CUDA runtime that mlbuild's CUDA programs link: the
// NVIDIA libraries loaded at run time through purego (driver API from
// libcuda.so.1, NVRTC, cuBLAS), an Engine that owns one GPU and runs every
// call on one locked OS thread, a disk cache of compiled kernels, and a
// Device that implements rt/gpuhost.Device, recording each sequence of
// kernel launches and GEMMs as one CUDA graph that a step replays.
//
// Every library call goes through three function tables (DriverAPI,
// NVRTCAPI, BLASAPI in api.go), one field per C function with its symbol
// name in a struct tag. LoadLibraries fills them from the real libraries;
// the fake in cuda/fakecuda fills them with a simulated GPU that really
// computes (kernels compiled by g++ through a shim, GEMMs in Go) and
// enforces CUDA's rules (a context current per thread, nothing synchronous
// during stream capture, pointers inside live allocations), so the Engine
// and Device code that runs on a GPU is the code the tests run.
//
// The package builds on every OS; only Linux can load NVIDIA's libraries
// (elsewhere LoadLibraries fails with ErrNoDevice). It is copied into every
// generated CUDA program's module; besides the standard library and
// rt/gpuhost it imports only purego, and programs build with CGO_ENABLED=0.
package cuda
