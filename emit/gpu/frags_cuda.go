package gpu

// cudaFragments are the CUDA dialect's register fragments: PTX
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (sm_80 and newer),
// bfloat16 operands and float32 accumulators, in inline asm so that
// NVRTC needs no header.
//
// The per-lane layouts are the PTX ISA's ("Matrix Fragments for
// mma.m16n8k16 with floating point type"), with g = laneid >> 2
// (groupID) and t = laneid % 4 (threadID_in_group):
//
//	A, 16×16, a0 … a7 in four .b32 registers (two .bf16 each, a0 low):
//	  row = g      for a0, a1, a4, a5;  g + 8 for a2, a3, a6, a7
//	  col = 2t + (i & 1)  for i < 4;    2t + (i & 1) + 8 for i ≥ 4
//	B, 16×8, b0 … b3 in two .b32 registers:
//	  row = 2t + (i & 1)  for i < 2;    2t + (i & 1) + 8 for i ≥ 2
//	  col = g
//	C and D, 16×8, c0 … c3 in four .f32 registers:
//	  row = g      for c0, c1;          g + 8 for c2, c3
//	  col = 2t + (i & 1)
//
// So each register of A and B holds two elements adjacent along K, and
// the accumulator's pairs (c0, c1) and (c2, c3) are the same rows and
// columns as A's register pairs: two accumulators side by side (columns
// 0–7 and 8–15) are, lane by lane, the registers of one A fragment
// (accToA derives this from the tables below).
//
// A compiler that is not CUDA's (the g++ runs of the tests, fakecuda)
// defines MLBUILD_FRAG_EMULATION and its own mlb_warp_mma_bf16,
// mlb_pack_bf16 and mlb_warp_shfl_xor, which exchange the lanes'
// registers at every call and compute from the same per-lane layouts
// (emit/gpu's testdata/shim/cuda_shim.h, cuda/fakecuda/shim.h).
var cudaFragments = &FragmentDialect{
	M: 16, N: 8, K: 16, Lanes: 32, Precision: "bf16",
	Layout: [3][]FragPlace{
		FragA: {
			{RowG: 1, ColT: 2}, {RowG: 1, ColT: 2, Col: 1},
			{RowG: 1, Row: 8, ColT: 2}, {RowG: 1, Row: 8, ColT: 2, Col: 1},
			{RowG: 1, ColT: 2, Col: 8}, {RowG: 1, ColT: 2, Col: 9},
			{RowG: 1, Row: 8, ColT: 2, Col: 8}, {RowG: 1, Row: 8, ColT: 2, Col: 9},
		},
		FragB: {
			{RowT: 2, ColG: 1}, {RowT: 2, Row: 1, ColG: 1},
			{RowT: 2, Row: 8, ColG: 1}, {RowT: 2, Row: 9, ColG: 1},
		},
		FragC: {
			{RowG: 1, ColT: 2}, {RowG: 1, ColT: 2, Col: 1},
			{RowG: 1, Row: 8, ColT: 2}, {RowG: 1, Row: 8, ColT: 2, Col: 1},
		},
	},
	ElemsPerReg: [3]int{2, 2, 1},
	Header:      cudaFragHeader,
	SharedPairs: "__shared__ __align__(16) unsigned int %[1]s[%[2]d];",
	Decl:        [3]string{"unsigned int %[1]s[4];", "unsigned int %[1]s[2];", "float %[1]s[4];"},
	Reg:         "%[1]s[%[2]d]",
	MMA:         "mlb_warp_mma_bf16(%[1]s, %[2]s, %[3]s);",
	Pack:        "mlb_pack_bf16(%[1]s, %[2]s)",
	ShuffleXor:  "mlb_warp_shfl_xor(%[1]s, %[2]d)",
}

// cudaFragHeader defines the fragment functions with PTX. cvt.rn.bf16x2
// puts its first source in the upper half.
const cudaFragHeader = `#ifndef MLBUILD_FRAG_EMULATION
// Register fragments: PTX mma.sync m16n8k16, bfloat16 operands, float32 sums.
__device__ __forceinline__ void mlb_warp_mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ unsigned int mlb_pack_bf16(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float mlb_warp_shfl_xor(float x, int m) {
    unsigned int r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(__float_as_uint(x)), "r"(m));
    return __uint_as_float(r);
}
#endif
`
