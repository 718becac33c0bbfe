// NVIDIA tensor-core matmul kernels for Q4/G4 at larger S (opt-in: COLI_CUDA_TC_W4A16=1).
// Compiled only where compat says the build has them (COLI_NV_TENSOR_CORE_PATHS: CUDA) and given
// a body only for targets with mma.sync (COLI_HAS_NV_TENSOR_CORES: sm_80+); the host runs
// tc_probe_kernel before choosing them, so a target without bodies is never selected. HIP builds
// take the portable kernels (kernels_matmul.cuh). CPU reference: src/ref/matmul_ref.cpp.
//
// One warp computes a tile of 16 activation rows x 8 output rows; a block of 4 warps covers
// 16 x 32. Operands are read straight from global memory (no shared-memory staging yet).
//  - exact: int8 x int8 -> int32 mma (m16n8k32) on the activation and weight codes: integer sums
//    are exact, and each thread applies the contract's epilogue to the elements it owns, group by
//    group in order, so results are bit-identical to every other path. G4 needs gs % 32 == 0.
//  - float (W4A16): activations and dequantized weights rounded to bfloat16, fp32 accumulation
//    (m16n8k16); its own accuracy bound (docs/numerics.md).
#pragma once

#include "coli_compat.h"
#include "gpu/kernels_matmul.cuh"

namespace coli::gpu {

constexpr int kTcWarps = 4;
constexpr int kTcMinRows = 16; // automatic selection uses the tensor cores from this S on

// Writes 1 where this target has the tensor-core bodies compiled in, 0 where they are empty.
__global__ void tc_probe_kernel(int *compiled) { *compiled = COLI_HAS_NV_TENSOR_CORES; }

#if COLI_NV_TENSOR_CORE_PATHS
template <int FMT> __global__ void __launch_bounds__(32 * kTcWarps) mma_exact_kernel(MatmulArgs a) {
#if COLI_HAS_NV_TENSOR_CORES
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int s0 = blockIdx.y * 16, o0 = (blockIdx.x * kTcWarps + threadIdx.x / 32) * 8;
    if (o0 >= a.O) return;
    const int sa = s0 + g, sb = s0 + g + 8; // activation rows of this thread's A fragment
    const int o_b = o0 + g;                 // weight row of this thread's B fragment
    const uint8_t *wrow = a.w + (size_t)(o_b < a.O ? o_b : 0) * a.row_bytes;
    const int8_t *qa = a.q + (size_t)(sa < a.S ? sa : 0) * a.ldq, *qb = a.q + (size_t)(sb < a.S ? sb : 0) * a.ldq;
    // Output elements this thread owns: rows (s0+g, s0+g+8) x cols (o0+2t, o0+2t+1).
    const int os[4] = {s0 + g, s0 + g, s0 + g + 8, s0 + g + 8};
    const int oo[4] = {o0 + 2 * t, o0 + 2 * t + 1, o0 + 2 * t, o0 + 2 * t + 1};
    const int span = FMT == kG4 ? a.gs : a.ldq; // k-range with one scale (G4: gs % 32 == 0)
    float tsum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int acc[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < a.ldq; k0 += 32) {
        int af[4], bf[2];
        af[0] = sa < a.S ? *(const int *)(qa + k0 + 4 * t) : 0;
        af[1] = sb < a.S ? *(const int *)(qb + k0 + 4 * t) : 0;
        af[2] = sa < a.S ? *(const int *)(qa + k0 + 16 + 4 * t) : 0;
        af[3] = sb < a.S ? *(const int *)(qb + k0 + 16 + 4 * t) : 0;
        bf[0] = o_b < a.O ? load_codes4<FMT>(wrow, k0 / 4 + t, a.row_bytes) : 0;
        bf[1] = o_b < a.O ? load_codes4<FMT>(wrow, k0 / 4 + 4 + t, a.row_bytes) : 0;
        coli_mma_s8_16x8x32(acc, af, bf);
        const bool group_end = (k0 + 32) % span == 0 || k0 + 32 >= a.ldq;
        if (FMT == kG4 && group_end) {
            const int grp = k0 / a.gs;
            for (int e = 0; e < 4; ++e) {
                const float scale = oo[e] < a.O && grp < a.ng ? a.scales[(size_t)oo[e] * a.ng + grp] : 0.0f;
                tsum[e] = coli_exact_group_step(tsum[e], acc[e], scale);
                acc[e] = 0;
            }
        }
    }
    for (int e = 0; e < 4; ++e) {
        if (os[e] >= a.S || oo[e] >= a.O) continue;
        a.y[(size_t)os[e] * a.O + oo[e]] = FMT == kG4 ? coli_fmul_rn(tsum[e], a.sx[os[e]])
                                                      : coli_exact_row_output(acc[e], a.scales[oo[e]], a.sx[os[e]]);
    }
#endif // COLI_HAS_NV_TENSOR_CORES
}

template <int FMT> __device__ inline unsigned bf16_pair_w(const uint8_t *row, const float *scales, int i, int I, int gs) {
    const float w0 = i < I ? weight_at<FMT>(row, scales, i, gs) : 0.0f;
    const float w1 = i + 1 < I ? weight_at<FMT>(row, scales, i + 1, gs) : 0.0f;
    return coli_bf16_bits(w0) | (coli_bf16_bits(w1) << 16);
}

__device__ inline unsigned bf16_pair_x(const float *xr, int i, int I) {
    const float x0 = i < I ? xr[i] : 0.0f, x1 = i + 1 < I ? xr[i + 1] : 0.0f;
    return coli_bf16_bits(x0) | (coli_bf16_bits(x1) << 16);
}

template <int FMT> __global__ void __launch_bounds__(32 * kTcWarps) mma_w4a16_kernel(MatmulArgs a) {
#if COLI_HAS_NV_TENSOR_CORES
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int s0 = blockIdx.y * 16, o0 = (blockIdx.x * kTcWarps + threadIdx.x / 32) * 8;
    if (o0 >= a.O) return;
    const int sa = s0 + g, sb = s0 + g + 8, o_b = o0 + g;
    const uint8_t *wrow = a.w + (size_t)(o_b < a.O ? o_b : 0) * a.row_bytes;
    const float *scales = a.scales + (size_t)(o_b < a.O ? o_b : 0) * a.ng;
    const float *xa = a.x + (size_t)(sa < a.S ? sa : 0) * a.I, *xb = a.x + (size_t)(sb < a.S ? sb : 0) * a.I;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < a.I; k0 += 16) {
        unsigned af[4], bf[2];
        af[0] = sa < a.S ? bf16_pair_x(xa, k0 + 2 * t, a.I) : 0u;
        af[1] = sb < a.S ? bf16_pair_x(xb, k0 + 2 * t, a.I) : 0u;
        af[2] = sa < a.S ? bf16_pair_x(xa, k0 + 8 + 2 * t, a.I) : 0u;
        af[3] = sb < a.S ? bf16_pair_x(xb, k0 + 8 + 2 * t, a.I) : 0u;
        bf[0] = o_b < a.O ? bf16_pair_w<FMT>(wrow, scales, k0 + 2 * t, a.I, a.gs) : 0u;
        bf[1] = o_b < a.O ? bf16_pair_w<FMT>(wrow, scales, k0 + 8 + 2 * t, a.I, a.gs) : 0u;
        coli_mma_bf16_16x8x16(acc, af, bf);
    }
    const int os[4] = {s0 + g, s0 + g, s0 + g + 8, s0 + g + 8};
    const int oo[4] = {o0 + 2 * t, o0 + 2 * t + 1, o0 + 2 * t, o0 + 2 * t + 1};
    for (int e = 0; e < 4; ++e) {
        if (os[e] < a.S && oo[e] < a.O) a.y[(size_t)os[e] * a.O + oo[e]] = acc[e];
    }
#endif // COLI_HAS_NV_TENSOR_CORES
}
#endif // COLI_NV_TENSOR_CORE_PATHS

} // namespace coli::gpu
