#include <metal_stdlib>
using namespace metal;

// y = a[0]*x + y
// threadgroups 8 x 128 threads
kernel void conf_saxpy(device const float* x [[buffer(0)]],
    device float* y [[buffer(1)]],
    device const float* a [[buffer(2)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    if ((int)mlb_gid < 1000) {
        y[(int)mlb_gid] = a[0] * x[(int)mlb_gid] + y[(int)mlb_gid];
    }
}

// out[b] = sum of x[b*1024 : (b+1)*1024]
// threadgroups 4 x 256 threads
kernel void conf_block_sum(device const float* x [[buffer(0)]],
    device float* out [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    threadgroup float part[256];
    float acc = 0.0f;
    for (int i = (int)mlb_lid; i < 1024; i += 256) {
        acc = acc + x[(int)mlb_tgid * 1024 + i];
    }
    part[(int)mlb_lid] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int k = 0; k < 8; k += 1) {
        int stride = 128 >> k;
        if ((int)mlb_lid < stride) {
            part[(int)mlb_lid] = part[(int)mlb_lid] + part[(int)mlb_lid + stride];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if ((int)mlb_lid == 0) {
        out[(int)mlb_tgid] = part[0];
    }
}

// acc += x
// threadgroups 4 x 64 threads
kernel void conf_accumulate(device const float* x [[buffer(0)]],
    device float* acc [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    acc[(int)mlb_gid] = acc[(int)mlb_gid] + x[(int)mlb_gid];
}
