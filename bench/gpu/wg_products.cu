// wg_products: models/mnist.cue's Winograd products (batch 250, F(4x4,5x5): 64 products x 7 chunks,
// OC 64, C 32, 572 tiles a chunk) by cublasSgemmStridedBatched against register-tiled kernels with the
// whole K in shared memory, each in one CUDA graph of 5 runs, results compared with cuBLAS's. The
// probe behind emit/gpu/winograd_products.go. Built and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 -o wg_products wg_products.cu -lcublas && ./wg_products
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define CK(x) do { auto r = (x); if (r != 0) { printf("error %d at %s:%d\n", (int)r, __FILE__, __LINE__); return 1; } } while (0)

// block: OCB output channels x TB tiles of product b; thread RM x RN, rows o = to + i*(OCB/RM)... interleaved
template <int OC, int K, int TB, int RM, int RN, bool UT>
__global__ void __launch_bounds__((OC / RM) * (TB / RN)) wgemm(const float *__restrict__ U, const float *__restrict__ V, float *__restrict__ M, int TC, int tblocks) {
  constexpr int TO = OC / RM, TT = TB / RN, T = TO * TT;
  __shared__ float Us[K][OC], Vs[K][TB];
  int b = blockIdx.x / tblocks, t0 = blockIdx.x % tblocks * TB, tid = threadIdx.x;
  const float *u = U + (long)b * OC * K, *v = V + (long)b * K * TC;
  if (UT) { for (int i = tid; i < OC * K; i += T) Us[i / OC][i % OC] = u[i]; }   // U stored [K][OC]
  else { for (int i = tid; i < OC * K; i += T) Us[i % K][i / K] = u[i]; }       // U stored [OC][K]
  for (int i = tid; i < K * TB; i += T) { int k = i / TB, t = i % TB; Vs[k][t] = t0 + t < TC ? v[(long)k * TC + t0 + t] : 0.f; }
  __syncthreads();
  int to = tid / TT, tt = tid % TT;
  float acc[RM][RN] = {};
#pragma unroll
  for (int k = 0; k < K; k++) {
    float a[RM], c[RN];
#pragma unroll
    for (int i = 0; i < RM; i++) a[i] = Us[k][(i / 4) * (TO * 4) + to * 4 + i % 4];
#pragma unroll
    for (int j = 0; j < RN; j++) c[j] = Vs[k][(j / 4) * (TT * 4) + tt * 4 + j % 4];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < RN; j++) acc[i][j] += a[i] * c[j];
  }
  float *m = M + (long)b * OC * TC;
#pragma unroll
  for (int i = 0; i < RM; i++) {
    int o = (i / 4) * (TO * 4) + to * 4 + i % 4;
#pragma unroll
    for (int j = 0; j < RN; j++) {
      int t = t0 + (j / 4) * (TT * 4) + tt * 4 + j % 4;
      if (t < TC) m[(long)o * TC + t] = acc[i][j];
    }
  }
}


// contiguous: thread's RN tiles are tt*RN .. +RN (float4 stores when VEC), OC rows to + i*TO
template <int OC, int K, int TB, int RM, int RN, bool VEC>
__global__ void __launch_bounds__((OC / RM) * (TB / RN)) wgemm2(const float *__restrict__ U, const float *__restrict__ V, float *__restrict__ M, int TC, int tblocks) {
  constexpr int TO = OC / RM, TT = TB / RN, T = TO * TT;
  __shared__ __align__(16) float Us[K][OC];
  __shared__ __align__(16) float Vs[K][TB];
  int b = blockIdx.x / tblocks, t0 = blockIdx.x % tblocks * TB, tid = threadIdx.x;
  const float *u = U + (long)b * OC * K, *v = V + (long)b * K * TC;
  for (int i = tid; i < OC * K; i += T) Us[i / OC][i % OC] = u[i];
  for (int i = tid; i < K * TB; i += T) { int k = i / TB, t = i % TB; Vs[k][t] = t0 + t < TC ? v[(long)k * TC + t0 + t] : 0.f; }
  __syncthreads();
  int to = tid / TT, tt = tid % TT;
  float acc[RM][RN] = {};
#pragma unroll
  for (int k = 0; k < K; k++) {
    float a[RM], c[RN];
#pragma unroll
    for (int i = 0; i < RM; i++) a[i] = Us[k][to + i * TO];
    if (VEC) {
#pragma unroll
      for (int j = 0; j < RN; j += 4) { float4 q = *(const float4 *)&Vs[k][tt * RN + j]; c[j] = q.x; c[j+1] = q.y; c[j+2] = q.z; c[j+3] = q.w; }
    } else {
#pragma unroll
      for (int j = 0; j < RN; j++) c[j] = Vs[k][tt * RN + j];
    }
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < RN; j++) acc[i][j] += a[i] * c[j];
  }
  float *m = M + (long)b * OC * TC;
#pragma unroll
  for (int i = 0; i < RM; i++) {
    long row = (long)(to + i * TO) * TC;
    int t = t0 + tt * RN;
    if (VEC && t + RN <= TC && (TC % 4) == 0) {
#pragma unroll
      for (int j = 0; j < RN; j += 4) *(float4 *)&m[row + t + j] = make_float4(acc[i][j], acc[i][j+1], acc[i][j+2], acc[i][j+3]);
    } else {
#pragma unroll
      for (int j = 0; j < RN; j++) if (t + j < TC) m[row + t + j] = acc[i][j];
    }
  }
}

// wgemm3: 4x4 a thread, 64 OC x 64 tiles a step, NB steps a block (U loaded once), V loaded as float4,
// next step's V prefetched into registers while this one computes (PF), streaming stores (CS)
template <int NB, bool PF, bool CS>
__global__ void __launch_bounds__(256) wgemm3(const float *__restrict__ U, const float *__restrict__ V, float *__restrict__ M, int TC, int tblocks) {
  constexpr int OC = 64, K = 32, TB = 64, RM = 4, RN = 4, TO = 16, TT = 16, T = 256;
  __shared__ __align__(16) float Us[K][OC];
  __shared__ __align__(16) float Vs[K][TB];
  int groups = (tblocks + NB - 1) / NB;
  int b = blockIdx.x / groups, g = blockIdx.x % groups, tid = threadIdx.x;
  const float *u = U + (long)b * OC * K, *v = V + (long)b * K * TC;
  float *m = M + (long)b * OC * TC;
  for (int i = tid; i < OC * K / 4; i += T) *(float4 *)&Us[0][4 * i] = *(const float4 *)&u[4 * i];
  // V step: 32 rows x 64 tiles = 512 float4, 2 a thread
  float4 pre[2];
  auto loadV = [&](int t0) {
#pragma unroll
    for (int r = 0; r < 2; r++) { int q = tid + r * T, k = q / 16, t = (q % 16) * 4;
      pre[r] = t0 + t + 4 <= TC ? *(const float4 *)&v[(long)k * TC + t0 + t] : make_float4(0, 0, 0, 0); }
  };
  int tb0 = g * NB, tb1 = min(tblocks, tb0 + NB);
  loadV(tb0 * TB);
  int to = tid / TT, tt = tid % TT;
  for (int tb = tb0; tb < tb1; tb++) {
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 2; r++) { int q = tid + r * T, k = q / 16, t = (q % 16) * 4; *(float4 *)&Vs[k][t] = pre[r]; }
    __syncthreads();
    if (PF && tb + 1 < tb1) loadV((tb + 1) * TB);
    float acc[RM][RN] = {};
#pragma unroll
    for (int k = 0; k < K; k++) {
      float a[RM];
#pragma unroll
      for (int i = 0; i < RM; i++) a[i] = Us[k][to + i * TO];
      float4 q = *(const float4 *)&Vs[k][tt * 4];
      float c[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < RN; j++) acc[i][j] += a[i] * c[j];
    }
    int t = tb * TB + tt * 4;
#pragma unroll
    for (int i = 0; i < RM; i++) {
      long row = (long)(to + i * TO) * TC;
      if (t + 4 <= TC) { float4 o = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        if (CS) __stcs((float4 *)&m[row + t], o); else *(float4 *)&m[row + t] = o; }
    }
    if (!PF && tb + 1 < tb1) loadV((tb + 1) * TB);
  }
}

int main() {
  const int P = 448, OC = 64, C = 32, TC = 572;
  size_t nu = (size_t)P * OC * C, nv = (size_t)P * C * TC, nm = (size_t)P * OC * TC;
  std::vector<float> hu(nu), hut(nu), hv(nv);
  unsigned s = 7; auto rnd = [&] { s = s * 1664525u + 1013904223u; return (float)((s >> 8) & 0xffff) / 65536.f - 0.5f; };
  for (auto &x : hu) x = rnd(); for (auto &x : hv) x = rnd();
  for (int b = 0; b < P; b++) for (int o = 0; o < OC; o++) for (int k = 0; k < C; k++) hut[(size_t)b * OC * C + k * OC + o] = hu[(size_t)b * OC * C + o * C + k];
  float *U, *UT, *V, *M, *M2;
  CK(cudaMalloc(&U, nu * 4)); CK(cudaMalloc(&UT, nu * 4)); CK(cudaMalloc(&V, nv * 4)); CK(cudaMalloc(&M, nm * 4)); CK(cudaMalloc(&M2, nm * 4));
  cudaMemcpy(U, hu.data(), nu * 4, cudaMemcpyHostToDevice); cudaMemcpy(UT, hut.data(), nu * 4, cudaMemcpyHostToDevice); cudaMemcpy(V, hv.data(), nv * 4, cudaMemcpyHostToDevice);
  cublasHandle_t h; CK(cublasCreate(&h)); cudaStream_t st; cudaStreamCreate(&st); cublasSetStream(h, st);
  float one = 1, zero = 0;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timeGraph = [&](const char *what, auto f) {
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal); for (int i = 0; i < 5; i++) f();
    cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
    cudaGraphLaunch(ge, st); cudaStreamSynchronize(st);
    std::vector<float> ts;
    for (int r = 0; r < 30; r++) { cudaEventRecord(e0, st); cudaGraphLaunch(ge, st); cudaEventRecord(e1, st); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms * 1000 / 5); }
    std::sort(ts.begin(), ts.end()); printf("%-44s %6.1f us (graph of 5, median of 30) %s\n", what, ts[15], cudaGetErrorString(cudaGetLastError()));
  };
  timeGraph("cublasSgemmStridedBatched", [&] {
    cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, TC, OC, C, &one, V, TC, (long long)C * TC, U, C, (long long)OC * C, &zero, M, TC, (long long)OC * TC, P);
  });
  std::vector<float> ref(nm), got(nm); cudaMemcpy(ref.data(), M, nm * 4, cudaMemcpyDeviceToHost);
  auto check = [&] { cudaMemcpy(got.data(), M2, nm * 4, cudaMemcpyDeviceToHost); double e = 0; for (size_t i = 0; i < nm; i++) e = std::max(e, (double)fabsf(got[i] - ref[i])); printf("   max |diff| %.3g\n", e); cudaMemset(M2, 0, nm * 4); };
#define V_(NAME, TB, RM, RN, UTR) { int tb = (TC + TB - 1) / TB; timeGraph(NAME, [&] { wgemm<64, 32, TB, RM, RN, UTR><<<P * tb, (64 / RM) * (TB / RN), 0, st>>>(UTR ? UT : U, V, M2, TC, tb); }); check(); }
#define W_(NAME, TB, RM, RN, VEC) { int tb = (TC + TB - 1) / TB; timeGraph(NAME, [&] { wgemm2<64, 32, TB, RM, RN, VEC><<<P * tb, (64 / RM) * (TB / RN), 0, st>>>(UT, V, M2, TC, tb); }); check(); }
#define X_(NAME, NB, PF, CS) { int tb = (TC + 63) / 64, gr = (tb + NB - 1) / NB; timeGraph(NAME, [&] { wgemm3<NB, PF, CS><<<P * gr, 256, 0, st>>>(UT, V, M2, TC, tb); }); check(); }
  for (int rep = 0; rep < 2; rep++) {
    W_("contig 64x64, 4x4 (256 thr) float4", 64, 4, 4, true)
    X_("v3 NB1", 1, false, false)
    X_("v3 NB1 cs", 1, false, true)
    X_("v3 NB3 pf", 3, true, false)
    X_("v3 NB3 pf cs", 3, true, true)
    X_("v3 NB9 pf", 9, true, false)
    X_("v3 NB9 pf cs", 9, true, true)
    X_("v3 NB3 nopf", 3, false, false)
  }
  return 0;
}
