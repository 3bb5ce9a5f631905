#include <metal_stdlib>
using namespace metal;

// y = bf16(x); z = float(y), 8 bytes of y at a time
// threadgroups 1 x 64 threads
kernel void bf16_round_trip4(device const float* x [[buffer(0)]],
    device ushort* y [[buffer(1)]],
    device float* z [[buffer(2)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid * 4;
    if (i < 132) {
        { const uint mlb_u = as_type<uint>(x[i]); y[i] = (ushort)((mlb_u & 0x7fffffffu) > 0x7f800000u ? (mlb_u >> 16) | 0x40u : (mlb_u + 0x7fffu + ((mlb_u >> 16) & 1u)) >> 16); }
        { const uint mlb_u = as_type<uint>(x[i + 1]); y[i + 1] = (ushort)((mlb_u & 0x7fffffffu) > 0x7f800000u ? (mlb_u >> 16) | 0x40u : (mlb_u + 0x7fffu + ((mlb_u >> 16) & 1u)) >> 16); }
        { const uint mlb_u = as_type<uint>(x[i + 2]); y[i + 2] = (ushort)((mlb_u & 0x7fffffffu) > 0x7f800000u ? (mlb_u >> 16) | 0x40u : (mlb_u + 0x7fffu + ((mlb_u >> 16) & 1u)) >> 16); }
        { const uint mlb_u = as_type<uint>(x[i + 3]); y[i + 3] = (ushort)((mlb_u & 0x7fffffffu) > 0x7f800000u ? (mlb_u >> 16) | 0x40u : (mlb_u + 0x7fffu + ((mlb_u >> 16) & 1u)) >> 16); }
        float v0 = as_type<float>((uint)y[i] << 16);
        float v1 = as_type<float>((uint)y[i + 1] << 16);
        float v2 = as_type<float>((uint)y[i + 2] << 16);
        float v3 = as_type<float>((uint)y[i + 3] << 16);
        z[i] = v0;
        z[i + 1] = v1;
        z[i + 2] = v2;
        z[i + 3] = v3;
    }
}
