#include <metal_stdlib>
using namespace metal;

// im2col of 3 images [1,28,28] side by side, 3x3 window
// threadgroups 8 x 256 threads
kernel void mlb000_im2col(device const float* x [[buffer(0)]],
    device float* cols [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 2028) {
        return;
    }
    int c = i / 2028;
    int col = i % 2028;
    int pix = col % 676;
    int h0 = pix / 26;
    int w0 = pix % 26;
    int base = col / 676 * 784 + c * 784;
    for (int kh = 0; kh < 3; kh += 1) {
        int h = h0 + kh;
        for (int kw = 0; kw < 3; kw += 1) {
            int w = w0 + kw;
            float v = 0.0f;
            if (h >= 0 && h < 28 && w >= 0 && w < 28) {
                v = x[base + (h * 28 + w)];
            }
            cols[((c * 3 + kh) * 3 + kw) * 2028 + col] = v;
        }
    }
}

// conv output rows of 3 images to [3,4,676] with bias + "relu"
// threadgroups 32 x 256 threads
kernel void mlb001_conv_epilogue(device const float* rows [[buffer(0)]],
    device float* y [[buffer(1)]],
    device const float* b [[buffer(2)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 8112) {
        return;
    }
    float v = rows[(i / 676 % 4 * 3 + i / 2704) * 676 + i % 676] + b[i / 676 % 4];
    y[i] = metal::fmax(v, 0.0f);
}

// max pool [3,4,26,26] -> 13x13
// threadgroups 8 x 256 threads
kernel void mlb002_maxpool2d(device const float* x [[buffer(0)]],
    device float* y [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 2028) {
        return;
    }
    int oh = i / 13 % 13;
    int ow = i % 13;
    int base = i / 169 * 676;
    float m = -3.4028235e+38f;
    for (int qh = 0; qh < 2; qh += 1) {
        int ih = oh * 2 + qh;
        for (int qw = 0; qw < 2; qw += 1) {
            int iw = ow * 2 + qw;
            if (ih >= 0 && ih < 26 && iw >= 0 && iw < 26) {
                int xi = ih * 26 + iw;
                m = metal::fmax(m, x[base + xi]);
            }
        }
    }
    y[i] = m;
}

// bias + "relu" epilogue, 48 elements, 16 channels x 1
// threadgroups 1 x 256 threads
kernel void mlb003_bias_act(device float* y [[buffer(0)]],
    device const float* b [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 48) {
        return;
    }
    float v = y[i] + b[i % 16];
    y[i] = metal::fmax(v, 0.0f);
}

// dropout rate 0.25, stream 0xa9a58d8c, 48 elements, 4 elements a thread
// threadgroups 1 x 256 threads
kernel void mlb004_dropout(device const uint* args [[buffer(0)]],
    device const float* x [[buffer(1)]],
    device float* y [[buffer(2)]],
    device float* mask [[buffer(3)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 12) {
        return;
    }
    int i4 = i * 4;
    float ld_x_0 = x[i4];
    float ld_x_1 = x[i4 + 1];
    float ld_x_2 = x[i4 + 2];
    float ld_x_3 = x[i4 + 3];
    int e_0 = i4;
    uint h_u_0 = (uint)e_0 * 2654435769u ^ (args[2] ^ 2846199180u);
    h_u_0 = h_u_0 ^ h_u_0 >> 16u;
    h_u_0 = h_u_0 * 2146121005u;
    h_u_0 = h_u_0 ^ h_u_0 >> 15u;
    h_u_0 = h_u_0 * 2221713035u;
    h_u_0 = h_u_0 ^ h_u_0 >> 16u;
    h_u_0 = h_u_0 ^ args[1] * 2246822507u;
    h_u_0 = h_u_0 ^ h_u_0 >> 16u;
    h_u_0 = h_u_0 * 2146121005u;
    h_u_0 = h_u_0 ^ h_u_0 >> 15u;
    h_u_0 = h_u_0 * 2221713035u;
    h_u_0 = h_u_0 ^ h_u_0 >> 16u;
    float u_0 = (float)(h_u_0 >> 8u) * 5.9604645e-08f;
    float m_0 = u_0 >= 0.25f ? 1.3333334f : 0.0f;
    float st_mask_0 = m_0;
    float st_y_0 = ld_x_0 * m_0;
    int e_1 = i4 + 1;
    uint h_u_1 = (uint)e_1 * 2654435769u ^ (args[2] ^ 2846199180u);
    h_u_1 = h_u_1 ^ h_u_1 >> 16u;
    h_u_1 = h_u_1 * 2146121005u;
    h_u_1 = h_u_1 ^ h_u_1 >> 15u;
    h_u_1 = h_u_1 * 2221713035u;
    h_u_1 = h_u_1 ^ h_u_1 >> 16u;
    h_u_1 = h_u_1 ^ args[1] * 2246822507u;
    h_u_1 = h_u_1 ^ h_u_1 >> 16u;
    h_u_1 = h_u_1 * 2146121005u;
    h_u_1 = h_u_1 ^ h_u_1 >> 15u;
    h_u_1 = h_u_1 * 2221713035u;
    h_u_1 = h_u_1 ^ h_u_1 >> 16u;
    float u_1 = (float)(h_u_1 >> 8u) * 5.9604645e-08f;
    float m_1 = u_1 >= 0.25f ? 1.3333334f : 0.0f;
    float st_mask_1 = m_1;
    float st_y_1 = ld_x_1 * m_1;
    int e_2 = i4 + 2;
    uint h_u_2 = (uint)e_2 * 2654435769u ^ (args[2] ^ 2846199180u);
    h_u_2 = h_u_2 ^ h_u_2 >> 16u;
    h_u_2 = h_u_2 * 2146121005u;
    h_u_2 = h_u_2 ^ h_u_2 >> 15u;
    h_u_2 = h_u_2 * 2221713035u;
    h_u_2 = h_u_2 ^ h_u_2 >> 16u;
    h_u_2 = h_u_2 ^ args[1] * 2246822507u;
    h_u_2 = h_u_2 ^ h_u_2 >> 16u;
    h_u_2 = h_u_2 * 2146121005u;
    h_u_2 = h_u_2 ^ h_u_2 >> 15u;
    h_u_2 = h_u_2 * 2221713035u;
    h_u_2 = h_u_2 ^ h_u_2 >> 16u;
    float u_2 = (float)(h_u_2 >> 8u) * 5.9604645e-08f;
    float m_2 = u_2 >= 0.25f ? 1.3333334f : 0.0f;
    float st_mask_2 = m_2;
    float st_y_2 = ld_x_2 * m_2;
    int e_3 = i4 + 3;
    uint h_u_3 = (uint)e_3 * 2654435769u ^ (args[2] ^ 2846199180u);
    h_u_3 = h_u_3 ^ h_u_3 >> 16u;
    h_u_3 = h_u_3 * 2146121005u;
    h_u_3 = h_u_3 ^ h_u_3 >> 15u;
    h_u_3 = h_u_3 * 2221713035u;
    h_u_3 = h_u_3 ^ h_u_3 >> 16u;
    h_u_3 = h_u_3 ^ args[1] * 2246822507u;
    h_u_3 = h_u_3 ^ h_u_3 >> 16u;
    h_u_3 = h_u_3 * 2146121005u;
    h_u_3 = h_u_3 ^ h_u_3 >> 15u;
    h_u_3 = h_u_3 * 2221713035u;
    h_u_3 = h_u_3 ^ h_u_3 >> 16u;
    float u_3 = (float)(h_u_3 >> 8u) * 5.9604645e-08f;
    float m_3 = u_3 >= 0.25f ? 1.3333334f : 0.0f;
    float st_mask_3 = m_3;
    float st_y_3 = ld_x_3 * m_3;
    mask[i4] = st_mask_0;
    mask[i4 + 1] = st_mask_1;
    mask[i4 + 2] = st_mask_2;
    mask[i4 + 3] = st_mask_3;
    y[i4] = st_y_0;
    y[i4 + 1] = st_y_1;
    y[i4 + 2] = st_y_2;
    y[i4 + 3] = st_y_3;
}

// dense layer [3,16]·[10,16]ᵀ, 32 lanes an output, bias + ""
// threadgroups 4 x 256 threads
kernel void mlb005_dense_dot(device const float* x [[buffer(0)]],
    device const float* w [[buffer(1)]],
    device float* y [[buffer(2)]],
    device const float* b [[buffer(3)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    threadgroup float sh[256];
    int lane = (int)mlb_lid % 32;
    int o = (int)mlb_tgid * 8 + (int)mlb_lid / 32;
    int xb = o / 10 * 16;
    int wb = o % 10 * 16;
    float acc = 0.0f;
    if (o < 30) {
        for (int j = lane; j < 16; j += 32) {
            acc = acc + x[xb + j] * w[wb + j];
        }
    }
    sh[(int)mlb_lid] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane < 16) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 16];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane < 8) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 8];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane < 4) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 4];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane < 2) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 2];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane < 1) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 1];
    }
    if (lane == 0 && o < 30) {
        y[o] = sh[(int)mlb_lid] + b[o % 10];
    }
}

// softmax cross-entropy, batch 3, 10 classes
// threadgroups 1 x 2 threads
kernel void mlb006_softmax_xent(device const float* z [[buffer(0)]],
    device const float* t [[buffer(1)]],
    device float* loss [[buffer(2)]],
    device float* dz [[buffer(3)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    threadgroup float sh[2];
    float acc = 0.0f;
    for (int r = (int)mlb_lid; r < 3; r += 2) {
        int live = 0;
        for (int c = 0; c < 10; c += 1) {
            live = t[r * 10 + c] != 0.0f ? 1 : live;
        }
        if (live != 0) {
            float m = z[r * 10];
            for (int c = 1; c < 10; c += 1) {
                m = metal::fmax(m, z[r * 10 + c]);
            }
            float s = 0.0f;
            for (int c = 0; c < 10; c += 1) {
                s = s + metal::exp(z[r * 10 + c] - m);
            }
            float lse = m + metal::log(s);
            for (int c = 0; c < 10; c += 1) {
                float lp = z[r * 10 + c] - lse;
                acc = acc - t[r * 10 + c] * lp;
                dz[r * 10 + c] = (metal::exp(lp) - t[r * 10 + c]) * 0.33333334f;
            }
        } else {
            for (int c = 0; c < 10; c += 1) {
                dz[r * 10 + c] = 0.0f;
            }
        }
    }
    sh[(int)mlb_lid] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 1) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 1];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = sh[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid == 0) {
        loss[0] = total * 0.33333334f;
    }
}

// bias gradient: sums of [3,10,1] over axes 0 and 2
// threadgroups 10 x 2 threads
kernel void mlb007_bias_grad(device const float* dy [[buffer(0)]],
    device float* db [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    threadgroup float sh[2];
    float acc0 = 0.0f;
    float acc1 = 0.0f;
    for (int j = (int)mlb_lid; j < 3; j += 4) {
        acc0 = acc0 + dy[j * 10 + (int)mlb_tgid];
        if (j + 2 < 3) {
            acc1 = acc1 + dy[(j + 2) * 10 + (int)mlb_tgid];
        }
    }
    float acc = acc0 + acc1;
    sh[(int)mlb_lid] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 1) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 1];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = sh[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid == 0) {
        db[(int)mlb_tgid] = total;
    }
}

// dropout backward, 48 elements, 4 elements a thread
// threadgroups 1 x 256 threads
kernel void mlb008_dropout_bwd(device const float* mask [[buffer(0)]],
    device const float* dy [[buffer(1)]],
    device float* dx [[buffer(2)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 12) {
        return;
    }
    int i4 = i * 4;
    float ld_dy_0 = dy[i4];
    float ld_dy_1 = dy[i4 + 1];
    float ld_dy_2 = dy[i4 + 2];
    float ld_dy_3 = dy[i4 + 3];
    float ld_mask_0 = mask[i4];
    float ld_mask_1 = mask[i4 + 1];
    float ld_mask_2 = mask[i4 + 2];
    float ld_mask_3 = mask[i4 + 3];
    float st_dx_0 = ld_dy_0 * ld_mask_0;
    float st_dx_1 = ld_dy_1 * ld_mask_1;
    float st_dx_2 = ld_dy_2 * ld_mask_2;
    float st_dx_3 = ld_dy_3 * ld_mask_3;
    dx[i4] = st_dx_0;
    dx[i4 + 1] = st_dx_1;
    dx[i4 + 2] = st_dx_2;
    dx[i4 + 3] = st_dx_3;
}

// "relu" backward from y, 48 elements
// threadgroups 1 x 256 threads
kernel void mlb009_act_bwd(device const float* y [[buffer(0)]],
    device float* dy [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 48) {
        return;
    }
    dy[i] = dy[i] * (y[i] > 0.0f ? 1.0f : 0.0f);
}

// bias gradient: sums of [3,16,1] over axes 0 and 2
// threadgroups 16 x 2 threads
kernel void mlb010_bias_grad(device const float* dy [[buffer(0)]],
    device float* db [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    threadgroup float sh[2];
    float acc0 = 0.0f;
    float acc1 = 0.0f;
    for (int j = (int)mlb_lid; j < 3; j += 4) {
        acc0 = acc0 + dy[j * 16 + (int)mlb_tgid];
        if (j + 2 < 3) {
            acc1 = acc1 + dy[(j + 2) * 16 + (int)mlb_tgid];
        }
    }
    float acc = acc0 + acc1;
    sh[(int)mlb_lid] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 1) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 1];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = sh[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid == 0) {
        db[(int)mlb_tgid] = total;
    }
}

// max pool backward [3,4,26,26] <- 13x13, one thread per 2x2 window
// threadgroups 8 x 256 threads
kernel void mlb011_maxpool2d_bwd(device const float* x [[buffer(0)]],
    device const float* dy [[buffer(1)]],
    device float* dx [[buffer(2)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 2028) {
        return;
    }
    int oh = i / 13 % 13;
    int ow = i % 13;
    int base = i / 169 * 676 + (oh * 52 + ow * 2);
    float best = 0.0f;
    int arg = -1;
    for (int qh = 0; qh < 2; qh += 1) {
        for (int qw = 0; qw < 2; qw += 1) {
            int xi = base + (qh * 26 + qw);
            float xv = x[xi];
            if (arg < 0 || xv > best) {
                best = xv;
                arg = xi;
            }
        }
    }
    float g = dy[i];
    for (int qh = 0; qh < 2; qh += 1) {
        for (int qw = 0; qw < 2; qw += 1) {
            int xi = base + (qh * 26 + qw);
            dx[xi] = xi == arg ? g : 0.0f;
        }
    }
}

// convolution rows [4, 3·676] from dy [3,4,676], times "relu"'s derivative from y
// threadgroups 32 x 256 threads
kernel void mlb012_conv_rows(device const float* dy [[buffer(0)]],
    device float* rows [[buffer(1)]],
    device const float* y [[buffer(2)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 8112) {
        return;
    }
    int s = (i / 676 % 3 * 4 + i / 2028) * 676 + i % 676;
    rows[i] = dy[s] * (y[s] > 0.0f ? 1.0f : 0.0f);
}

// bias gradient: sums of [1,4,2028] over axes 0 and 2
// threadgroups 4 x 1024 threads
kernel void mlb013_bias_grad(device const float* dy [[buffer(0)]],
    device float* db [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    threadgroup float sh[1024];
    float acc0 = 0.0f;
    float acc1 = 0.0f;
    for (int j = (int)mlb_lid; j < 2028; j += 2048) {
        acc0 = acc0 + dy[(j / 2028 * 4 + (int)mlb_tgid) * 2028 + j % 2028];
        if (j + 1024 < 2028) {
            acc1 = acc1 + dy[((j + 1024) / 2028 * 4 + (int)mlb_tgid) * 2028 + (j + 1024) % 2028];
        }
    }
    float acc = acc0 + acc1;
    sh[(int)mlb_lid] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 512) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 512];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 256) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 256];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 128) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 128];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 64) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 64];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 32) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 32];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 16) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 16];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 8) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 8];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 4) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 4];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 2) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 2];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid < 1) {
        sh[(int)mlb_lid] = sh[(int)mlb_lid] + sh[(int)mlb_lid + 1];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = sh[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((int)mlb_lid == 0) {
        db[(int)mlb_tgid] = total;
    }
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 36 elements
// threadgroups 1 x 256 threads
kernel void mlb014_adam(device const uint* args [[buffer(0)]],
    device const float* g [[buffer(1)]],
    device float* m [[buffer(2)]],
    device float* v [[buffer(3)]],
    device float* p [[buffer(4)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 36) {
        return;
    }
    float lr = as_type<float>(args[0]);
    float bc1 = 1.0f - metal::exp((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - metal::exp((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (metal::sqrt(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 4 elements
// threadgroups 1 x 256 threads
kernel void mlb015_adam(device const uint* args [[buffer(0)]],
    device const float* g [[buffer(1)]],
    device float* m [[buffer(2)]],
    device float* v [[buffer(3)]],
    device float* p [[buffer(4)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 4) {
        return;
    }
    float lr = as_type<float>(args[0]);
    float bc1 = 1.0f - metal::exp((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - metal::exp((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (metal::sqrt(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 10816 elements
// threadgroups 43 x 256 threads
kernel void mlb016_adam(device const uint* args [[buffer(0)]],
    device const float* g [[buffer(1)]],
    device float* m [[buffer(2)]],
    device float* v [[buffer(3)]],
    device float* p [[buffer(4)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 10816) {
        return;
    }
    float lr = as_type<float>(args[0]);
    float bc1 = 1.0f - metal::exp((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - metal::exp((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (metal::sqrt(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 16 elements
// threadgroups 1 x 256 threads
kernel void mlb017_adam(device const uint* args [[buffer(0)]],
    device const float* g [[buffer(1)]],
    device float* m [[buffer(2)]],
    device float* v [[buffer(3)]],
    device float* p [[buffer(4)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 16) {
        return;
    }
    float lr = as_type<float>(args[0]);
    float bc1 = 1.0f - metal::exp((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - metal::exp((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (metal::sqrt(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 160 elements
// threadgroups 1 x 256 threads
kernel void mlb018_adam(device const uint* args [[buffer(0)]],
    device const float* g [[buffer(1)]],
    device float* m [[buffer(2)]],
    device float* v [[buffer(3)]],
    device float* p [[buffer(4)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 160) {
        return;
    }
    float lr = as_type<float>(args[0]);
    float bc1 = 1.0f - metal::exp((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - metal::exp((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (metal::sqrt(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 10 elements
// threadgroups 1 x 256 threads
kernel void mlb019_adam(device const uint* args [[buffer(0)]],
    device const float* g [[buffer(1)]],
    device float* m [[buffer(2)]],
    device float* v [[buffer(3)]],
    device float* p [[buffer(4)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 10) {
        return;
    }
    float lr = as_type<float>(args[0]);
    float bc1 = 1.0f - metal::exp((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - metal::exp((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (metal::sqrt(v1 / bc2) + 1e-08f);
}

// copy, 48 elements
// threadgroups 1 x 256 threads
kernel void mlb020_copy(device const float* x [[buffer(0)]],
    device float* y [[buffer(1)]],
    uint mlb_gid [[thread_position_in_grid]],
    uint mlb_lid [[thread_position_in_threadgroup]],
    uint mlb_tgid [[threadgroup_position_in_grid]],
    uint mlb_tgsize [[threads_per_threadgroup]]) {
    int i = (int)mlb_gid;
    if (i >= 48) {
        return;
    }
    y[i] = x[i];
}
