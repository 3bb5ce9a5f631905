// A shim that lets g++ -std=c++20 compile the CUDA C++ that mlbuild's CUDA
// dialect prints, so the same kernels also run on the CPU in tests:
// __global__ vanishes, __shared__ becomes static (shared by the lanes of the
// block being run), threadIdx/blockIdx are set by the driver for the lane it
// runs, and __syncthreads lets the next lane run (mlb_fibers.h) and then
// restores its lane's indices.
#ifndef MLBUILD_CUDA_SHIM
#define MLBUILD_CUDA_SHIM
#include <cmath>
#include <cstring>

#include "mlb_fibers.h"

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

inline void __syncthreads() {
    mlb_dim t = threadIdx, b = blockIdx;
    mlb_fiber_yield();
    threadIdx = t, blockIdx = b;
}

#define __global__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

// The tile functions of the CUDA dialect's tensor-core tiles (emit/gpu's
// tiles_cuda.go), emulated: every thread of a warp holds and computes the
// whole tile (16×8 A, 8×16 B, 16×16 float32 accumulator), rounding A and
// B to TF32 as cvt.rna does (to nearest, ties away from zero), and only
// the warp's first thread writes a stored tile (the others would write
// the same values; the kernels read them after a barrier).
#define MLBUILD_TILE_EMULATION 1
struct mlb_tile_a { float v[16 * 8]; };
struct mlb_tile_b { float v[8 * 16]; };
struct mlb_tile_acc { float v[16 * 16]; };
inline float mlb_tf32(float x) {
    unsigned int u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) < 0x7f800000u) u = (u + 0x1000u) & ~0x1fffu;
    std::memcpy(&x, &u, sizeof u);
    return x;
}
inline void mlb_tile_zero(mlb_tile_acc& t) { for (float& x : t.v) x = 0.0f; }
inline void mlb_tile_load_a_row(mlb_tile_a& t, const float* p, int ld) { for (int r = 0; r < 16; r++) for (int c = 0; c < 8; c++) t.v[r * 8 + c] = mlb_tf32(p[r * ld + c]); }
inline void mlb_tile_load_a_col(mlb_tile_a& t, const float* p, int ld) { for (int r = 0; r < 16; r++) for (int c = 0; c < 8; c++) t.v[r * 8 + c] = mlb_tf32(p[c * ld + r]); }
inline void mlb_tile_load_b_row(mlb_tile_b& t, const float* p, int ld) { for (int r = 0; r < 8; r++) for (int c = 0; c < 16; c++) t.v[r * 16 + c] = mlb_tf32(p[r * ld + c]); }
inline void mlb_tile_load_b_col(mlb_tile_b& t, const float* p, int ld) { for (int r = 0; r < 8; r++) for (int c = 0; c < 16; c++) t.v[r * 16 + c] = mlb_tf32(p[c * ld + r]); }
inline void mlb_tile_mma(mlb_tile_acc& d, const mlb_tile_a& a, const mlb_tile_b& b) {
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            float s = d.v[r * 16 + c];
            for (int k = 0; k < 8; k++) s += a.v[r * 8 + k] * b.v[k * 16 + c];
            d.v[r * 16 + c] = s;
        }
}
inline void mlb_tile_mma_row_row(mlb_tile_acc& d, const mlb_tile_a& a, const mlb_tile_b& b) { mlb_tile_mma(d, a, b); }
inline void mlb_tile_mma_row_col(mlb_tile_acc& d, const mlb_tile_a& a, const mlb_tile_b& b) { mlb_tile_mma(d, a, b); }
inline void mlb_tile_mma_col_row(mlb_tile_acc& d, const mlb_tile_a& a, const mlb_tile_b& b) { mlb_tile_mma(d, a, b); }
inline void mlb_tile_mma_col_col(mlb_tile_acc& d, const mlb_tile_a& a, const mlb_tile_b& b) { mlb_tile_mma(d, a, b); }
inline void mlb_tile_store_row(const mlb_tile_acc& d, float* p, int ld) {
    if (threadIdx.x % 32 != 0) return;
    for (int r = 0; r < 16; r++) for (int c = 0; c < 16; c++) p[r * ld + c] = d.v[r * 16 + c];
}
inline void mlb_tile_store_col(const mlb_tile_acc& d, float* p, int ld) {
    if (threadIdx.x % 32 != 0) return;
    for (int r = 0; r < 16; r++) for (int c = 0; c < 16; c++) p[c * ld + r] = d.v[r * 16 + c];
}
#endif
