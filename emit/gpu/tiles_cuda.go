package gpu

// cudaTiles are the CUDA dialect's tiles: PTX wmma on tensor cores
// (sm_80 and newer), m16n16k8 with TF32 operands and float32
// accumulators, read from and written to shared memory. The PTX is
// inline asm, so no header (mma.h) is needed, and each operand register
// is rounded to TF32 (cvt.rna: to nearest, ties away from zero) after its
// load, as the tensor cores expect.
//
// A compiler that is not CUDA's (the g++ runs of the tests, fakecuda)
// defines MLBUILD_TILE_EMULATION and its own functions of the same names,
// which compute each tile whole in every thread (emit/gpu's
// testdata/shim/cuda_shim.h, cuda/fakecuda/shim.h).
var cudaTiles = &TileDialect{
	M: 16, N: 16, K: 8, Lanes: 32, Precision: "tf32",
	Header:      cudaTileHeader,
	SharedArray: "__shared__ __align__(32) float %[1]s[%[2]d];",
	Decl:        [3]string{"mlb_tile_a %[1]s;", "mlb_tile_b %[1]s;", "mlb_tile_acc %[1]s;"},
	Zero:        "mlb_tile_zero(%[1]s);",
	Load: [2][2]string{
		{"mlb_tile_load_a_row(%[1]s, &%[2]s[%[3]s], %[4]d);", "mlb_tile_load_a_col(%[1]s, &%[2]s[%[3]s], %[4]d);"},
		{"mlb_tile_load_b_row(%[1]s, &%[2]s[%[3]s], %[4]d);", "mlb_tile_load_b_col(%[1]s, &%[2]s[%[3]s], %[4]d);"},
	},
	MMA: [2][2]string{
		{"mlb_tile_mma_row_row(%[1]s, %[2]s, %[3]s);", "mlb_tile_mma_row_col(%[1]s, %[2]s, %[3]s);"},
		{"mlb_tile_mma_col_row(%[1]s, %[2]s, %[3]s);", "mlb_tile_mma_col_col(%[1]s, %[2]s, %[3]s);"},
	},
	Store: [2]string{"mlb_tile_store_row(%[1]s, &%[2]s[%[3]s], %[4]d);", "mlb_tile_store_col(%[1]s, &%[2]s[%[3]s], %[4]d);"},
}

// cudaTileHeader defines the tile functions with PTX wmma. A fragment's
// registers are the PTX ones: 4 .b32 for a 16×8 A or 8×16 B tile of
// TF32, 8 .f32 for the 16×16 accumulator. Addresses are 32-bit shared
// window addresses (cvta.to.shared), the stride in elements.
const cudaTileHeader = `#ifndef MLBUILD_TILE_EMULATION
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
`
