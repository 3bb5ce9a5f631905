// CUDA C++; compile with nvcc or NVRTC.

// y = a[0]*x + y
// threadgroups 8 x 128 threads
extern "C" __global__ void conf_saxpy(const float* __restrict__ x,
    float* __restrict__ y,
    const float* __restrict__ a) {
    if ((int)(blockIdx.x * blockDim.x + threadIdx.x) < 1000) {
        y[(int)(blockIdx.x * blockDim.x + threadIdx.x)] = a[0] * x[(int)(blockIdx.x * blockDim.x + threadIdx.x)] + y[(int)(blockIdx.x * blockDim.x + threadIdx.x)];
    }
}

// out[b] = sum of x[b*1024 : (b+1)*1024]
// threadgroups 4 x 256 threads
extern "C" __global__ void conf_block_sum(const float* __restrict__ x,
    float* __restrict__ out) {
    __shared__ __align__(16) float part[256];
    float acc = 0.0f;
    for (int i = (int)threadIdx.x; i < 1024; i += 256) {
        acc = acc + x[(int)blockIdx.x * 1024 + i];
    }
    part[(int)threadIdx.x] = acc;
    __syncthreads();
    for (int k = 0; k < 8; k += 1) {
        int stride = 128 >> k;
        if ((int)threadIdx.x < stride) {
            part[(int)threadIdx.x] = part[(int)threadIdx.x] + part[(int)threadIdx.x + stride];
        }
        __syncthreads();
    }
    if ((int)threadIdx.x == 0) {
        out[(int)blockIdx.x] = part[0];
    }
}

// acc += x
// threadgroups 4 x 64 threads
extern "C" __global__ void conf_accumulate(const float* __restrict__ x,
    float* __restrict__ acc) {
    acc[(int)(blockIdx.x * blockDim.x + threadIdx.x)] = acc[(int)(blockIdx.x * blockDim.x + threadIdx.x)] + x[(int)(blockIdx.x * blockDim.x + threadIdx.x)];
}
