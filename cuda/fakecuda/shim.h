// fakecuda's shim: it lets g++ -std=c++20 compile the CUDA C++ that
// mlbuild's CUDA dialect prints into a shared library the fake runs on the
// CPU. __global__ and __device__ vanish; __shared__ becomes a function
// static, which the lanes of the block being run share; threadIdx and
// blockIdx are set for the lane that runs. mlb_run runs a launch: block
// after block; without barriers the lanes one after another, with them
// every lane of the block as a fiber on the calling thread (fibers.h),
// __syncthreads running the next lane up to its barrier. The tiles and
// register fragments are emulated in warp.h. fibers.h and warp.h are
// emit/gpu's test shims' too.
#ifndef MLBUILD_FAKECUDA_SHIM
#define MLBUILD_FAKECUDA_SHIM
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>

typedef unsigned int uint;
struct mlb_dim3 { unsigned int x, y, z; };
inline thread_local mlb_dim3 threadIdx{0, 0, 0};
inline thread_local mlb_dim3 blockIdx{0, 0, 0};
inline mlb_dim3 blockDim{1, 1, 1};
inline mlb_dim3 gridDim{1, 1, 1};

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

// float4 as the CUDA dialect's 16-byte loads and stores use it (g++ runs
// with -fno-strict-aliasing, so reading floats through it is defined).
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
// uint2 as the CUDA dialect's 8-byte bfloat16 loads and stores use it.
struct uint2 { unsigned int x, y; };
inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }

#include "fibers.h"

// __syncthreads lets the block's next lane run up to its barrier, then
// restores this lane's indices (the lanes share the OS thread's).
inline void __syncthreads() {
    mlb_dim3 t = threadIdx, b = blockIdx;
    mlb_fiber_yield();
    threadIdx = t, blockIdx = b;
}

#define __global__
#define __device__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

#include "warp.h"

// mlb_run runs body for every thread of a groups x threads launch.
template <class Body>
void mlb_run(unsigned groups, unsigned threads, bool barriers, Body body) {
    blockDim = mlb_dim3{threads, 1, 1};
    gridDim = mlb_dim3{groups, 1, 1};
    if (!barriers) {
        for (unsigned g = 0; g < groups; g++) {
            for (unsigned l = 0; l < threads; l++) {
                blockIdx = mlb_dim3{g, 0, 0};
                threadIdx = mlb_dim3{l, 0, 0};
                body();
            }
        }
        return;
    }
    for (unsigned g = 0; g < groups; g++) {
        blockIdx = mlb_dim3{g, 0, 0};
        mlb_fiber_run(int(threads), [&body](int l) {
            threadIdx = mlb_dim3{unsigned(l), 0, 0};
            body();
        });
    }
}
#endif
