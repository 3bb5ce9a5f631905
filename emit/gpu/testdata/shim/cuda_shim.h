// A shim that lets g++ -std=c++20 compile the CUDA C++ that mlbuild's CUDA
// dialect prints, so the same kernels also run on the CPU in tests:
// __global__ vanishes, __shared__ becomes static (shared by the lanes of the
// block being run), threadIdx/blockIdx are set by the driver for the lane it
// runs, and __syncthreads lets the next lane run (cuda/fakecuda/fibers.h) and then
// restores its lane's indices.
#ifndef MLBUILD_CUDA_SHIM
#define MLBUILD_CUDA_SHIM
#include <cmath>
#include <cstring>

#include "fibers.h"

typedef unsigned int uint;
struct mlb_dim { unsigned int x; };
inline thread_local mlb_dim threadIdx, blockIdx;
inline mlb_dim blockDim;

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __uint_as_float(unsigned int bits) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}
inline unsigned int __float_as_uint(float v) {
    unsigned int bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bits;
}

// float4 as the CUDA dialect's 16-byte loads and stores use it; g++ runs
// with -fno-strict-aliasing, so reading floats through it is defined.
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
// uint2 as the CUDA dialect's 8-byte bfloat16 loads and stores use it.
struct uint2 { unsigned int x, y; };
inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }

inline void __syncthreads() {
    mlb_dim t = threadIdx, b = blockIdx;
    mlb_fiber_yield();
    threadIdx = t, blockIdx = b;
}

#define __global__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

#include "warp.h"
#endif
