// CUDA C++; compile with nvcc or NVRTC.
#ifndef MLBUILD_TILE_EMULATION
// Tensor-core tiles: PTX wmma m16n16k8, TF32 operands, float32 sums.
struct mlb_tile_a { unsigned int x[4]; };
struct mlb_tile_b { unsigned int x[4]; };
struct mlb_tile_acc { float x[8]; };
__device__ __forceinline__ unsigned int mlb_smem(const float* p) {
    unsigned int a;
    asm("{ .reg .u64 mlb_g; cvta.to.shared.u64 mlb_g, %1; cvt.u32.u64 %0, mlb_g; }" : "=r"(a) : "l"(p));
    return a;
}
__device__ __forceinline__ void mlb_tile_tf32(unsigned int* x) {
    for (int i = 0; i < 4; i++) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(x[i]) : "f"(__uint_as_float(x[i])));
}
__device__ __forceinline__ void mlb_tile_zero(mlb_tile_acc& t) {
    for (int i = 0; i < 8; i++) t.x[i] = 0.0f;
}
#define MLB_TILE_LOAD(name, frag, ab, layout) \
    __device__ __forceinline__ void name(frag& t, const float* p, int ld) { \
        asm volatile("wmma.load." ab ".sync.aligned." layout ".m16n16k8.shared.tf32 {%0, %1, %2, %3}, [%4], %5;" \
            : "=r"(t.x[0]), "=r"(t.x[1]), "=r"(t.x[2]), "=r"(t.x[3]) : "r"(mlb_smem(p)), "r"(ld) : "memory"); \
        mlb_tile_tf32(t.x); \
    }
MLB_TILE_LOAD(mlb_tile_load_a_row, mlb_tile_a, "a", "row")
MLB_TILE_LOAD(mlb_tile_load_a_col, mlb_tile_a, "a", "col")
MLB_TILE_LOAD(mlb_tile_load_b_row, mlb_tile_b, "b", "row")
MLB_TILE_LOAD(mlb_tile_load_b_col, mlb_tile_b, "b", "col")
#define MLB_TILE_MMA(name, la, lb) \
    __device__ __forceinline__ void name(mlb_tile_acc& d, const mlb_tile_a& a, const mlb_tile_b& b) { \
        asm volatile("wmma.mma.sync.aligned." la "." lb ".m16n16k8.f32.tf32.tf32.f32 " \
            "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, " \
            "{%0, %1, %2, %3, %4, %5, %6, %7};" \
            : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]), "+f"(d.x[4]), "+f"(d.x[5]), "+f"(d.x[6]), "+f"(d.x[7]) \
            : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]), "r"(b.x[2]), "r"(b.x[3])); \
    }
MLB_TILE_MMA(mlb_tile_mma_row_row, "row", "row")
MLB_TILE_MMA(mlb_tile_mma_row_col, "row", "col")
MLB_TILE_MMA(mlb_tile_mma_col_row, "col", "row")
MLB_TILE_MMA(mlb_tile_mma_col_col, "col", "col")
#define MLB_TILE_STORE(name, layout) \
    __device__ __forceinline__ void name(const mlb_tile_acc& d, float* p, int ld) { \
        asm volatile("wmma.store.d.sync.aligned." layout ".m16n16k8.shared.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;" \
            :: "r"(mlb_smem(p)), "f"(d.x[0]), "f"(d.x[1]), "f"(d.x[2]), "f"(d.x[3]), "f"(d.x[4]), "f"(d.x[5]), "f"(d.x[6]), "f"(d.x[7]), "r"(ld) \
            : "memory"); \
    }
MLB_TILE_STORE(mlb_tile_store_row, "row")
MLB_TILE_STORE(mlb_tile_store_col, "col")
#endif

// four = 4·a·b and one = a·b on tensor tiles, every layout
// threadgroups 1 x 32 threads
extern "C" __global__ void tile_product(const float* __restrict__ a,
    const float* __restrict__ b,
    float* __restrict__ four,
    float* __restrict__ one) {
    __shared__ __align__(32) float sa[128];
    __shared__ __align__(32) float sat[128];
    __shared__ __align__(32) float sb[128];
    __shared__ __align__(32) float sbt[128];
    __shared__ __align__(32) float sc[256];
    __shared__ __align__(32) float sd[256];
    for (int e = (int)threadIdx.x; e < 128; e += 32) {
        sa[e] = a[e];
        sat[e % 8 * 16 + e / 8] = a[e];
        sb[e] = b[e];
        sbt[e % 16 * 8 + e / 16] = b[e];
    }
    __syncthreads();
    mlb_tile_a ar;
    mlb_tile_a ac;
    mlb_tile_b br;
    mlb_tile_b bc;
    mlb_tile_acc acc;
    mlb_tile_acc single;
    mlb_tile_load_a_row(ar, &sa[0], 8);
    mlb_tile_load_a_col(ac, &sat[0], 16);
    mlb_tile_load_b_row(br, &sb[0], 16);
    mlb_tile_load_b_col(bc, &sbt[0], 8);
    mlb_tile_zero(acc);
    mlb_tile_zero(single);
    mlb_tile_mma_row_row(acc, ar, br);
    mlb_tile_mma_row_col(acc, ar, bc);
    mlb_tile_mma_col_row(acc, ac, br);
    mlb_tile_mma_col_col(acc, ac, bc);
    mlb_tile_mma_row_col(single, ar, bc);
    mlb_tile_store_col(acc, &sc[0], 16);
    mlb_tile_store_row(single, &sd[0], 16);
    __syncthreads();
    for (int e = (int)threadIdx.x; e < 256; e += 32) {
        four[e] = sc[e % 16 * 16 + e / 16];
        one[e] = sd[e];
    }
}
