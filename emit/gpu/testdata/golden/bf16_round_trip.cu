// CUDA C++; compile with nvcc or NVRTC.

// y = bf16(x); z = float(y)
// threadgroups 3 x 64 threads
extern "C" __global__ void bf16_round_trip(const float* __restrict__ x,
    unsigned short* __restrict__ y,
    float* __restrict__ z) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < 131) {
        { const unsigned int mlb_u = __float_as_uint(x[i]); y[i] = (unsigned short)((mlb_u & 0x7fffffffu) > 0x7f800000u ? (mlb_u >> 16) | 0x40u : (mlb_u + 0x7fffu + ((mlb_u >> 16) & 1u)) >> 16); }
        z[i] = __uint_as_float((unsigned int)y[i] << 16);
    }
}
