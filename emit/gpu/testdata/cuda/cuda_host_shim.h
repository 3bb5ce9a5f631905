// The host half of the CUDA shim: with ../shim/cuda_shim.h (the device half)
// it lets g++ -std=c++20 compile the CUDA check driver that
// emit/gpu/cuda_export_test.go writes, so the exact file that nvcc runs on a
// GPU also runs on a machine without one. Device memory is host memory,
// copies are memcpy, errors never happen, and a launch runs the grid on the
// CPU the way the kernel tests do: threadgroups one after another, lanes in
// turn on one thread, or as fibers that switch at each barrier when the
// kernel synchronises its threadgroup (cuda/fakecuda/fibers.h).
#ifndef MLBUILD_CUDA_HOST_SHIM
#define MLBUILD_CUDA_HOST_SHIM
#include "cuda_shim.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };

inline cudaError_t cudaMalloc(void** p, std::size_t n) {
    *p = std::malloc(n > 0 ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
    std::free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind) {
    std::memcpy(dst, src, n);
    return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error" : "out of memory";
}

// mlb_cpu_launch runs body once per thread of a groups x tg grid with
// blockIdx, threadIdx and blockDim set as CUDA would set them.
template <class Body>
void mlb_cpu_launch(int groups, int tg, bool barriers, Body body) {
    blockDim.x = tg;
    if (!barriers) {
        for (int g = 0; g < groups; g++)
            for (int l = 0; l < tg; l++) {
                blockIdx.x = g;
                threadIdx.x = l;
                body();
            }
        return;
    }
    for (int g = 0; g < groups; g++)
        mlb_fiber_run(tg, [&body, g](int l) {
            blockIdx.x = g;
            threadIdx.x = l;
            body();
        });
}
#endif
