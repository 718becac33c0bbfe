// Runs the shared numerics on the device (gpu_backend.h: run_numerics_probe). The CPU side of the
// comparison is the same header compiled by the host compiler: src/tests/test_gpu_device.cpp.
#pragma once

#include <string>

#include "coli_compat.h"
#include "gpu/device_context.cuh"
#include "gpu/gpu_backend.h"
#include "numerics/exact_math.h"

namespace coli::gpu {

__global__ void numerics_probe_kernel(int n, const float *x, const int *a, const int *b, const int *c,
                                      float *exp_out, float *silu_out, int *dot_out) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) {
        exp_out[k] = coli_expf(x[k]);
        silu_out[k] = coli_silu(x[k]);
        dot_out[k] = coli_dot4_i8(a[k], b[k], c[k]);
    }
}

__global__ void quantize_row_kernel(int n, const float *x, int8_t *codes, float *sx) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *sx = coli_quantize_row(x, n, codes);
}

coli_status run_numerics_probe(int ordinal, const NumericsProbe &p, std::string *why) {
    int n_dev = 0;
    const coli_status st = device_count(&n_dev, why);
    if (st != COLI_OK) return st;
    if (ordinal < 0 || ordinal >= n_dev) {
        *why = "GPU ordinal " + std::to_string(ordinal) + " does not exist";
        return COLI_ERR_NO_DEVICE;
    }
    COLI_GPU_QUERY(cudaSetDevice(ordinal), COLI_ERR_DEVICE);
    const size_t nf = sizeof(float) * p.n, ni = sizeof(int) * p.n;
    DeviceBuffer x, a, b, c, e, s, d, q, sx;
    COLI_GPU_OP(cudaMalloc(&x.ptr, nf), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&a.ptr, ni), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&b.ptr, ni), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&c.ptr, ni), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&e.ptr, nf), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&s.ptr, nf), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&d.ptr, ni), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&q.ptr, p.n), "probe cudaMalloc");
    COLI_GPU_OP(cudaMalloc(&sx.ptr, sizeof(float)), "probe cudaMalloc");
    COLI_GPU_OP(cudaMemcpy(x.ptr, p.x, nf, cudaMemcpyHostToDevice), "probe cudaMemcpy");
    COLI_GPU_OP(cudaMemcpy(a.ptr, p.a, ni, cudaMemcpyHostToDevice), "probe cudaMemcpy");
    COLI_GPU_OP(cudaMemcpy(b.ptr, p.b, ni, cudaMemcpyHostToDevice), "probe cudaMemcpy");
    COLI_GPU_OP(cudaMemcpy(c.ptr, p.c, ni, cudaMemcpyHostToDevice), "probe cudaMemcpy");
    const int block = 128;
    numerics_probe_kernel<<<(p.n + block - 1) / block, block>>>(
        p.n, static_cast<const float *>(x.ptr), static_cast<const int *>(a.ptr),
        static_cast<const int *>(b.ptr), static_cast<const int *>(c.ptr), static_cast<float *>(e.ptr),
        static_cast<float *>(s.ptr), static_cast<int *>(d.ptr));
    COLI_GPU_QUERY(cudaGetLastError(), COLI_ERR_DEVICE);
    quantize_row_kernel<<<1, 1>>>(p.n, static_cast<const float *>(x.ptr), static_cast<int8_t *>(q.ptr),
                                  static_cast<float *>(sx.ptr));
    COLI_GPU_QUERY(cudaGetLastError(), COLI_ERR_DEVICE);
    COLI_GPU_OP(cudaDeviceSynchronize(), "probe synchronize");
    COLI_GPU_OP(cudaMemcpy(p.exp_out, e.ptr, nf, cudaMemcpyDeviceToHost), "probe cudaMemcpy");
    COLI_GPU_OP(cudaMemcpy(p.silu_out, s.ptr, nf, cudaMemcpyDeviceToHost), "probe cudaMemcpy");
    COLI_GPU_OP(cudaMemcpy(p.dot_out, d.ptr, ni, cudaMemcpyDeviceToHost), "probe cudaMemcpy");
    COLI_GPU_OP(cudaMemcpy(p.codes, q.ptr, p.n, cudaMemcpyDeviceToHost), "probe cudaMemcpy");
    COLI_GPU_OP(cudaMemcpy(p.sx, sx.ptr, sizeof(float), cudaMemcpyDeviceToHost), "probe cudaMemcpy");
    return COLI_OK;
}

} // namespace coli::gpu
