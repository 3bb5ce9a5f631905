// CUDA C++; compile with nvcc or NVRTC.

// im2col of 3 images [1,28,28] side by side, 3x3 window
// threadgroups 8 x 256 threads
extern "C" __global__ void mlb000_im2col(const float* __restrict__ x,
    float* __restrict__ cols) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
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
extern "C" __global__ void mlb001_conv_epilogue(const float* __restrict__ rows,
    float* __restrict__ y,
    const float* __restrict__ b) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 8112) {
        return;
    }
    float v = rows[(i / 676 % 4 * 3 + i / 2704) * 676 + i % 676] + b[i / 676 % 4];
    y[i] = fmaxf(v, 0.0f);
}

// max pool [3,4,26,26] -> 13x13
// threadgroups 8 x 256 threads
extern "C" __global__ void mlb002_maxpool2d(const float* __restrict__ x,
    float* __restrict__ y) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
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
                m = fmaxf(m, x[base + xi]);
            }
        }
    }
    y[i] = m;
}

// bias + "relu" epilogue, 48 elements, 16 channels x 1
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb003_bias_act(float* __restrict__ y,
    const float* __restrict__ b) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 48) {
        return;
    }
    float v = y[i] + b[i % 16];
    y[i] = fmaxf(v, 0.0f);
}

// dropout rate 0.25, stream 0xa9a58d8c, 48 elements, 4 elements a thread
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb004_dropout(const unsigned int* __restrict__ args,
    const float* __restrict__ x,
    float* __restrict__ y,
    float* __restrict__ mask) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 12) {
        return;
    }
    int i4 = i * 4;
    const float4 mlb4_ld_x_0 = *reinterpret_cast<const float4*>(&x[i4]);
    float ld_x_0 = mlb4_ld_x_0.x;
    float ld_x_1 = mlb4_ld_x_0.y;
    float ld_x_2 = mlb4_ld_x_0.z;
    float ld_x_3 = mlb4_ld_x_0.w;
    int e_0 = i4;
    unsigned int h_u_0 = (unsigned int)e_0 * 2654435769u ^ (args[2] ^ 2846199180u);
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
    unsigned int h_u_1 = (unsigned int)e_1 * 2654435769u ^ (args[2] ^ 2846199180u);
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
    unsigned int h_u_2 = (unsigned int)e_2 * 2654435769u ^ (args[2] ^ 2846199180u);
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
    unsigned int h_u_3 = (unsigned int)e_3 * 2654435769u ^ (args[2] ^ 2846199180u);
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
    *reinterpret_cast<float4*>(&mask[i4]) = make_float4(st_mask_0, st_mask_1, st_mask_2, st_mask_3);
    *reinterpret_cast<float4*>(&y[i4]) = make_float4(st_y_0, st_y_1, st_y_2, st_y_3);
}

// dense layer [3,16]·[10,16]ᵀ, 32 lanes an output, bias + ""
// threadgroups 4 x 256 threads
extern "C" __global__ void mlb005_dense_dot(const float* __restrict__ x,
    const float* __restrict__ w,
    float* __restrict__ y,
    const float* __restrict__ b) {
    __shared__ __align__(16) float sh[256];
    int lane = (int)threadIdx.x % 32;
    int o = (int)blockIdx.x * 8 + (int)threadIdx.x / 32;
    int xb = o / 10 * 16;
    int wb = o % 10 * 16;
    float acc = 0.0f;
    if (o < 30) {
        for (int j = lane; j < 16; j += 32) {
            acc = acc + x[xb + j] * w[wb + j];
        }
    }
    sh[(int)threadIdx.x] = acc;
    __syncthreads();
    if (lane < 16) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 16];
    }
    __syncthreads();
    if (lane < 8) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 8];
    }
    __syncthreads();
    if (lane < 4) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 4];
    }
    __syncthreads();
    if (lane < 2) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 2];
    }
    __syncthreads();
    if (lane < 1) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 1];
    }
    if (lane == 0 && o < 30) {
        y[o] = sh[(int)threadIdx.x] + b[o % 10];
    }
}

// softmax cross-entropy, batch 3, 10 classes
// threadgroups 1 x 2 threads
extern "C" __global__ void mlb006_softmax_xent(const float* __restrict__ z,
    const float* __restrict__ t,
    float* __restrict__ loss,
    float* __restrict__ dz) {
    __shared__ __align__(16) float sh[2];
    float acc = 0.0f;
    for (int r = (int)threadIdx.x; r < 3; r += 2) {
        int live = 0;
        for (int c = 0; c < 10; c += 1) {
            live = t[r * 10 + c] != 0.0f ? 1 : live;
        }
        if (live != 0) {
            float m = z[r * 10];
            for (int c = 1; c < 10; c += 1) {
                m = fmaxf(m, z[r * 10 + c]);
            }
            float s = 0.0f;
            for (int c = 0; c < 10; c += 1) {
                s = s + expf(z[r * 10 + c] - m);
            }
            float lse = m + logf(s);
            for (int c = 0; c < 10; c += 1) {
                float lp = z[r * 10 + c] - lse;
                acc = acc - t[r * 10 + c] * lp;
                dz[r * 10 + c] = (expf(lp) - t[r * 10 + c]) * 0.33333334f;
            }
        } else {
            for (int c = 0; c < 10; c += 1) {
                dz[r * 10 + c] = 0.0f;
            }
        }
    }
    sh[(int)threadIdx.x] = acc;
    __syncthreads();
    if ((int)threadIdx.x < 1) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 1];
    }
    __syncthreads();
    float total = sh[0];
    __syncthreads();
    if ((int)threadIdx.x == 0) {
        loss[0] = total * 0.33333334f;
    }
}

// bias gradient: sums of [3,10,1] over axes 0 and 2
// threadgroups 10 x 2 threads
extern "C" __global__ void mlb007_bias_grad(const float* __restrict__ dy,
    float* __restrict__ db) {
    __shared__ __align__(16) float sh[2];
    float acc0 = 0.0f;
    float acc1 = 0.0f;
    for (int j = (int)threadIdx.x; j < 3; j += 4) {
        acc0 = acc0 + dy[j * 10 + (int)blockIdx.x];
        if (j + 2 < 3) {
            acc1 = acc1 + dy[(j + 2) * 10 + (int)blockIdx.x];
        }
    }
    float acc = acc0 + acc1;
    sh[(int)threadIdx.x] = acc;
    __syncthreads();
    if ((int)threadIdx.x < 1) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 1];
    }
    __syncthreads();
    float total = sh[0];
    __syncthreads();
    if ((int)threadIdx.x == 0) {
        db[(int)blockIdx.x] = total;
    }
}

// dropout backward, 48 elements, 4 elements a thread
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb008_dropout_bwd(const float* __restrict__ mask,
    const float* __restrict__ dy,
    float* __restrict__ dx) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 12) {
        return;
    }
    int i4 = i * 4;
    const float4 mlb4_ld_dy_0 = *reinterpret_cast<const float4*>(&dy[i4]);
    float ld_dy_0 = mlb4_ld_dy_0.x;
    float ld_dy_1 = mlb4_ld_dy_0.y;
    float ld_dy_2 = mlb4_ld_dy_0.z;
    float ld_dy_3 = mlb4_ld_dy_0.w;
    const float4 mlb4_ld_mask_0 = *reinterpret_cast<const float4*>(&mask[i4]);
    float ld_mask_0 = mlb4_ld_mask_0.x;
    float ld_mask_1 = mlb4_ld_mask_0.y;
    float ld_mask_2 = mlb4_ld_mask_0.z;
    float ld_mask_3 = mlb4_ld_mask_0.w;
    float st_dx_0 = ld_dy_0 * ld_mask_0;
    float st_dx_1 = ld_dy_1 * ld_mask_1;
    float st_dx_2 = ld_dy_2 * ld_mask_2;
    float st_dx_3 = ld_dy_3 * ld_mask_3;
    *reinterpret_cast<float4*>(&dx[i4]) = make_float4(st_dx_0, st_dx_1, st_dx_2, st_dx_3);
}

// "relu" backward from y, 48 elements
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb009_act_bwd(const float* __restrict__ y,
    float* __restrict__ dy) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 48) {
        return;
    }
    dy[i] = dy[i] * (y[i] > 0.0f ? 1.0f : 0.0f);
}

// bias gradient: sums of [3,16,1] over axes 0 and 2
// threadgroups 16 x 2 threads
extern "C" __global__ void mlb010_bias_grad(const float* __restrict__ dy,
    float* __restrict__ db) {
    __shared__ __align__(16) float sh[2];
    float acc0 = 0.0f;
    float acc1 = 0.0f;
    for (int j = (int)threadIdx.x; j < 3; j += 4) {
        acc0 = acc0 + dy[j * 16 + (int)blockIdx.x];
        if (j + 2 < 3) {
            acc1 = acc1 + dy[(j + 2) * 16 + (int)blockIdx.x];
        }
    }
    float acc = acc0 + acc1;
    sh[(int)threadIdx.x] = acc;
    __syncthreads();
    if ((int)threadIdx.x < 1) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 1];
    }
    __syncthreads();
    float total = sh[0];
    __syncthreads();
    if ((int)threadIdx.x == 0) {
        db[(int)blockIdx.x] = total;
    }
}

// max pool backward [3,4,26,26] <- 13x13, one thread per 2x2 window
// threadgroups 8 x 256 threads
extern "C" __global__ void mlb011_maxpool2d_bwd(const float* __restrict__ x,
    const float* __restrict__ dy,
    float* __restrict__ dx) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
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
extern "C" __global__ void mlb012_conv_rows(const float* __restrict__ dy,
    float* __restrict__ rows,
    const float* __restrict__ y) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 8112) {
        return;
    }
    int s = (i / 676 % 3 * 4 + i / 2028) * 676 + i % 676;
    rows[i] = dy[s] * (y[s] > 0.0f ? 1.0f : 0.0f);
}

// bias gradient: sums of [1,4,2028] over axes 0 and 2
// threadgroups 4 x 1024 threads
extern "C" __global__ void mlb013_bias_grad(const float* __restrict__ dy,
    float* __restrict__ db) {
    __shared__ __align__(16) float sh[1024];
    float acc0 = 0.0f;
    float acc1 = 0.0f;
    for (int j = (int)threadIdx.x; j < 2028; j += 2048) {
        acc0 = acc0 + dy[(j / 2028 * 4 + (int)blockIdx.x) * 2028 + j % 2028];
        if (j + 1024 < 2028) {
            acc1 = acc1 + dy[((j + 1024) / 2028 * 4 + (int)blockIdx.x) * 2028 + (j + 1024) % 2028];
        }
    }
    float acc = acc0 + acc1;
    sh[(int)threadIdx.x] = acc;
    __syncthreads();
    if ((int)threadIdx.x < 512) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 512];
    }
    __syncthreads();
    if ((int)threadIdx.x < 256) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 256];
    }
    __syncthreads();
    if ((int)threadIdx.x < 128) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 128];
    }
    __syncthreads();
    if ((int)threadIdx.x < 64) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 64];
    }
    __syncthreads();
    if ((int)threadIdx.x < 32) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 32];
    }
    __syncthreads();
    if ((int)threadIdx.x < 16) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 16];
    }
    __syncthreads();
    if ((int)threadIdx.x < 8) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 8];
    }
    __syncthreads();
    if ((int)threadIdx.x < 4) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 4];
    }
    __syncthreads();
    if ((int)threadIdx.x < 2) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 2];
    }
    __syncthreads();
    if ((int)threadIdx.x < 1) {
        sh[(int)threadIdx.x] = sh[(int)threadIdx.x] + sh[(int)threadIdx.x + 1];
    }
    __syncthreads();
    float total = sh[0];
    __syncthreads();
    if ((int)threadIdx.x == 0) {
        db[(int)blockIdx.x] = total;
    }
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 36 elements
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb014_adam(const unsigned int* __restrict__ args,
    const float* __restrict__ g,
    float* __restrict__ m,
    float* __restrict__ v,
    float* __restrict__ p) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 36) {
        return;
    }
    float lr = __uint_as_float(args[0]);
    float bc1 = 1.0f - expf((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - expf((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (sqrtf(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 4 elements
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb015_adam(const unsigned int* __restrict__ args,
    const float* __restrict__ g,
    float* __restrict__ m,
    float* __restrict__ v,
    float* __restrict__ p) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 4) {
        return;
    }
    float lr = __uint_as_float(args[0]);
    float bc1 = 1.0f - expf((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - expf((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (sqrtf(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 10816 elements
// threadgroups 43 x 256 threads
extern "C" __global__ void mlb016_adam(const unsigned int* __restrict__ args,
    const float* __restrict__ g,
    float* __restrict__ m,
    float* __restrict__ v,
    float* __restrict__ p) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 10816) {
        return;
    }
    float lr = __uint_as_float(args[0]);
    float bc1 = 1.0f - expf((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - expf((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (sqrtf(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 16 elements
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb017_adam(const unsigned int* __restrict__ args,
    const float* __restrict__ g,
    float* __restrict__ m,
    float* __restrict__ v,
    float* __restrict__ p) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 16) {
        return;
    }
    float lr = __uint_as_float(args[0]);
    float bc1 = 1.0f - expf((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - expf((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (sqrtf(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 160 elements
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb018_adam(const unsigned int* __restrict__ args,
    const float* __restrict__ g,
    float* __restrict__ m,
    float* __restrict__ v,
    float* __restrict__ p) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 160) {
        return;
    }
    float lr = __uint_as_float(args[0]);
    float bc1 = 1.0f - expf((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - expf((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (sqrtf(v1 / bc2) + 1e-08f);
}

// adam beta1 0.9 beta2 0.999 eps 1e-08 weight decay 0, 10 elements
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb019_adam(const unsigned int* __restrict__ args,
    const float* __restrict__ g,
    float* __restrict__ m,
    float* __restrict__ v,
    float* __restrict__ p) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 10) {
        return;
    }
    float lr = __uint_as_float(args[0]);
    float bc1 = 1.0f - expf((float)args[1] * -0.105360545f);
    float bc2 = 1.0f - expf((float)args[1] * -0.0010004875f);
    float w = p[i];
    float d = g[i];
    float m1 = 0.9f * m[i] + 0.100000024f * d;
    float v1 = 0.999f * v[i] + 0.0009999871f * (d * d);
    m[i] = m1;
    v[i] = v1;
    p[i] = w - lr * (m1 / bc1) / (sqrtf(v1 / bc2) + 1e-08f);
}

// copy, 48 elements
// threadgroups 1 x 256 threads
extern "C" __global__ void mlb020_copy(const float* __restrict__ x,
    float* __restrict__ y) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= 48) {
        return;
    }
    y[i] = x[i];
}
