#include <metal_stdlib>
using namespace metal;

// y = bf16(x); z = float(y)
// threadgroups 3 x 64 threads
kernel void bf16_round_trip(device const float* x [[buffer(0)]],
    device ushort* y [[buffer(1)]],
    device float* z [[buffer(2)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i < 131) {
        { const uint mlb_u = as_type<uint>(x[i]); y[i] = (ushort)((mlb_u & 0x7fffffffu) > 0x7f800000u ? (mlb_u >> 16) | 0x40u : (mlb_u + 0x7fffu + ((mlb_u >> 16) & 1u)) >> 16); }
        z[i] = as_type<float>((uint)y[i] << 16);
    }
}
