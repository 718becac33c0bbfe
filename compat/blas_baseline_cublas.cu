// cuBLAS bf16 GEMM baseline (NVIDIA builds): cublasGemmEx with bf16 inputs and fp32 compute,
// the tensor-core path a PyTorch bf16 matmul takes. Timed with CUDA events.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include "blas_baseline.h"

namespace {

// Operands and handle for one shape, made once: each benchmark iteration times GEMMs only.
struct GemmSetup {
    int device = -1, M = 0, N = 0, K = 0;
    __nv_bfloat16 *a = nullptr, *b = nullptr;
    float *c = nullptr;
    cublasHandle_t handle = nullptr;
    void release() {
        if (handle) cublasDestroy(handle);
        cudaFree(a), cudaFree(b), cudaFree(c);
        *this = GemmSetup{};
    }
};

bool prepare(GemmSetup &g, int device, int M, int N, int K, std::string *why) {
    if (g.handle && g.device == device && g.M == M && g.N == N && g.K == K) return true;
    g.release();
    if (cudaSetDevice(device) != cudaSuccess) {
        *why = "cudaSetDevice failed";
        return false;
    }
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    if (cudaMalloc(&g.a, na * 2) != cudaSuccess || cudaMalloc(&g.b, nb * 2) != cudaSuccess ||
        cudaMalloc(&g.c, nc * 4) != cudaSuccess || cublasCreate(&g.handle) != CUBLAS_STATUS_SUCCESS) {
        g.release();
        *why = "cudaMalloc or cublasCreate failed";
        return false;
    }
    std::vector<__nv_bfloat16> host(na > nb ? na : nb);
    for (size_t k = 0; k < host.size(); ++k) host[k] = __float2bfloat16(((int)(k * 2654435761u % 2001) - 1000) / 1000.0f);
    cudaMemcpy(g.a, host.data(), na * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(g.b, host.data(), nb * 2, cudaMemcpyHostToDevice);
    g.device = device, g.M = M, g.N = N, g.K = K;
    return true;
}

} // namespace

bool coli_blas_bf16_gemm_seconds(int device, int M, int N, int K, int iterations, double *seconds, std::string *why) {
    static GemmSetup g;
    if (!prepare(g, device, M, N, K, why)) return false;
    cudaSetDevice(device);
    const float one = 1.0f, zero = 0.0f;
    // Column-major cuBLAS: C^T[N][M] = B^T[N][K] * A^T[K][M].
    auto gemm = [&] {
        return cublasGemmEx(g.handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, g.b, CUDA_R_16BF, N, g.a, CUDA_R_16BF, K,
                            &zero, g.c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
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
    if (!ok) *why = "cublasGemmEx failed";
    return ok;
}
