// gemm_algos: does choosing a cuBLASLt algorithm per GEMM shape, by timing,
// beat cublasSgemm's own choice on the GEMM shapes of models/mnist.cue's
// training step (batch 250)? Exact fp32 (CUBLAS_COMPUTE_32F), as mlbuild's
// default. The Winograd layer's strided batched products are timed as
// lowered today and in two other layouts the transforms could write
// (tiles-major V and M; the chunks of a product side by side). Built and
// run on the GPU machine (bench/gpu/run.sh runs it with "gemm" as its
// fourth argument):
//   nvcc -O2 -o gemm_algos gemm_algos.cu -lcublasLt -lcublas
#include <cstdio>
#include <utility>
#include <vector>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#define CK(x) do { auto r = (x); if (r != 0) { printf("error %d at %s:%d\n", (int)r, __FILE__, __LINE__); return 1; } } while (0)

struct Shape { const char *what; int M, N, K; bool ta, tb; int batch; };

int main() {
  // Row-major C[M,N] = op(A)·op(B), as emit/gpu lowers the flagship's convolutions and dense layers.
  Shape shapes[] = {
    {"wino fwd  U·V (today)", 64, 572, 32, false, false, 448},
    {"wino fwd  tiles-major", 572, 64, 32, false, true, 448},
    {"wino fwd  chunks merged", 64, 4004, 32, false, false, 64},
    {"wino dx   U'·dY (today)", 32, 572, 64, false, false, 448},
    {"wino dx   tiles-major", 572, 32, 64, false, true, 448},
    {"wino dx   chunks merged", 32, 4004, 64, false, false, 64},
    {"wino dW   dY·Vt (today)", 64, 32, 572, false, true, 448},
    {"dense1 forward", 250, 128, 3136, false, true, 1},
    {"dense1 dx", 250, 3136, 128, false, false, 1},
    {"dense1 dW", 128, 3136, 250, true, false, 1},
  };
  cublasHandle_t h; CK(cublasCreate(&h));
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  size_t wsBytes = 32 << 20; void *ws; CK(cudaMalloc(&ws, wsBytes));
  CK(cublasSetWorkspace(h, ws, wsBytes));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  float total_default = 0, total_best = 0;
  for (auto &s : shapes) {
    size_t na = (size_t)s.M * s.K * s.batch, nb = (size_t)s.K * s.N * s.batch, nc = (size_t)s.M * s.N * s.batch;
    long long sa = (long long)s.M * s.K, sb = (long long)s.K * s.N, sc = (long long)s.M * s.N;
    float *A, *B, *C; CK(cudaMalloc(&A, na * 4)); CK(cudaMalloc(&B, nb * 4)); CK(cudaMalloc(&C, nc * 4));
    cudaMemset(A, 0, na * 4); cudaMemset(B, 0, nb * 4);
    int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N, ldc = s.N;
    float alpha = 1, beta = 0;
    auto opA = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int reps = 20;
    auto timeit = [&](auto f) { f(); cudaEventRecord(e0); for (int i = 0; i < reps; i++) f(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); return ms * 1000 / reps; };
    float tdef = timeit([&] {
      if (s.batch == 1) cublasSgemm(h, opB, opA, s.N, s.M, s.K, &alpha, B, ldb, A, lda, &beta, C, ldc);
      else cublasSgemmStridedBatched(h, opB, opA, s.N, s.M, s.K, &alpha, B, ldb, sb, A, lda, sa, &beta, C, ldc, sc, s.batch);
    });
    cublasLtMatmulDesc_t d; CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, s.tb ? s.K : s.N, s.tb ? s.N : s.K, ldb));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, s.ta ? s.M : s.K, s.ta ? s.K : s.M, lda));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.N, s.M, ldc));
    if (s.batch > 1) {
      int32_t bc = s.batch;
      for (auto [l, st] : {std::pair{la, sb}, std::pair{lb, sa}, std::pair{lc, sc}}) {
        CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
      }
    }
    cublasLtMatmulPreference_t p; CK(cublasLtMatmulPreferenceCreate(&p));
    CK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes, sizeof wsBytes));
    std::vector<cublasLtMatmulHeuristicResult_t> res(32); int got = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, p, 32, res.data(), &got));
    float best = 1e30; int bi = -1; float first = 0;
    for (int i = 0; i < got; i++) {
      float t = timeit([&] { cublasLtMatmul(lt, d, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &res[i].algo, ws, wsBytes, 0); });
      if (cudaGetLastError() != cudaSuccess) continue;
      if (i == 0) first = t;
      if (t < best) { best = t; bi = i; }
    }
    printf("%-24s b=%3d M=%6d N=%6d K=%6d  cublasSgemm %8.1f us  Lt heuristic #0 %8.1f us  best of %2d %8.1f us (#%d)  %.2fx\n",
           s.what, s.batch, s.M, s.N, s.K, tdef, first, got, best, bi, tdef / best);
    total_default += tdef; total_best += best < tdef ? best : tdef;
    cudaFree(A); cudaFree(B); cudaFree(C);
  }
  printf("sum: cublasSgemm %.1f us, best per shape %.1f us (%.2fx)\n", total_default, total_best, total_default / total_best);
  return 0;
}
