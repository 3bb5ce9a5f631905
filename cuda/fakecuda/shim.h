// fakecuda's shim: it lets g++ -std=c++20 compile the CUDA C++ that
// mlbuild's CUDA dialect prints into a shared library the fake runs on the
// CPU. __global__ and __device__ vanish; __shared__ becomes a function
// static, which the lanes of the block being run share; threadIdx and
// blockIdx are per-lane thread_locals; __syncthreads is a std::barrier
// across the lanes of the block. mlb_run runs a launch: block after block;
// with barriers, one std::thread per lane (all lanes of a block run
// together), else the lanes one after another on the calling thread.
#ifndef MLBUILD_FAKECUDA_SHIM
#define MLBUILD_FAKECUDA_SHIM
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
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

inline std::barrier<>* mlb_block_barrier = nullptr;
inline void __syncthreads() { mlb_block_barrier->arrive_and_wait(); }

#define __global__
#define __device__
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
    std::barrier<> block(threads);
    mlb_block_barrier = &block;
    std::vector<std::thread> lanes;
    for (unsigned l = 0; l < threads; l++) {
        lanes.emplace_back([&block, &body, groups, l] {
            threadIdx = mlb_dim3{l, 0, 0};
            for (unsigned g = 0; g < groups; g++) {
                blockIdx = mlb_dim3{g, 0, 0};
                body();
                block.arrive_and_wait();
            }
        });
    }
    for (auto& t : lanes) t.join();
    mlb_block_barrier = nullptr;
}
#endif
