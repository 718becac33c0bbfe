// The vendor-BLAS baseline the benchmarks compare with (bench/bench_gpu.cpp): a bf16 GEMM with
// fp32 accumulation, C[M][N] = A[M][K] * B[K][N], as a peer user would run the same shapes.
// cuBLAS on NVIDIA (blas_baseline_cublas.cu); absent elsewhere (blas_baseline_none.cpp).
#pragma once

#include <string>

// Seconds per GEMM on device `device`, averaged over `iterations` after a warm-up; false with
// the reason when there is no vendor BLAS in this build.
bool coli_blas_bf16_gemm_seconds(int device, int M, int N, int K, int iterations, double *seconds, std::string *why);
