// CUDA C++; compile with nvcc or NVRTC.

// y = bf16(x); z = float(y), 8 bytes of y at a time
// threadgroups 1 x 64 threads
extern "C" __global__ void bf16_round_trip4(const float* __restrict__ x,
    unsigned short* __restrict__ y,
    float* __restrict__ z) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i < 132) {
        { const unsigned int mlb_u0 = __float_as_uint(x[i]), mlb_u1 = __float_as_uint(x[i + 1]), mlb_u2 = __float_as_uint(x[i + 2]), mlb_u3 = __float_as_uint(x[i + 3]); *reinterpret_cast<uint2*>(&y[i]) = make_uint2(((mlb_u0 & 0x7fffffffu) > 0x7f800000u ? (mlb_u0 >> 16) | 0x40u : (mlb_u0 + 0x7fffu + ((mlb_u0 >> 16) & 1u)) >> 16) | ((mlb_u1 & 0x7fffffffu) > 0x7f800000u ? (mlb_u1 >> 16) | 0x40u : (mlb_u1 + 0x7fffu + ((mlb_u1 >> 16) & 1u)) >> 16) << 16, ((mlb_u2 & 0x7fffffffu) > 0x7f800000u ? (mlb_u2 >> 16) | 0x40u : (mlb_u2 + 0x7fffu + ((mlb_u2 >> 16) & 1u)) >> 16) | ((mlb_u3 & 0x7fffffffu) > 0x7f800000u ? (mlb_u3 >> 16) | 0x40u : (mlb_u3 + 0x7fffu + ((mlb_u3 >> 16) & 1u)) >> 16) << 16); }
        const uint2 mlb4_v0 = *reinterpret_cast<const uint2*>(&y[i]);
        float v0 = __uint_as_float(mlb4_v0.x << 16);
        float v1 = __uint_as_float(mlb4_v0.x & 0xffff0000u);
        float v2 = __uint_as_float(mlb4_v0.y << 16);
        float v3 = __uint_as_float(mlb4_v0.y & 0xffff0000u);
        *reinterpret_cast<float4*>(&z[i]) = make_float4(v0, v1, v2, v3);
    }
}
