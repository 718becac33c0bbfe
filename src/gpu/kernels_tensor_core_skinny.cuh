// NVIDIA tensor-core matvec for exact Q4 and G4 at small S (decode and a few rows per expert: the
// "skinny" path, MatmulPath::skinny). The vector kernels (kernels_matvec.cuh) spend about five
// integer instructions per 4 codes and activation row (unpack, sign, dot4); here a packed weight
// word is unpacked in 4 instructions per 8 codes straight into an int8 m16n8k32 mma, whatever the
// number of activation rows (up to 8), so the kernels stay bound by the weight stream where the
// vector path becomes bound by its arithmetic (4 rows per expert). Compiled where compat says the
// build has tensor cores (COLI_NV_TENSOR_CORE_PATHS), bodies only for targets with mma.sync; HIP
// builds take the vector kernels. CPU reference: src/ref/matmul_ref.cpp and src/ref/expert_ref.cpp.
// Checked by test_gpu.cpp (every path of the registry, matmuls and groups) and coli-conformance.
//
// A warp computes 16 weight rows (the mma's M: rows o0 + g and o0 + g + 8 per thread) x up to 8
// activation rows (its N: row g per thread, zero where it does not exist). Weights are read in
// chunks of 64 packed bytes (128 codes) per row; thread t loads the chunk's 16 bytes 16t..16t+15
// of both its rows (4 threads cover a row's 64 contiguous bytes) and the matching 32 activation
// codes, and feeds them as 4 mma k-steps of 8 codes per thread. The sum over k is order-free
// (integers), so the k order is the loads' order, not the PTX layout's; weights enter as
// 16 x (code - 8) (unpack_q4_sixteenths) and sums are shifted back exactly (>> 4) before the
// contract's epilogue: results are bit-identical to every other path.
//
// Exact G4 (gs a multiple of 128, skinny_shape): a chunk's 128 codes lie in one scale group, so
// the sums after a group's last chunk are that group's. The contract folds groups in order in
// float, which a split over warps cannot do in registers: each warp hands its groups' sums to
// shared memory and, after a barrier, each thread folds one output's groups in order (as split,
// kernels_matvec_split.cuh). The 1-row down + combine kernel has each warp walk whole rows, so it
// folds in registers as it goes.
#pragma once

#include "coli_compat.h"
#include "gpu/kernels_matvec_expert.cuh"
#include "gpu/kernels_tensor_core.cuh"

namespace coli::gpu {

constexpr int kSkinnyRows = 16;       // weight rows per warp and block (the mma's M)
constexpr int kSkinnyMaxS = 8;        // activation rows per block (the mma's N)
// automatic takes the skinny path from 2 to 32 rows (grid rows of 8 each): measured on the H200
// (docs/performance.md), the vector kernels were faster at one row (decode group 50.0 against
// 51.6 us) and the tensor_core path's tiles slower at 16 and 32 (2048 x 6144 at S = 16: 37.8 us,
// skinny at S = 32: 12.0). Exact G4 likewise (H200: skinny 9.2 - 14.7 us at 2 - 32 rows against
// split's 9.2 - 70.3 for 2048 x 6144; the decode group 69.1 against vector's 65.7).
constexpr int kSkinnyMinRows = 2, kSkinnyMaxAutoRows = 32;
constexpr int kSkinnyChunkBytes = 64; // packed bytes per row and chunk (4 threads x 16)
constexpr int kSkinnyChunkCodes = 2 * kSkinnyChunkBytes;
// Exact G4: a block's shared memory holds its group sums ([group][matrix][element][lane] ints: a
// warp's accumulators) and its rows' scales ([matrix][row][group]); skinny_shape takes at most
// kSkinnyMaxGroups groups (108 KB for gate and up).
constexpr int kSkinnyMaxGroups = 96;
constexpr int kSkinnySumsPerGroup = 4 * 32; // per matrix: 4 accumulator elements x 32 lanes
COLI_HD constexpr int skinny_group_smem_bytes(int groups, int matrices) {
    return groups * matrices * (kSkinnySumsPerGroup + kSkinnyRows) * 4;
}
constexpr int kSkinnyWarps = 4;       // matvec and gate/up blocks: warps splitting a row's chunks
constexpr int kSkinnyInFlight = 4;    // chunks per thread loaded before any is used

#if COLI_NV_TENSOR_CORE_PATHS
// 16 x the sums of NM matrices' rows w[m][0] (o0 + g) and w[m][1] (o0 + g + 8) with activation
// codes xq (row g; nullptr: zeros) over chunks [c_begin, c_end), added to acc[m] (mma accumulator
// order: rows g, g, g + 8, g + 8 x activation rows 2t, 2t + 1, 2t, 2t + 1). The first chunks'
// weight loads are issued before coli_wait_prior_grid(), the activations read after it.
// chunk_done(c) runs after chunk c's mmas (G4: where a group ends, it takes and clears acc).
template <int NM, class ChunkDone>
__device__ inline void skinny_row_sums(const uint8_t *const (&w)[NM][2], const int8_t *xq, int row_bytes, int c_begin,
                                       int c_end, int t, int (&acc)[NM][4], ChunkDone chunk_done) {
#if COLI_HAS_NV_TENSOR_CORES
    constexpr int U = kSkinnyInFlight;
    for (int c0 = c_begin; c0 < c_end; c0 += U) {
        unsigned raw[U][NM][2][4], xw[U][8];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int off = (c0 + u) * kSkinnyChunkBytes + 16 * t; // this thread's 16 bytes of each row
            const bool live = c0 + u < c_end && off < row_bytes;
            for (int m = 0; m < NM; ++m) {
                for (int h = 0; h < 2; ++h) {
                    const uint4 v = live ? *(const uint4 *)(w[m][h] + off) : make_uint4(0u, 0u, 0u, 0u);
                    raw[u][m][h][0] = v.x, raw[u][m][h][1] = v.y, raw[u][m][h][2] = v.z, raw[u][m][h][3] = v.w;
                }
            }
        }
        if (c0 == c_begin) coli_wait_prior_grid();
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int off = (c0 + u) * kSkinnyChunkBytes + 16 * t;
            const bool live = xq && c0 + u < c_end && off < row_bytes;
            for (int half = 0; half < 2; ++half) { // the 32 codes under the 16 weight bytes
                const int4 v = live ? *(const int4 *)(xq + 2 * off + 16 * half) : make_int4(0, 0, 0, 0);
                xw[u][4 * half] = v.x, xw[u][4 * half + 1] = v.y, xw[u][4 * half + 2] = v.z, xw[u][4 * half + 3] = v.w;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            for (int kk = 0; kk < 4; ++kk) { // codes 8kk .. 8kk + 7 of the thread's 32
                const int b[2] = {(int)xw[u][2 * kk], (int)xw[u][2 * kk + 1]};
                for (int m = 0; m < NM; ++m) {
                    int a[4];
                    unpack_q4_sixteenths(raw[u][m][0][kk], a[0], a[2]);
                    unpack_q4_sixteenths(raw[u][m][1][kk], a[1], a[3]);
                    coli_mma_s8_16x8x32(acc[m], a, b);
                }
            }
            if (c0 + u < c_end) chunk_done(c0 + u);
        }
    }
#endif // COLI_HAS_NV_TENSOR_CORES
}

// Calls fold(group) where chunk c ends a G4 scale group (its last chunk, or the row's); counts
// the chunks of the current group, so a walk starts at a group's first chunk.
struct SkinnyGroupWalk {
    int chunks_per_group, chunks, group, left;
    __device__ SkinnyGroupWalk(int gs, int row_chunks, int first_group)
        : chunks_per_group(gs / kSkinnyChunkCodes), chunks(row_chunks), group(first_group), left(gs / kSkinnyChunkCodes) {}
    template <class Fold> __device__ void chunk_done(int c, Fold fold) {
        if (--left > 0 && c + 1 < chunks) return;
        fold(group++);
        left = chunks_per_group;
    }
};

// Rows o0 + g and o0 + g + 8 of a matrix (clamped to its last row; outputs past O are dropped).
__device__ inline void skinny_rows_of(const uint8_t *w, int o0, int g, int O, int row_bytes, const uint8_t *(&rows)[2]) {
    rows[0] = w + (size_t)min(o0 + g, O - 1) * row_bytes;
    rows[1] = w + (size_t)min(o0 + g + 8, O - 1) * row_bytes;
}

// The block's warps split the chunks of its rows; warp 0 ends with the sums (the others' added
// through shared memory, integers: any order).
template <int NM>
__device__ inline void skinny_block_sums(const uint8_t *const (&w)[NM][2], const int8_t *xq, int row_bytes, int (&acc)[NM][4]) {
    __shared__ int partial[kSkinnyWarps - 1][NM * 4][32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int chunks = (row_bytes + kSkinnyChunkBytes - 1) / kSkinnyChunkBytes;
    const int per_warp = (chunks + kSkinnyWarps - 1) / kSkinnyWarps;
    const int c_begin = min(chunks, warp * per_warp), c_end = min(chunks, c_begin + per_warp);
    for (int m = 0; m < NM; ++m)
        for (int e = 0; e < 4; ++e) acc[m][e] = 0;
    skinny_row_sums<NM>(w, xq, row_bytes, c_begin, c_end, lane % 4, acc, [](int) {});
    if (warp > 0) {
        for (int m = 0; m < NM; ++m)
            for (int e = 0; e < 4; ++e) partial[warp - 1][m * 4 + e][lane] = acc[m][e];
    }
    __syncthreads();
    if (warp == 0) {
        for (int w2 = 0; w2 < kSkinnyWarps - 1; ++w2)
            for (int m = 0; m < NM; ++m)
                for (int e = 0; e < 4; ++e) acc[m][e] += partial[w2][m * 4 + e][lane];
    }
}

// Exact Q4: the block's sums end in warp 0, whose threads apply the per-row epilogue to the
// elements they own (with NM = 2, the SwiGLU of gate and up).
template <int NM>
__device__ inline void skinny_q4_block(const BatchArgs &a, const BatchProblem &p, const uint8_t *const (&w)[NM][2],
                                       const int8_t *xq, int o0, int s0) {
    int acc[NM][4];
    skinny_block_sums<NM>(w, xq, a.row_bytes, acc);
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    for (int e = 0; e < 4 && threadIdx.x < 32; ++e) {
        const int o = o0 + g + (e >= 2 ? 8 : 0), s = s0 + 2 * t + (e & 1);
        if (o >= a.O || s >= p.S) continue;
        const float out = coli_exact_row_output(acc[0][e] >> 4, p.scales[o], p.sx[s]);
        p.y[(size_t)s * a.O + o] =
            NM == 2 ? coli_swiglu(out, coli_exact_row_output(acc[NM - 1][e] >> 4, p.scales2[o], p.sx[s])) : out;
    }
}

// Exact G4: the block's warps split the row's groups and leave each group's sums in shared memory;
// then thread (warp e, lane) folds accumulator element e of the lane's fragment (output row
// o0 + g (+ 8 for e >= 2), activation row s0 + 2t (+ 1 for odd e)) over the groups in order, and
// writes it (with NM = 2, the SwiGLU of gate and up). The block's scales (16 rows x ng, one
// contiguous span per matrix) are copied to shared memory while the weights stream: read from
// global memory in the in-order fold, each group would wait for its load.
template <int NM>
__device__ inline void skinny_g4_block(const BatchArgs &a, const BatchProblem &p, const uint8_t *const (&w)[NM][2],
                                       const int8_t *xq, int o0, int s0) {
#if COLI_HAS_NV_TENSOR_CORES
    static_assert(kSkinnyWarps == 4, "one thread per accumulator element and lane");
    extern __shared__ __align__(16) int skinny_group_smem[];
    int *group_sums = skinny_group_smem; // [group][matrix][element][lane]
    float *scales = reinterpret_cast<float *>(skinny_group_smem + a.ng * NM * kSkinnySumsPerGroup); // [matrix][row][group]
    const int span = min(kSkinnyRows, a.O - o0) * a.ng * 4; // bytes of a matrix's scales for the block's rows
    for (int m = 0; m < NM; ++m) {
        const uint8_t *src = reinterpret_cast<const uint8_t *>((m == 0 ? p.scales : p.scales2) + (size_t)o0 * a.ng);
        uint8_t *dst = reinterpret_cast<uint8_t *>(scales + m * kSkinnyRows * a.ng);
        for (int b = 16 * (int)threadIdx.x; b < span; b += 16 * 32 * kSkinnyWarps) {
            coli_cp_async16_first(dst + b, src + b, min(16, span - b));
        }
    }
    coli_cp_async_commit();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int chunks = (a.row_bytes + kSkinnyChunkBytes - 1) / kSkinnyChunkBytes;
    const int per_warp = (a.ng + kSkinnyWarps - 1) / kSkinnyWarps;
    const int g_begin = min(a.ng, warp * per_warp), g_end = min(a.ng, g_begin + per_warp);
    int acc[NM][4] = {};
    SkinnyGroupWalk walk(a.gs, chunks, g_begin);
    const int c_begin = g_begin * walk.chunks_per_group, c_end = min(chunks, g_end * walk.chunks_per_group);
    skinny_row_sums<NM>(w, xq, a.row_bytes, c_begin, c_end, lane % 4, acc, [&](int c) {
        walk.chunk_done(c, [&](int group) {
            for (int m = 0; m < NM; ++m) {
                for (int e = 0; e < 4; ++e) {
                    group_sums[((group * NM + m) * 4 + e) * 32 + lane] = acc[m][e];
                    acc[m][e] = 0;
                }
            }
        });
    });
    coli_cp_async_wait<0>();
    __syncthreads();
    const int e = warp, g = lane / 4, t = lane % 4;
    const int r = g + (e >= 2 ? 8 : 0), s = s0 + 2 * t + (e & 1);
    if (o0 + r >= a.O || s >= p.S) return;
    float sum[NM];
    for (int m = 0; m < NM; ++m) sum[m] = 0.0f;
#pragma unroll 4
    for (int group = 0; group < a.ng; ++group) {
        for (int m = 0; m < NM; ++m) {
            const int v = group_sums[((group * NM + m) * 4 + e) * 32 + lane] >> 4;
            sum[m] = coli_exact_group_step(sum[m], v, scales[(m * kSkinnyRows + r) * a.ng + group]);
        }
    }
    const float out = coli_fmul_rn(sum[0], p.sx[s]);
    p.y[(size_t)s * a.O + o0 + r] = NM == 2 ? coli_swiglu(out, coli_fmul_rn(sum[NM - 1], p.sx[s])) : out;
#endif // COLI_HAS_NV_TENSOR_CORES
}

// A batch of exact Q4 or G4 matmuls (NM = 1), or of gate and up projections with the SwiGLU (NM = 2, as
// matvec_swiglu_kernel: problem p's gate p.w, up p.w2, h into p.y [S][O]): block b of problem p
// computes rows (b - first_block) * 16 .. + 15 for activation rows blockIdx.y * 8 .. + 7. G4
// launches carry skinny_group_smem_bytes(ng, NM) of dynamic shared memory.
template <int FMT, int NM> __global__ void __launch_bounds__(32 * kSkinnyWarps) mma_skinny_kernel(BatchArgs a) {
    coli_release_dependents();
    const BatchProblem &p = batch_problem(a);
    const int s0 = blockIdx.y * kSkinnyMaxS, o0 = ((int)blockIdx.x - p.first_block) * kSkinnyRows;
    const int g = threadIdx.x % 32 / 4;
    if (s0 < p.S) { // the same for the whole block
        const uint8_t *w[NM][2];
        skinny_rows_of(p.w, o0, g, a.O, a.row_bytes, w[0]);
        if constexpr (NM == 2) skinny_rows_of(p.w2, o0, g, a.O, a.row_bytes, w[1]);
        const int8_t *xq = s0 + g < p.S ? p.q + (size_t)(s0 + g) * a.ldq : nullptr;
        if constexpr (FMT == kG4) skinny_g4_block<NM>(a, p, w, xq, o0, s0);
        else skinny_q4_block<NM>(a, p, w, xq, o0, s0);
    }
    coli_wait_prior_grid(); // every thread, also those of blocks without rows
}

// The down projections of a one-token group with the routed combination (as
// matvec_down_combine_kernel): warp e computes rows o0 .. o0 + 15 of the e-th expert (all its
// chunks), and the block adds the experts' outputs in call order. G4 folds each group as its last
// chunk ends (a warp walks whole rows).
template <int FMT>
__global__ void __launch_bounds__(32 * kRowsPerBlock) mma_skinny_down_combine_kernel(BatchArgs a, RowWeights weights, float *y) {
    coli_release_dependents();
    __shared__ float outs[kRowsPerBlock][kSkinnyRows];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int o0 = blockIdx.x * kSkinnyRows;
    if (warp < a.n) {
        const BatchProblem &p = a.p[warp];
        const uint8_t *w[1][2];
        skinny_rows_of(p.w, o0, g, a.O, a.row_bytes, w[0]);
        int acc[1][4] = {{0, 0, 0, 0}};
        const int chunks = (a.row_bytes + kSkinnyChunkBytes - 1) / kSkinnyChunkBytes;
        const int o[2] = {min(o0 + g, a.O - 1), min(o0 + g + 8, a.O - 1)};
        float sum[2] = {0.0f, 0.0f}; // G4: activation row 0 of rows o[0] and o[1] (elements 0 and 2)
        if constexpr (FMT == kG4) {
            SkinnyGroupWalk walk(a.gs, chunks, 0);
            skinny_row_sums<1>(w, g == 0 ? p.q : nullptr, a.row_bytes, 0, chunks, t, acc, [&](int c) {
                walk.chunk_done(c, [&](int group) {
                    for (int h = 0; h < 2; ++h) {
                        sum[h] = coli_exact_group_step(sum[h], acc[0][2 * h] >> 4, p.scales[(size_t)o[h] * a.ng + group]);
                    }
                    for (int e = 0; e < 4; ++e) acc[0][e] = 0;
                });
            });
        } else {
            skinny_row_sums<1>(w, g == 0 ? p.q : nullptr, a.row_bytes, 0, chunks, t, acc, [](int) {});
        }
        if (t == 0) { // activation row 0: elements 0 (row o0 + g) and 2 (row o0 + g + 8)
            for (int h = 0; h < 2; ++h) {
                outs[warp][g + 8 * h] = FMT == kG4 ? coli_fmul_rn(sum[h], p.sx[0])
                                                   : coli_exact_row_output(acc[0][2 * h] >> 4, p.scales[o[h]], p.sx[0]);
            }
        }
    }
    coli_wait_prior_grid();
    __syncthreads();
    const int r = threadIdx.x;
    if (r < kSkinnyRows && o0 + r < a.O) y[o0 + r] = combined_row_output(outs, weights, a.n, r);
}
#endif // COLI_NV_TENSOR_CORE_PATHS

} // namespace coli::gpu
