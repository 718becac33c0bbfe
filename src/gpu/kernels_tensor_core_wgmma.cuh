// Exact Q4 and G4 prefill on Hopper's warpgroup MMA (the "warpgroup" path, MatmulPath::warpgroup): the tiled
// kernel's tile (kernels_tensor_core.cuh: 128 output rows x 128 activation rows, K steps of 128
// codes, cp.async stages) with wgmma.m64n128k32 instead of 16 mma.sync per warp and step. Given a
// body only in sm_90a code (COLI_HAS_NV_WGMMA, compat); the host probes for it
// (wgmma_probe_kernel) and HIP and other targets take the tiled mma.sync kernel. CPU reference:
// src/ref/matmul_ref.cpp. Checked by coli-gpu-tests (every registry path) and coli-conformance's
// matmul family; measured by coli-bench-gpu's BM_gpu_path/*.
//
// Operands: each warpgroup (4 warps) multiplies 64 weight rows, held as wgmma's register A in the
// m16n8k32 layout (unpacked from shared memory as 16 x (code - 8), unpack_q4_sixteenths), by the
// block's 128 activation rows, wgmma's B, read by the tensor cores from shared memory through a
// descriptor. Activation rows are stored in the 128-byte swizzle layout (coli_wgmma_desc_sw128):
// without the swizzle the same kernel ran 1.3x slower than the mma.sync kernel on the H200, with
// it 1.36x faster (docs/performance.md). Integer sums are exact in any order; the contract's
// epilogue runs once per output as in every other path, so results are bit-identical.
#pragma once

#include "coli_compat.h"
#include "gpu/kernels_matmul.cuh"
#include "gpu/kernels_tensor_core.cuh"

namespace coli::gpu {

// Writes 1 where this target has the wgmma body compiled in, 0 where it is empty.
__global__ void wgmma_probe_kernel(int *compiled) { *compiled = COLI_HAS_NV_WGMMA; }

constexpr int kWgRowsA = 128;                            // weight rows per block (2 warpgroups x 64)
constexpr int kWgK = 128;                                // codes per stage
constexpr int kWgStages = 3;                             // two blocks per multiprocessor
// The HALVES kernel keeps a step's second half in flight into the next step, so the stage it reads
// is refilled a step later: 4 stages, loaded 2 ahead as the others' 3.
template <bool HALVES> COLI_HD constexpr int wg_stages() { return HALVES ? 4 : kWgStages; }
constexpr int kWgStagesAhead = kWgStages - 1;
// Steps per unrolled chunk of the HALVES kernel. Not one loop: where a half stayed in flight across
// the loop's back edge, reading its accumulators made ptxas serialize every wgmma (C7514), so each
// chunk drains its last half (chunks of 2 / 4 / 8 steps measured, docs/performance.md).
constexpr int kWgHalvesChunk = 8;
constexpr int kWgThreads = 256;
constexpr int kWgStrideA = kWgK / 2 + 16;                // padded weight rows (bytes), as the tiled kernel
constexpr int kWgBytesA = kWgRowsA * kWgStrideA;
// Activation rows per block (wgmma N): 128, or 64 for G4 where 128-row tiles leave
// multiprocessors idle (launch_wgmma): G4's running sums double the accumulators, so at 128 rows
// one block fits a multiprocessor and at 64 two, one block's group steps overlapping the other's
// wgmmas (measured, docs/performance.md).
template <int NB> COLI_HD constexpr int wg_bytes_b() { return NB * kWgK; } // swizzled rows of 128 bytes
// A stage: activations, weights, and for G4 the block's scales for the stage's four k32 slices
// (slot [kk][row]: row's scale of the group that slice kk lies in).
constexpr int kWgScaleBytes = kWgK / 32 * kWgRowsA * 4;
template <int FMT, int NB> COLI_HD constexpr int wg_stage_bytes() {
    return wg_bytes_b<NB>() + kWgBytesA + (FMT == kG4 ? kWgScaleBytes : 0);
}
// One extra KB to align the stages to the swizzle atom.
template <int FMT, int NB, bool HALVES = false> COLI_HD constexpr int wg_smem_bytes() {
    return wg_stages<HALVES>() * wg_stage_bytes<FMT, NB>() + 1024;
}
static_assert(wg_stage_bytes<kQ4, 128>() % 1024 == 0 && wg_stage_bytes<kG4, 128>() % 1024 == 0 &&
                  wg_stage_bytes<kG4, 64>() % 1024 == 0,
              "stages must keep the 1024-byte alignment of the swizzle atoms");
// G4 groups of at most this many codes: a group's sum (|code - 8| <= 8, |q| <= 127) then converts
// by coli_small_int_to_float, and scale_group (c * gs < 2^32 for c up to kTileMaxInputs rounded
// up to a stage) holds.
constexpr int64_t kWgMaxGroupCodes = kSmallIntToFloatMax / (8 * 127);
static_assert((kTileMaxInputs + kWgK) * kWgMaxGroupCodes < (1ll << 32), "scale_group's range");

// The tiles of a batch, each problem's activation tiles of rows_b rows times the weight's o_tiles
// 128-row tiles: tile t of problem i is weight tile t % o_tiles of activation tile t / o_tiles (the
// weight tiles fastest, so the blocks running at once share activation rows). The host sizes the
// grid from the same count (launch_wgmma).
COLI_HD inline int wgmma_problem_tiles(const BatchProblem &p, int o_tiles, int rows_b) {
    return o_tiles * ((p.S + rows_b - 1) / rows_b);
}

COLI_HD inline int wgmma_tile_count(const BatchArgs &a, int o_tiles, int rows_b) {
    int n = 0;
    for (int i = 0; i < a.n; ++i) n += wgmma_problem_tiles(a.p[i], o_tiles, rows_b);
    return n;
}

// A tile's operands, resolved once per tile (reading the problem with a runtime index inside the
// step loop costs registers and time, as in matvec_rows).
struct WgmmaTile {
    const uint8_t *w;
    const int8_t *q;
    const float *scales, *sx;
    float *y;
    int S, o0, s0;
};

__device__ inline WgmmaTile wgmma_tile(const BatchArgs &a, int tile, int o_tiles, int rows_b) {
    int i = 0;
    for (; i + 1 < a.n; ++i) {
        const int n = wgmma_problem_tiles(a.p[i], o_tiles, rows_b);
        if (tile < n) break;
        tile -= n;
    }
    const BatchProblem &p = a.p[i];
    return WgmmaTile{p.w, p.q, p.scales, p.sx, p.y, p.S, (tile % o_tiles) * kWgRowsA, (tile / o_tiles) * rows_b};
}

#if COLI_HAS_NV_WGMMA
// The wgmma of a block's activation rows, by the accumulators' size (wg_rows_b / 2).
__device__ inline void coli_wgmma_s8_m64nNk32(int (&d)[64], const int (&a)[4], unsigned long long desc, int accumulate = 1) {
    coli_wgmma_s8_m64n128k32(d, a, desc, accumulate);
}
__device__ inline void coli_wgmma_s8_m64nNk32(int (&d)[32], const int (&a)[4], unsigned long long desc, int accumulate = 1) {
    coli_wgmma_s8_m64n64k32(d, a, desc, accumulate);
}
#endif // COLI_HAS_NV_WGMMA

#if COLI_HAS_NV_WGMMA
// The contract's group step t = t + acc * scale for accumulators holding 16 x the group's sums; a
// thread's accumulators alternate in pairs between its rows a_row and a_row + 8 (scale[0], [1]).
template <int N> __device__ inline void wgmma_g4_group_step(float (&tsum)[N], const int (&acc)[N], const float (&scale)[2]) {
#pragma unroll
    for (int i = 0; i < N; ++i) tsum[i] = coli_exact_group_step_small(tsum[i], acc[i] >> 4, scale[(i & 2) >> 1]);
}

// The HALVES kernel's running state across steps: the second half's accumulators are stepped one
// step late, under the next step's first half.
struct WgmmaHalvesCarry {
    bool group_starts; // this step starts a group: the previous one, whose second half may be in flight, ended one
    float hi_scale[2]; // the in-flight half's group scales (rows a_row, a_row + 8)
};

// A G4 step of groups that end only where steps do (gs a multiple of kWgK), for the HALVES kernel:
// the tile's two 64-row halves of activations go to the tensor cores as two commit groups, and the
// tensor cores always hold one while the other's group step runs: the first half's wgmmas run under
// the previous step's second-half group step, the second half's under this step's first-half one.
// af is one of two register sets taken in turn (the in-flight half still reads the other). Same
// sums, same group order: the same bits. The waits are unconditional: behind the group-end branch,
// ptxas serialized every wgmma (C7514).
template <int NB>
__device__ inline void wgmma_g4_step_in_halves(const BatchArgs &a, int step, int steps, const uint8_t *st, const int (&af)[kWgK / 32][4],
                                               int (&acc)[NB / 2], float (&tsum)[NB / 2], WgmmaHalvesCarry &c, int a_row,
                                               bool hi_in_flight) {
    constexpr int kHalf = NB / 4; // accumulators per half
    int(&lo)[kHalf] = *reinterpret_cast<int(*)[kHalf]>(&acc[0]);
    int(&hi)[kHalf] = *reinterpret_cast<int(*)[kHalf]>(&acc[kHalf]);
    float(&tsum_lo)[kHalf] = *reinterpret_cast<float(*)[kHalf]>(&tsum[0]);
    float(&tsum_hi)[kHalf] = *reinterpret_cast<float(*)[kHalf]>(&tsum[kHalf]);
#pragma unroll
    for (int kk = 0; kk < kWgK / 32; ++kk)
        coli_wgmma_s8_m64n64k32(lo, af[kk], coli_wgmma_desc_sw128(st + kk * 32), c.group_starts && kk == 0 ? 0 : 1);
    coli_wgmma_commit();
    coli_wgmma_wait<1>(); // the previous step's second half
    coli_wgmma_fence_operands(hi);
    if (hi_in_flight && c.group_starts) wgmma_g4_group_step(tsum_hi, hi, c.hi_scale);
    coli_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgK / 32; ++kk)
        coli_wgmma_s8_m64n64k32(hi, af[kk], coli_wgmma_desc_sw128(st + wg_bytes_b<NB>() / 2 + kk * 32), c.group_starts && kk == 0 ? 0 : 1);
    coli_wgmma_commit();
    const bool ends = step + 1 == steps || scale_group(a, (step + 1) * kWgK) != scale_group(a, step * kWgK);
    // Slice 0's scale slot: every slice of the step lies in its group (slices past the data have
    // zero scales).
    const float *scales = reinterpret_cast<const float *>(st + wg_bytes_b<NB>() + kWgBytesA);
    const float scale[2] = {scales[a_row], scales[a_row + 8]};
    coli_wgmma_wait<1>(); // this step's first half
    coli_wgmma_fence_operands(lo);
    if (ends) wgmma_g4_group_step(tsum_lo, lo, scale);
    c.group_starts = ends;
    c.hi_scale[0] = scale[0], c.hi_scale[1] = scale[1];
}

// The last step's second half, once a chunk of steps is done.
template <int NB> __device__ inline void wgmma_g4_halves_drain(int (&acc)[NB / 2], float (&tsum)[NB / 2], const WgmmaHalvesCarry &c) {
    constexpr int kHalf = NB / 4;
    int(&hi)[kHalf] = *reinterpret_cast<int(*)[kHalf]>(&acc[kHalf]);
    float(&tsum_hi)[kHalf] = *reinterpret_cast<float(*)[kHalf]>(&tsum[kHalf]);
    coli_wgmma_wait<0>();
    coli_wgmma_fence_operands(hi);
    if (c.group_starts) wgmma_g4_group_step(tsum_hi, hi, c.hi_scale);
}
#endif // COLI_HAS_NV_WGMMA

#if COLI_NV_TENSOR_CORE_PATHS
// Persistent: one wave of blocks (launch_wgmma) walks the tiles t = blockIdx.x, + gridDim.x, ...
// with one cp.async ring across tile boundaries, so the next tile's first stages load during this
// tile's last steps and its epilogue (1.06x faster than a block per tile at 6144 x 2048, S = 2048,
// where each block takes three tiles; docs/performance.md). first_block is not used.
// G4 (groups of a multiple of 32 codes): where a group ends, the wgmmas so far are waited for and
// the contract's step t = t + acc * scale runs per output, in group order, as in the tiled kernel;
// the group's first wgmma overwrites the accumulators. The scales travel with the stage
// (cp.async, no registers held across the step: loading them ahead into registers was slower,
// docs/performance.md), and the sums convert by coli_small_int_to_float (groups of at most
// kWgMaxGroupCodes codes). HALVES: G4 groups of whole steps in 128-row tiles, stepped by
// wgmma_g4_step_in_halves (its own instance: in one kernel with the general step, ptxas ran out of
// registers for the wgmma pipeline and serialized it, C7511).
template <int FMT, int NB, bool HALVES>
__global__ void __launch_bounds__(kWgThreads, FMT == kQ4 || NB == 64 ? 2 : 1) wgmma_exact_kernel(BatchArgs a) {
#if COLI_HAS_NV_WGMMA
    extern __shared__ __align__(16) uint8_t wg_smem_raw[];
    uint8_t *smem = wg_smem_raw + ((1024u - (coli_shared_address(wg_smem_raw) & 1023u)) & 1023u);
    static_assert(NB == 128 || (FMT == kG4 && NB == 64), "the activation rows a block takes");
    static_assert(!HALVES || (FMT == kG4 && NB == 128), "halves: G4 groups of whole steps in 128-row tiles");
    constexpr int kBytesB = wg_bytes_b<NB>(), kStageBytes = wg_stage_bytes<FMT, NB>();
    const int o_tiles = (a.O + kWgRowsA - 1) / kWgRowsA, tiles = wgmma_tile_count(a, o_tiles, NB);
    const int my_tiles = (int)blockIdx.x < tiles ? (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int steps = (a.ldq + kWgK - 1) / kWgK;

    // Copies of a stage, for the loader's cursor (tile number lk of this block, step ls). Activations:
    // lane -> row r_lo of an 8-row group and chunk c_lo of a 4-chunk half, (warp, j) -> the group
    // and the half, so each row's 64 bytes are read at once and a warp's 16-byte stores hit distinct
    // banks through the swizzle. Weights: 4 pieces of 16 bytes per row, rows tid / 4 and + 64.
    // Pieces past the data are zero-filled and read nothing.
    const int r_lo = lane % 8, c_lo = lane / 8, w_row = tid / 4, w_col = (tid % 4) * 16;
    // Activation copy j's row in the tile and its 16-byte chunk of the step's 128 bytes. Copies j
    // and j % kRowsB share the row (kRowsB = NB / 64 rows a thread, two chunks of each).
    constexpr int kRowsB = NB / 64;
    auto b_row = [&](int j) { return ((warp + 8 * j) % (NB / 8)) * 8 + r_lo; };
    auto b_chunk = [&](int j) { return ((warp + 8 * j) / (NB / 8)) * 4 + c_lo; };
    // The thread's sources of the loader's tile, resolved once per tile so that a step only adds
    // its K offset (per step, the 64-bit row addresses took ~20 instructions a copy): activation
    // rows b_row(j), weight rows w_row + 64 * j, scale row tid % kWgRowsA. A dead row's source is
    // its matrix's start, and a dead piece takes no K offset: every address stays inside the data.
    const int8_t *q_src[kRowsB];
    const uint8_t *w_src[2];
    const float *s_src;
    bool q_live[kRowsB], w_live[2], s_live;
    int lk = 0, ls = 0;
    auto aim_loader = [&](int tile) {
        const WgmmaTile lt = wgmma_tile(a, tile, o_tiles, NB);
#pragma unroll
        for (int j = 0; j < kRowsB; ++j) {
            const int s = lt.s0 + b_row(j);
            q_live[j] = s < lt.S;
            q_src[j] = q_live[j] ? lt.q + (size_t)s * a.ldq + c_lo * 16 : lt.q;
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int o = lt.o0 + w_row + 64 * j;
            w_live[j] = o < a.O;
            w_src[j] = w_live[j] ? lt.w + (size_t)o * a.row_bytes + w_col : lt.w;
        }
        const int o = lt.o0 + tid % kWgRowsA;
        s_live = o < a.O;
        s_src = s_live ? lt.scales + (size_t)o * a.ng : lt.scales;
    };
    aim_loader(blockIdx.x);
    auto load_next_stage = [&](int buf) {
        if (lk >= my_tiles) return;
        uint8_t *st = smem + buf * kStageBytes;
        const int ka = ls * kWgK, kb = ls * (kWgK / 2);
#pragma unroll
        for (int j = 0; j < NB / 32; ++j) {
            const int r = b_row(j), c = b_chunk(j);
            const int k = ka + (c - c_lo) * 16; // from the row's chunk c_lo, where q_src points
            const bool live = q_live[j % kRowsB] && k + c_lo * 16 < a.ldq;
            coli_cp_async16(st + r * 128 + ((c ^ r_lo) * 16), q_src[j % kRowsB] + (live ? k : 0), live);
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const bool live = w_live[j] && kb + w_col < a.row_bytes;
            coli_cp_async16(st + kBytesB + (w_row + 64 * j) * kWgStrideA + w_col, w_src[j] + (live ? kb : 0), live);
        }
        if (FMT == kG4) {
            float *scales = reinterpret_cast<float *>(st + kBytesB + kWgBytesA);
#pragma unroll
            for (int j = 0; j < kWgK / 32 * kWgRowsA / kWgThreads; ++j) {
                const int slot = tid + kWgThreads * j, c = ka + (slot / kWgRowsA) * 32;
                const int grp = scale_group(a, c);
                const bool live = s_live && c < a.ldq && grp < a.ng;
                coli_cp_async4(scales + slot, s_src + (live ? grp : 0), live);
            }
        }
        if (++ls == steps) {
            ls = 0;
            if (++lk < my_tiles) aim_loader(blockIdx.x + lk * gridDim.x);
        }
    };
    constexpr int kStages = wg_stages<HALVES>();
    for (int s = 0; s < kWgStagesAhead; ++s) {
        load_next_stage(s);
        coli_cp_async_commit();
    }
    // This thread's A rows (warpgroup warp / 4, its warp warp % 4): a_row and a_row + 8. A k32
    // step's A registers hold codes 4t..4t+3 (a[0], a[1]) and 16+4t.. (a[2], a[3]): bytes 2t, 2t+1
    // and 8+2t, 9+2t of the row's 16 packed bytes, gathered by one byte permute.
    const int a_row = (warp / 4) * 64 + (warp % 4) * 16 + g;
    const unsigned halves = (t & 1) ? 0x7632u : 0x5410u;
    int buf = 0, next_buf = kWgStagesAhead;
    // A step's start: its stage landed for every thread, the next one's loads issued, this thread's
    // weight rows unpacked into af; returns the stage.
    auto begin_step = [&](int(&af)[kWgK / 32][4]) {
        coli_cp_async_wait<kWgStagesAhead - 1>(); // this stage's pieces have landed ...
        __syncthreads();                          // ... for every thread, and the stage refilled next is consumed
        load_next_stage(next_buf);
        coli_cp_async_commit();
        next_buf = next_buf == kStages - 1 ? 0 : next_buf + 1;
        const uint8_t *st = smem + buf * kStageBytes;
        buf = buf == kStages - 1 ? 0 : buf + 1;
#pragma unroll
        for (int kk = 0; kk < kWgK / 32; ++kk) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint8_t *wr = st + kBytesB + (a_row + 8 * h) * kWgStrideA + kk * 16 + 4 * (t >> 1);
                const unsigned packed = coli_byte_perm(*(const unsigned *)wr, *(const unsigned *)(wr + 8), halves);
                unpack_q4_sixteenths(packed, af[kk][h], af[kk][2 + h]);
            }
        }
        coli_wgmma_fence();
        return st;
    };
    for (int k = 0; k < my_tiles; ++k) {
        int acc[NB / 2];
        float tsum[NB / 2]; // G4: the running sums over finished groups
#pragma unroll
        for (int i = 0; i < NB / 2; ++i) acc[i] = 0, tsum[i] = 0.0f;
        if constexpr (HALVES) {
            // Chunks of kWgHalvesChunk steps, unrolled, each keeping a second half in flight from
            // step to step and draining the last one; the steps left over take one step and its
            // drain at a time. Two register sets of A, taken in turn.
            int af[2][kWgK / 32][4];
            WgmmaHalvesCarry carry{true, {0.0f, 0.0f}};
            int step = 0;
            for (; step + kWgHalvesChunk <= steps; step += kWgHalvesChunk) {
#pragma unroll
                for (int j = 0; j < kWgHalvesChunk; ++j) {
                    const uint8_t *st = begin_step(af[j & 1]);
                    wgmma_g4_step_in_halves<NB>(a, step + j, steps, st, af[j & 1], acc, tsum, carry, a_row, j > 0);
                }
                wgmma_g4_halves_drain<NB>(acc, tsum, carry);
            }
            for (; step < steps; ++step) {
                const uint8_t *st = begin_step(af[0]);
                wgmma_g4_step_in_halves<NB>(a, step, steps, st, af[0], acc, tsum, carry, a_row, false);
                wgmma_g4_halves_drain<NB>(acc, tsum, carry);
            }
        } else {
            bool group_starts = true;
            for (int step = 0; step < steps; ++step) {
                int af[kWgK / 32][4];
                const uint8_t *st = begin_step(af);
#pragma unroll
                for (int kk = 0; kk < kWgK / 32; ++kk) {
                    if (FMT == kQ4) {
                        coli_wgmma_s8_m64nNk32(acc, af[kk], coli_wgmma_desc_sw128(st + kk * 32));
                        continue;
                    }
                    coli_wgmma_s8_m64nNk32(acc, af[kk], coli_wgmma_desc_sw128(st + kk * 32), group_starts ? 0 : 1);
                    group_starts = false;
                    const int k_end = step * kWgK + kk * 32 + 32; // codes consumed after this wgmma
                    if (k_end - 32 < a.ldq && (k_end >= a.ldq || scale_group(a, k_end) != scale_group(a, k_end - 32))) {
                        coli_wgmma_commit(); // a group ends: t = t + acc * scale
                        coli_wgmma_wait<0>();
                        const float *scales = reinterpret_cast<const float *>(st + kBytesB + kWgBytesA) + kk * kWgRowsA;
                        const float scale[2] = {scales[a_row], scales[a_row + 8]};
                        wgmma_g4_group_step(tsum, acc, scale);
                        group_starts = true;
                        coli_wgmma_fence();
                    }
                }
                coli_wgmma_commit();
                // Done before the stage is overwritten (next step's barrier) and af rewritten. Keeping a
                // group in flight made ptxas serialize the wgmmas (A written while one runs), and with af
                // double-buffered it ran slower: 69.4 against 65.8 us (docs/performance.md).
                coli_wgmma_wait<0>();
            }
        }
        const WgmmaTile ct = wgmma_tile(a, blockIdx.x + k * gridDim.x, o_tiles, NB);
        // The row scales before the stores, a chunk of kJ activation row groups at a time: y may
        // alias sx and scales as far as the compiler knows, so a load between stores waited one
        // global latency per output (8.6% of the G4 halves kernel's stall samples, 12% of Q4's,
        // docs/performance.md). Q4 takes chunks of 2: at 2 blocks per multiprocessor (128 registers)
        // its 64 accumulators leave no room for more without spilling.
        constexpr int kJ = FMT == kQ4 ? 2 : NB / 8;
        // Accumulator 4 * j + e holds output row out_o(e >> 1) of activation row out_s(j, e & 1).
        auto out_o = [&](int h) { return ct.o0 + a_row + 8 * h; };
        auto out_s = [&](int j, int b) { return ct.s0 + 8 * j + 2 * t + b; };
        float so[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) so[h] = FMT == kQ4 && out_o(h) < a.O ? ct.scales[out_o(h)] : 0.0f;
#pragma unroll
        for (int j0 = 0; j0 < NB / 8; j0 += kJ) {
            float sx[kJ][2];
#pragma unroll
            for (int j = 0; j < kJ; ++j) {
#pragma unroll
                for (int b = 0; b < 2; ++b) sx[j][b] = out_s(j0 + j, b) < ct.S ? ct.sx[out_s(j0 + j, b)] : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < kJ; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int o = out_o(e >> 1), s = out_s(j0 + j, e & 1);
                    if (s >= ct.S || o >= a.O) continue;
                    const int i = 4 * (j0 + j) + e;
                    ct.y[(size_t)s * a.O + o] = FMT == kG4 ? coli_fmul_rn(tsum[i], sx[j][e & 1])
                                                           : coli_exact_row_output(acc[i] >> 4, so[e >> 1], sx[j][e & 1]);
                }
            }
        }
    }
#endif // COLI_HAS_NV_WGMMA
}
#endif // COLI_NV_TENSOR_CORE_PATHS

} // namespace coli::gpu
