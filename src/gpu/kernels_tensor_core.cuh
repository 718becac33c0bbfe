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

// Tiles of the tiled exact kernel (below; the host sizes its grid from them).
constexpr int kTileM = 64, kTileN = 128, kTileK = 64, kTileStride = 80;
constexpr int kTileThreads = 256;

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

// ---- tiled exact kernel for prefill: a batch of Q4/G4 matrices, shared-memory tiles ----------
// A block computes 64 activation rows x 128 output rows of one problem; 8 warps as 2 (rows) x 4
// (outputs), each a 32 x 32 tile of 2 x 4 m16n8k32 int8 mma. K advances 64 codes per step:
// activation codes (64 x 64 bytes) and weights (128 rows x 32 packed bytes, unpacked once to
// int8 codes on the way into shared memory, so no warp decodes twice) are loaded into registers
// for step k+1 while step k computes (double-buffered shared memory, one barrier per step).
// Rows are padded to 80 bytes: the fragment loads of a warp (8 rows x 4 words) hit 32 banks.
// Integer sums are exact; the epilogue is the contract's (per group, in order, for G4), so results
// are bit-identical to every other path. Needs row bytes a multiple of 16 (tiled_shape()).

// 16 packed Q4 bytes (32 codes) -> 32 signed int8 codes in element order.
__device__ inline void unpack_q4_codes(const uint4 raw, int4 (&out)[2]) {
    const unsigned r[4] = {raw.x, raw.y, raw.z, raw.w};
    unsigned w[8];
    for (int k = 0; k < 4; ++k) {
        const unsigned lo = r[k] & 0x0f0f0f0fu, hi = (r[k] >> 4) & 0x0f0f0f0fu;
        // nibble n (code n - 8) -> (n + 0x78) ^ 0x80 = n - 8 in two's complement, per byte
        w[2 * k] = (coli_byte_perm(lo, hi, 0x5140) + 0x78787878u) ^ 0x80808080u;
        w[2 * k + 1] = (coli_byte_perm(lo, hi, 0x7362) + 0x78787878u) ^ 0x80808080u;
    }
    out[0] = make_int4((int)w[0], (int)w[1], (int)w[2], (int)w[3]);
    out[1] = make_int4((int)w[4], (int)w[5], (int)w[6], (int)w[7]);
}

template <int FMT> __global__ void __launch_bounds__(kTileThreads) mma_exact_tiled_kernel(BatchArgs a) {
#if COLI_HAS_NV_TENSOR_CORES
    __shared__ __align__(16) uint8_t smem_a[2][kTileM * kTileStride];
    __shared__ __align__(16) uint8_t smem_b[2][kTileN * kTileStride];
    const BatchProblem &p = batch_problem(a);
    const int s0 = blockIdx.y * kTileM;
    if (s0 >= p.S) return;
    const int o0 = ((int)blockIdx.x - p.first_block) * kTileN;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int wm = warp / 4, wn = warp % 4;

    // This thread's loads: one 16-byte piece of activation codes and one of packed weights.
    const int a_row = tid / 4, a_col = (tid % 4) * 16;
    const int b_row = tid / 2, b_col = (tid % 2) * 16; // packed bytes within the step's 32
    const bool a_live = s0 + a_row < p.S, b_live = o0 + b_row < a.O;
    const int8_t *a_src = p.q + (size_t)(a_live ? s0 + a_row : 0) * a.ldq;
    const uint8_t *b_src = p.w + (size_t)(b_live ? o0 + b_row : 0) * a.row_bytes;
    const int steps = (a.ldq + kTileK - 1) / kTileK;
    int4 a_reg;
    uint4 b_reg;
    auto load = [&](int step) {
        const int ka = step * kTileK + a_col, kb = step * (kTileK / 2) + b_col;
        a_reg = a_live && ka < a.ldq ? *(const int4 *)(a_src + ka) : make_int4(0, 0, 0, 0);
        b_reg = b_live && kb < a.row_bytes ? *(const uint4 *)(b_src + kb) : make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u);
    };
    auto store = [&](int buf) {
        *(int4 *)(smem_a[buf] + a_row * kTileStride + a_col) = a_reg;
        int4 codes[2];
        unpack_q4_codes(b_reg, codes);
        *(int4 *)(smem_b[buf] + b_row * kTileStride + 2 * b_col) = codes[0];
        *(int4 *)(smem_b[buf] + b_row * kTileStride + 2 * b_col + 16) = codes[1];
    };

    int acc[2][4][4];
    float tsum[2][4][4];
    for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 4; ++ni)
            for (int e = 0; e < 4; ++e) {
                acc[mi][ni][e] = 0;
                tsum[mi][ni][e] = 0.0f;
            }
    load(0);
    store(0);
    __syncthreads();
    for (int step = 0; step < steps; ++step) {
        const int buf = step & 1;
        if (step + 1 < steps) load(step + 1);
        for (int kk = 0; kk < kTileK / 32; ++kk) {
            const int k_end = step * kTileK + kk * 32 + 32; // codes consumed after this mma step
            if (k_end - 32 >= a.ldq) break;
            int af[2][4], bf[4][2];
            for (int mi = 0; mi < 2; ++mi) {
                const uint8_t *base = smem_a[buf] + (wm * 32 + mi * 16 + g) * kTileStride + kk * 32 + 4 * t;
                af[mi][0] = *(const int *)base;
                af[mi][1] = *(const int *)(base + 8 * kTileStride);
                af[mi][2] = *(const int *)(base + 16);
                af[mi][3] = *(const int *)(base + 8 * kTileStride + 16);
            }
            for (int ni = 0; ni < 4; ++ni) {
                const uint8_t *base = smem_b[buf] + (wn * 32 + ni * 8 + g) * kTileStride + kk * 32 + 4 * t;
                bf[ni][0] = *(const int *)base;
                bf[ni][1] = *(const int *)(base + 16);
            }
            for (int mi = 0; mi < 2; ++mi)
                for (int ni = 0; ni < 4; ++ni) coli_mma_s8_16x8x32(acc[mi][ni], af[mi], bf[ni]);
            if (FMT == kG4 && (k_end % a.gs == 0 || k_end >= a.ldq)) { // the group ends: t = t + acc * scale
                const int grp = (k_end - 32) / a.gs;
                for (int ni = 0; ni < 4; ++ni) {
                    for (int c = 0; c < 2; ++c) {
                        const int o = o0 + wn * 32 + ni * 8 + 2 * t + c;
                        const float scale = o < a.O && grp < a.ng ? p.scales[(size_t)o * a.ng + grp] : 0.0f;
                        for (int mi = 0; mi < 2; ++mi) {
                            for (int h = 0; h < 2; ++h) {
                                tsum[mi][ni][2 * h + c] = coli_exact_group_step(tsum[mi][ni][2 * h + c], acc[mi][ni][2 * h + c], scale);
                                acc[mi][ni][2 * h + c] = 0;
                            }
                        }
                    }
                }
            }
        }
        if (step + 1 < steps) store(buf ^ 1);
        __syncthreads();
    }
    for (int mi = 0; mi < 2; ++mi) {
        for (int ni = 0; ni < 4; ++ni) {
            for (int e = 0; e < 4; ++e) {
                const int s = s0 + wm * 32 + mi * 16 + g + (e >= 2 ? 8 : 0);
                const int o = o0 + wn * 32 + ni * 8 + 2 * t + (e & 1);
                if (s >= p.S || o >= a.O) continue;
                p.y[(size_t)s * a.O + o] = FMT == kG4 ? coli_fmul_rn(tsum[mi][ni][e], p.sx[s])
                                                      : coli_exact_row_output(acc[mi][ni][e], p.scales[o], p.sx[s]);
            }
        }
    }
#endif // COLI_HAS_NV_TENSOR_CORES
}
#endif // COLI_NV_TENSOR_CORE_PATHS

} // namespace coli::gpu
