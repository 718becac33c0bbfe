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

// Tiles of the tiled exact kernel (below; the host sizes its grid and shared memory from them).
constexpr int kTileN = 128, kTileK = 128, kTileStages = 3, kTileThreads = 256;
constexpr int kTileStrideA = kTileK + 32, kTileStrideB = kTileK / 2 + 16; // padded rows, bytes
// Inputs up to which 16 x an exact row sum (|code x 16 (code - 8)| <= 127 x 128) fits in int32.
constexpr int64_t kTileMaxInputs = 2147483647 / (127 * 128);

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
// A block computes BM activation rows (64 or 128) x 128 output rows of one problem; 8 warps as
// 2 (rows) x 4 (outputs), each a BM/2 x 32 tile. K advances 128 codes per stage; activation codes
// and packed weights go global -> shared by cp.async, kTileStages stages in flight, and each warp
// unpacks the weight words it multiplies (4 instructions per word).
//
// Operand roles: the m16n8k32 int8 mma computes 16 output rows (weights, its A operand) x 8
// activation rows (its B operand), i.e. the transposed tile. The unpacked weights are built in
// registers, so they can land in A's four registers in any order, and B's two registers per
// thread are one row's consecutive 8 bytes: one 8-byte shared-memory load, no register moves.
// K order inside each 32-code mma step: the sum over k is order-free (integers), so thread t
// feeds both operands codes 8t..8t+7 of the step (the PTX layout says 4t..4t+3 and 16+4t..): its
// activations are one 8-byte load and its weights one packed 4-byte word per weight row. Weights
// enter as 16 x (code - 8) (unpack_q4_sixteenths), so every sum is 16 x the true one and is
// shifted back exactly before the contract's epilogue (per group, in order, for G4): results are
// bit-identical to every other path. Limits (tiled_shape()): row bytes a multiple of 16, I small
// enough that 16 x the sum fits in int32.
//
// Shared-memory rows are padded so fragment loads hit distinct banks: activation rows 160 bytes
// (a half-warp's 8-byte loads cover 4 rows x 32 bytes), weight rows 80 bytes (8 rows x 16 bytes).

// One packed word (byte j: code 2j in the low nibble, 2j+1 in the high) -> codes 0..3 and 4..7 as
// int8 lanes holding 16 x (code - 8): a nibble with its top bit flipped is the 4-bit two's
// complement of code - 8, and in a byte's high nibble it reads as 16 times that.
__device__ inline void unpack_q4_sixteenths(unsigned packed, int &codes0123, int &codes4567) {
    const unsigned odd = (packed ^ 0x80808080u) & 0xf0f0f0f0u;         // codes 1, 3, 5, 7
    const unsigned even = ((packed << 4) ^ 0x80808080u) & 0xf0f0f0f0u; // codes 0, 2, 4, 6
    codes0123 = (int)coli_byte_perm(even, odd, 0x5140);
    codes4567 = (int)coli_byte_perm(even, odd, 0x7362);
}

template <int BM> COLI_HD constexpr int tile_stage_bytes() { return BM * kTileStrideA + kTileN * kTileStrideB; }
template <int BM> COLI_HD constexpr int tile_smem_bytes() { return kTileStages * tile_stage_bytes<BM>(); }

// G4 groups of at most this many codes have sums (|code - 8| <= 8, |q| <= 127) that
// coli_small_int_to_float converts.
constexpr int kTileSmallGroupCodes = kSmallIntToFloatMax / (8 * 127);

// The tiled kernel's G4 group end: t = t + acc * scale for every accumulator, which restarts at 0.
template <bool SMALL, int OI, int SJ>
__device__ inline void tile_group_step(float (&tsum)[OI][SJ][4], int (&acc)[OI][SJ][4], const float (&scale)[OI][2]) {
#pragma unroll
    for (int oi = 0; oi < OI; ++oi)
        for (int sj = 0; sj < SJ; ++sj)
            for (int e = 0; e < 4; ++e) {
                const int sum = acc[oi][sj][e] >> 4;
                const float sc = scale[oi][e >> 1];
                tsum[oi][sj][e] = SMALL ? coli_exact_group_step_small(tsum[oi][sj][e], sum, sc)
                                        : coli_exact_group_step(tsum[oi][sj][e], sum, sc);
                acc[oi][sj][e] = 0;
            }
}

template <int FMT, int BM>
__global__ void __launch_bounds__(kTileThreads, FMT == kQ4 || BM == 64 ? 2 : 1) mma_exact_tiled_kernel(BatchArgs a) {
#if COLI_HAS_NV_TENSOR_CORES
    extern __shared__ __align__(16) uint8_t tile_smem[];
    constexpr int OI = 2, SJ = BM / 16; // per warp: 16-output mma tiles x 8-row activation tiles
    constexpr int A_BYTES = BM * kTileStrideA, STAGE_BYTES = tile_stage_bytes<BM>();
    constexpr int A_PIECES = BM * 8 / kTileThreads, B_PIECES = kTileN * 4 / kTileThreads; // per thread and stage
    const BatchProblem &p = batch_problem(a);
    const int s0 = blockIdx.y * BM;
    if (s0 >= p.S) return;
    const int o0 = ((int)blockIdx.x - p.first_block) * kTileN;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int wm = warp / 4, wn = warp % 4;
    const int steps = (a.ldq + kTileK - 1) / kTileK;

    // A stage: BM rows x 8 pieces of 16 activation bytes, then 128 rows x 4 pieces of packed
    // weights. This thread copies rows a_row + 32j and b_row + 64j of them; pieces past the data
    // are zero-filled (their products meet zero activation codes) and read nothing.
    const int a_row = tid / 8, a_col = (tid % 8) * 16, b_row = tid / 4, b_col = (tid % 4) * 16;
    const int8_t *a_src = p.q + (size_t)(s0 + a_row) * a.ldq + a_col;
    const uint8_t *b_src = p.w + (size_t)(o0 + b_row) * a.row_bytes + b_col;
    const int a_rows_left = p.S - s0 - a_row, b_rows_left = a.O - o0 - b_row;
    auto load_stage = [&](int step, int buf) {
        uint8_t *sa = tile_smem + buf * STAGE_BYTES + a_row * kTileStrideA + a_col;
        uint8_t *sb = tile_smem + buf * STAGE_BYTES + A_BYTES + b_row * kTileStrideB + b_col;
        const int ka = step * kTileK, kb = step * (kTileK / 2);
#pragma unroll
        for (int j = 0; j < A_PIECES; ++j) {
            const bool live = 32 * j < a_rows_left && ka + a_col < a.ldq;
            coli_cp_async16(sa + 32 * j * kTileStrideA, live ? a_src + (size_t)32 * j * a.ldq + ka : (const int8_t *)p.q, live);
        }
#pragma unroll
        for (int j = 0; j < B_PIECES; ++j) {
            const bool live = 64 * j < b_rows_left && kb + b_col < a.row_bytes;
            coli_cp_async16(sb + 64 * j * kTileStrideB, live ? b_src + (size_t)64 * j * a.row_bytes + kb : p.w, live);
        }
    };

    // acc[oi][sj]: outputs o0 + wn*32 + 16 oi + g (+8 for elements 2, 3) x activation rows
    // s0 + wm*BM/2 + 8 sj + 2t (+1 for elements 1, 3).
    int acc[OI][SJ][4];
    float tsum[OI][SJ][4]; // G4: the contract's running float sum over finished groups
#pragma unroll
    for (int oi = 0; oi < OI; ++oi)
        for (int sj = 0; sj < SJ; ++sj)
            for (int e = 0; e < 4; ++e) {
                acc[oi][sj][e] = 0;
                tsum[oi][sj][e] = 0.0f;
            }
    for (int s = 0; s < kTileStages - 1; ++s) {
        if (s < steps) load_stage(s, s);
        coli_cp_async_commit();
    }
    // This thread's fragment words within a stage (the mma tile and k step add constants).
    const int a_frag = (wm * (BM / 2) + g) * kTileStrideA + 8 * t;
    const int b_frag = A_BYTES + (wn * 32 + g) * kTileStrideB + 4 * t;
    int buf = 0, next_buf = kTileStages - 1;
    for (int step = 0; step < steps; ++step) {
        coli_cp_async_wait<kTileStages - 2>(); // this stage's pieces have landed ...
        __syncthreads();                       // ... for every thread, and the previous stage is consumed
        if (step + kTileStages - 1 < steps) load_stage(step + kTileStages - 1, next_buf);
        coli_cp_async_commit();
        next_buf = next_buf == kTileStages - 1 ? 0 : next_buf + 1;
        const uint8_t *sa = tile_smem + buf * STAGE_BYTES + a_frag, *sb = tile_smem + buf * STAGE_BYTES + b_frag;
        buf = buf == kTileStages - 1 ? 0 : buf + 1;
        // A tail step past ldq multiplies zero-filled codes: only G4's group bookkeeping must stop.
#pragma unroll
        for (int kk = 0; kk < kTileK / 32; ++kk) {
            int wf[OI][4], xf[SJ][2];
#pragma unroll
            for (int oi = 0; oi < OI; ++oi)
                for (int h = 0; h < 2; ++h) // weight rows g and g + 8 of the 16-output tile
                    unpack_q4_sixteenths(*(const unsigned *)(sb + (oi * 16 + h * 8) * kTileStrideB + kk * 16), wf[oi][h], wf[oi][2 + h]);
#pragma unroll
            for (int sj = 0; sj < SJ; ++sj) {
                const int2 codes = *(const int2 *)(sa + sj * 8 * kTileStrideA + kk * 32);
                xf[sj][0] = codes.x;
                xf[sj][1] = codes.y;
            }
#pragma unroll
            for (int oi = 0; oi < OI; ++oi)
                for (int sj = 0; sj < SJ; ++sj) coli_mma_s8_16x8x32(acc[oi][sj], wf[oi], xf[sj]);
            const int k_end = step * kTileK + kk * 32 + 32; // codes consumed after this mma step
            if (FMT == kG4 && k_end - 32 < a.ldq && (k_end % a.gs == 0 || k_end >= a.ldq)) { // a group ends: t = t + acc * scale
                const int grp = (k_end - 32) / a.gs;
                float scale[OI][2];
#pragma unroll
                for (int oi = 0; oi < OI; ++oi) {
                    for (int h = 0; h < 2; ++h) {
                        const int o = o0 + wn * 32 + oi * 16 + g + 8 * h;
                        scale[oi][h] = o < a.O && grp < a.ng ? p.scales[(size_t)o * a.ng + grp] : 0.0f;
                    }
                }
                // Sums of groups up to kTileSmallGroupCodes convert without the conversion unit.
                if (a.gs <= kTileSmallGroupCodes) {
                    tile_group_step<true>(tsum, acc, scale);
                } else {
                    tile_group_step<false>(tsum, acc, scale);
                }
            }
        }
    }
    // The row scales first, all loads before any store (y may alias them as far as the compiler
    // knows: loads between the stores ran one global latency per output, as in wgmma_exact_kernel).
    float sx[SJ][2], so[OI][2];
#pragma unroll
    for (int sj = 0; sj < SJ; ++sj) {
        for (int b = 0; b < 2; ++b) {
            const int s = s0 + wm * (BM / 2) + sj * 8 + 2 * t + b;
            sx[sj][b] = s < p.S ? p.sx[s] : 0.0f;
        }
    }
#pragma unroll
    for (int oi = 0; oi < OI; ++oi) {
        for (int h = 0; h < 2; ++h) {
            const int o = o0 + wn * 32 + oi * 16 + g + 8 * h;
            so[oi][h] = FMT == kQ4 && o < a.O ? p.scales[o] : 0.0f;
        }
    }
#pragma unroll
    for (int oi = 0; oi < OI; ++oi) {
        for (int sj = 0; sj < SJ; ++sj) {
            for (int e = 0; e < 4; ++e) {
                const int o = o0 + wn * 32 + oi * 16 + g + (e >= 2 ? 8 : 0);
                const int s = s0 + wm * (BM / 2) + sj * 8 + 2 * t + (e & 1);
                if (s >= p.S || o >= a.O) continue;
                p.y[(size_t)s * a.O + o] = FMT == kG4 ? coli_fmul_rn(tsum[oi][sj][e], sx[sj][e & 1])
                                                      : coli_exact_row_output(acc[oi][sj][e] >> 4, so[oi][e >> 1], sx[sj][e & 1]);
            }
        }
    }
#endif // COLI_HAS_NV_TENSOR_CORES
}
#endif // COLI_NV_TENSOR_CORE_PATHS

} // namespace coli::gpu
