// warp.h emulates the CUDA dialect's warp-wide operations on the CPU for
// the shims that run its kernels with g++ (cuda/fakecuda/shim.h, which
// fakecuda carries into every program, and emit/gpu's test shim): the
// tensor-core tiles and the register fragments. The including shim first
// declares threadIdx (with .x), __syncthreads, __uint_as_float and
// __float_as_uint.
#ifndef MLBUILD_WARP_EMULATION
#define MLBUILD_WARP_EMULATION
#include <cstring>

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

// mlb_warp_sync is the fragments' exchange point: a barrier of the
// block's lanes (as __syncthreads).
inline void mlb_warp_sync() { __syncthreads(); }

// The register fragments of the CUDA dialect (emit/gpu's frags_cuda.go),
// emulated with the PTX ISA's per-lane layouts of mma.m16n8k16 with
// bfloat16 operands: each lane holds exactly its registers (A in four
// words of two bfloat16, the lower-numbered element in the low half; B
// in two; C in four floats). A collective call (mlb_warp_*) puts the
// lane's registers in an exchange, waits for every lane of the block (the
// kernels call these in control flow uniform over the block), computes
// this lane's result from the registers of its warp's lanes through the
// layout, and waits again before the exchange is reused. The sums are
// float32, k in order, onto the accumulator.
#define MLBUILD_FRAG_EMULATION 1
struct mlb_frag_lane { unsigned int a[4], b[2]; float c[4]; };
inline thread_local mlb_frag_lane mlb_frag_x[1024];
inline thread_local float mlb_shfl_x[1024];
inline unsigned int mlb_bf16_bits(float x) {
    unsigned int u = __float_as_uint(x);
    return (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
inline unsigned int mlb_pack_bf16(float lo, float hi) { return mlb_bf16_bits(lo) | mlb_bf16_bits(hi) << 16; }
// mlb_frag_elem is element i of registers regs (two a register).
inline float mlb_frag_elem(const unsigned int* regs, int i) {
    unsigned int w = regs[i / 2];
    return __uint_as_float(i % 2 ? w & 0xffff0000u : w << 16);
}
// A (16×16): (row, col) is in lane 4·(row%8) + (col%8)/2, element
// (col&1) + 2·(row/8) + 4·(col/8): row g for a0 a1 a4 a5, g+8 for the
// others; col 2t + (i&1), +8 for i ≥ 4.
inline float mlb_frag_a(unsigned int w0, int row, int col) {
    return mlb_frag_elem(mlb_frag_x[w0 + 4 * (row % 8) + (col % 8) / 2].a, (col & 1) + 2 * (row / 8) + 4 * (col / 8));
}
// B (16×8): (k, n) is in lane 4·n + (k%8)/2, element (k&1) + 2·(k/8):
// row 2t + (i&1), +8 for i ≥ 2; col g.
inline float mlb_frag_b(unsigned int w0, int k, int n) {
    return mlb_frag_elem(mlb_frag_x[w0 + 4 * n + (k % 8) / 2].b, (k & 1) + 2 * (k / 8));
}
inline void mlb_warp_mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
    unsigned int lid = threadIdx.x;
    mlb_frag_lane& me = mlb_frag_x[lid];
    for (int i = 0; i < 4; i++) me.a[i] = a[i], me.c[i] = d[i];
    me.b[0] = b[0], me.b[1] = b[1];
    mlb_warp_sync();
    unsigned int w0 = lid & ~31u, lane = lid & 31u;
    float out[4];
    for (int i = 0; i < 4; i++) {
        // c_i: row g, +8 for i ≥ 2; col 2t + (i&1)
        int row = int(lane / 4) + 8 * (i / 2), col = 2 * int(lane % 4) + (i & 1);
        float s = mlb_frag_x[lid].c[i];
        for (int k = 0; k < 16; k++) s += mlb_frag_a(w0, row, k) * mlb_frag_b(w0, k, col);
        out[i] = s;
    }
    mlb_warp_sync();
    for (int i = 0; i < 4; i++) d[i] = out[i];
}
inline float mlb_warp_shfl_xor(float x, int m) {
    unsigned int lid = threadIdx.x;
    mlb_shfl_x[lid] = x;
    mlb_warp_sync();
    float r = mlb_shfl_x[(lid & ~31u) | ((lid & 31u) ^ unsigned(m))];
    mlb_warp_sync();
    return r;
}
#endif
