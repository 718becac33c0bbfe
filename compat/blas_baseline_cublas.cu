// cuBLAS bf16 GEMM baseline (NVIDIA builds): cublasGemmEx with bf16 inputs and fp32 compute,
// the tensor-core path a PyTorch bf16 matmul takes. Timed with CUDA events.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include "blas_baseline.h"

bool coli_blas_bf16_gemm_seconds(int device, int M, int N, int K, int iterations, double *seconds, std::string *why) {
    if (cudaSetDevice(device) != cudaSuccess) {
        *why = "cudaSetDevice failed";
        return false;
    }
    __nv_bfloat16 *a = nullptr, *b = nullptr;
    float *c = nullptr;
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    if (cudaMalloc(&a, na * 2) != cudaSuccess || cudaMalloc(&b, nb * 2) != cudaSuccess || cudaMalloc(&c, nc * 4) != cudaSuccess) {
        cudaFree(a), cudaFree(b), cudaFree(c);
        *why = "cudaMalloc failed";
        return false;
    }
    std::vector<__nv_bfloat16> host(na > nb ? na : nb);
    for (size_t k = 0; k < host.size(); ++k) host[k] = __float2bfloat16(((int)(k * 2654435761u % 2001) - 1000) / 1000.0f);
    cudaMemcpy(a, host.data(), na * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(b, host.data(), nb * 2, cudaMemcpyHostToDevice);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        *why = "cublasCreate failed";
        return false;
    }
    const float one = 1.0f, zero = 0.0f;
    // Column-major cuBLAS: C^T[N][M] = B^T[N][K] * A^T[K][M].
    auto gemm = [&] {
        return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16BF, N, a, CUDA_R_16BF, K, &zero, c,
                            CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    bool ok = gemm() == CUBLAS_STATUS_SUCCESS;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaDeviceSynchronize();
    cudaEventRecord(e0);
    for (int k = 0; k < iterations && ok; ++k) ok = gemm() == CUBLAS_STATUS_SUCCESS;
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    *seconds = ms * 1e-3 / iterations;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cublasDestroy(h);
    cudaFree(a), cudaFree(b), cudaFree(c);
    if (!ok) *why = "cublasGemmEx failed";
    return ok;
}
