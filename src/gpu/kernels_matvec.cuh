// Vector-load matmul kernels for decode and small batches ("vector" path), grouped: one launch
// runs up to kBatchProblems matrices of one layout (all gate and up projections of an expert group,
// then all down projections; kernels_matvec_expert.cuh pairs each gate row with its up row). CPU
// reference: src/ref/matmul_ref.cpp. Checked by src/tests/test_gpu.cpp (every path) and
// coli-conformance's matmul and expert families.
//
// Layout: a block of 256 threads is 8 groups of 32 lanes; each group computes R output rows
// (kVecRowsPerGroup = 2 unless a kernel says otherwise), so every activation load serves R weight
// rows. A lane's unit is a "piece": the
// codes under one weight load per row, a narrow piece of 16 activation codes (exact) or 4 floats
// (float), or 16 weight bytes ("wide": exact calls of at most 2 rows, vector_wide). Lane l takes
// pieces l, l + 32, ..., so each load of the 32 lanes is one contiguous span, and U pieces per
// lane and row (vec_pieces_in_flight unless a kernel says otherwise) are loaded before any is
// used (bytes in flight). Codes are unpacked into bytes in element order ("biased": code + bias,
// every byte non-negative), then
//  - exact: turned into signed int8 lanes for dot4 against the activation codes; int32 sums are
//    exact in any order and the contract's epilogue runs once per row (per group, in group order,
//    for G4), so results are bit-identical to every other path;
//  - float: turned into floats by exponent-bit assembly (2^23 + byte, minus 2^23 + bias: exact,
//    cheaper than an int-to-float conversion), fp32 FMA sums, the row (group) scale applied after.
// Eligibility (vector_shape in backend_impl.cuh): the row bytes a multiple of the piece's
// weight bytes, activations read only within the row (exact: within the zero-padded codes), a G4
// scale group whole pieces (exact: gs / piece a power of two up to 32, whole lanes of one step).
// Other shapes take the portable kernels.
#pragma once

#include "coli_compat.h"
#include "gpu/kernels_matmul.cuh"

namespace coli::gpu {

constexpr int kVecRowsPerGroup = 2;
constexpr int kVecRowsPerBlock = kRowsPerBlock * kVecRowsPerGroup;

template <int FMT> COLI_HD constexpr unsigned vec_bias() { return FMT == kQ8 ? 128u : FMT == kQ2 ? 2u : 8u; }

COLI_HD constexpr int vec_codes_per_byte(int fmt) { return fmt == kQ8 ? 1 : fmt == kQ2 ? 4 : 2; }

// Codes per piece: wide, those of 16 weight bytes (one 128-bit load per row); narrow, 16 activation
// codes (exact: one int4 load) or 4 floats (float: one float4 load). The 32 lanes of a group read
// one contiguous span of activations (coalesced) and of each row's weight bytes. The host's
// eligibility checks (backend_impl.cuh) and the split kernel's pieces use the same functions.
COLI_HD constexpr int vec_wide_piece(int fmt) { return 16 * vec_codes_per_byte(fmt); }
COLI_HD constexpr int vec_narrow_piece(bool exact) { return exact ? 16 : 4; }
template <int FMT, bool EXACT, bool WIDE> COLI_HD constexpr int vec_piece() {
    return WIDE ? vec_wide_piece(FMT) : vec_narrow_piece(EXACT);
}
template <int FMT, bool EXACT, bool WIDE> COLI_HD constexpr int vec_weight_bytes() {
    return vec_piece<FMT, EXACT, WIDE>() / vec_codes_per_byte(FMT);
}

// B contiguous bytes (B = 1, 2, 4, 8 or 16, aligned to B) as little-endian words.
template <int B> __device__ inline void load_piece(const uint8_t *p, unsigned (&w)[(B + 3) / 4]) {
    if constexpr (B == 16) {
        const uint4 v = *(const uint4 *)p;
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (B == 8) {
        const uint2 v = *(const uint2 *)p;
        w[0] = v.x, w[1] = v.y;
    } else if constexpr (B == 4) {
        w[0] = *(const unsigned *)p;
    } else if constexpr (B == 2) {
        w[0] = *(const unsigned short *)p;
    } else {
        w[0] = *p;
    }
}

// Word k of a piece's weight codes as (code + bias) bytes in element order (every byte
// non-negative), from the piece's packed words.
template <int FMT> __device__ inline unsigned biased_word(const unsigned *in, int k) {
    if (FMT == kQ8) return in[k] ^ 0x80808080u;
    if (FMT == kQ2) { // field j of byte b is element 4b + j
        const unsigned v = in[k / 4];
        const unsigned f0 = v & 0x03030303u, f1 = (v >> 2) & 0x03030303u;
        const unsigned f2 = (v >> 4) & 0x03030303u, f3 = (v >> 6) & 0x03030303u;
        const unsigned sel = (k % 4) < 2 ? 0x5140u : 0x7362u;
        const unsigned p01 = coli_byte_perm(f0, f1, sel), p23 = coli_byte_perm(f2, f3, sel);
        return coli_byte_perm(p01, p23, k % 2 == 0 ? 0x5410u : 0x7632u);
    }
    // Q4, G4: element 2b in the low nibble of byte b, 2b + 1 in the high one
    const unsigned v = in[k / 2];
    return coli_byte_perm(v & 0x0f0f0f0fu, (v >> 4) & 0x0f0f0f0fu, k % 2 == 0 ? 0x5140u : 0x7362u);
}

// Biased bytes -> signed int8 lanes: byte + (0x80 - bias) stays below 0x100 (no carry between
// bytes), and flipping bit 7 subtracts 0x80 in two's complement.
template <int FMT> __device__ inline int signed_codes(unsigned u) {
    return (int)((u + (0x80u - vec_bias<FMT>()) * 0x01010101u) ^ 0x80808080u);
}

// Byte j of biased word u as the float code: 2^23 + byte assembled from bits, minus 2^23 + bias.
template <int FMT> __device__ inline float float_code(unsigned u, int j) {
    return coli_float_from_bits(coli_byte_perm(u, 0x4b000000u, 0x7440u + (unsigned)j)) -
           (8388608.0f + (float)vec_bias<FMT>());
}

// Pieces per lane and row loaded before any is used, unless a kernel says otherwise.
COLI_HD constexpr int vec_pieces_in_flight(bool exact) { return exact ? 4 : 8; }

// Exact G4 at one activation row: shared-memory slots per 32-lane group for its rows' piece sums
// (R x pieces per row: the decode downs' 8 x 64 and the gate/up pairs' 2 x 192 wide pieces) and
// group products (R x groups: 8 x 16 and 2 x 48 at gs = 128; matvec_rows). Rows with more pieces
// or groups add in the loop.
constexpr int kG4StagedPieces = 512;
constexpr int kG4StagedGroups = 128;

// The R weight rows of a 32-lane group and their scales ([ng] each).
template <int R> struct GroupRows {
    const uint8_t *w[R];
    const float *scales[R];
};

// Rows o0 .. o0 + R - 1 of problem p (clamped to the last row; the caller drops outputs past O).
template <int R> __device__ inline GroupRows<R> consecutive_rows(const BatchArgs &a, const BatchProblem &p, int o0) {
    GroupRows<R> g;
    for (int r = 0; r < R; ++r) {
        const int o = min(o0 + r, a.O - 1);
        g.w[r] = p.w + (size_t)o * a.row_bytes;
        g.scales[r] = p.scales + (size_t)o * a.ng;
    }
    return g;
}

// One 32-lane group's dot products of its rows with activation rows 0 .. ST - 1 of q/sx (exact)
// or x (float), of which the first n_s exist (the others repeat row 0 and are dropped); every
// lane returns every row's output in out. The group's first weight loads are issued before
// coli_wait_prior_grid(), the activations read after it. The activation pointers are arguments,
// resolved once by the caller: read from the problem (a parameter-space reference with a runtime
// index) inside the loop, they cost the H200 5% at decode and 28% in float mode at 4 rows
// (measured at 2788509).
template <int FMT, int ST, bool EXACT, bool WIDE, int R, int U>
__device__ inline void matvec_rows(const BatchArgs &a, const GroupRows<R> &rows, const int8_t *q, const float *sx, const float *x,
                                   int n_s, int lane, float (&out)[R][ST]) {
    constexpr int PIECE = vec_piece<FMT, EXACT, WIDE>(), WB = vec_weight_bytes<FMT, EXACT, WIDE>();
    constexpr int NW = PIECE / 4; // NW code words per piece, U pieces per lane and row in flight
    const int pieces = a.row_bytes / WB;
    int row_of[ST]; // activation rows; rows past n_s repeat row 0
    for (int s = 0; s < ST; ++s) row_of[s] = s < n_s ? s : 0;
    // G4: a piece's scale group is its index >> log2(group_pieces) in exact mode (gs a power of
    // two: whole lanes of one step), scale_group's multiply-high by the host's gs_magic in float
    // mode. Measured (docs/performance.md): a select between the two cost the float G4 decode
    // group 8%; shifting the piece's first code by a host-given log2 gs instead cost the exact one
    // 1.2 - 2.6 us (H100, H200).
    const int group_pieces = FMT == kG4 ? a.gs / PIECE : 1;
    int group_shift = 0;
    if (EXACT && FMT == kG4) {
        while ((1 << group_shift) < group_pieces) ++group_shift;
    }
    // Exact G4 at one activation row (decode): every lane stores its pieces' integer sums in
    // shared memory (no shuffles, no scales in the loop). After it the group products (sum x
    // scale, rounded once) are dealt out to the lanes as pairs p = r x groups + g (KP per lane,
    // their scales loaded before the loop: loaded after it, they cost the decode group a memory
    // round trip, 74.5 -> 89 us on an H100), and lane r adds row r's in group order. Adding them
    // in the loop (every lane, by shuffles, per step) gave the exact G4 decode group 2.4x the
    // instructions of Q4's (92 against 50 us on the H200).
    constexpr bool STAGEABLE = EXACT && FMT == kG4 && ST == 1;
    constexpr int KP = STAGEABLE ? kG4StagedGroups / kRowLanes : 1;
    const bool staged = STAGEABLE && R * pieces <= kG4StagedPieces && R * a.ng <= kG4StagedGroups;
    __shared__ __align__(16) int g4_piece_sums[STAGEABLE ? kRowsPerBlock * kG4StagedPieces : 1];
    __shared__ float g4_products[STAGEABLE ? kRowsPerBlock * kG4StagedGroups : 1];
    const int warp_in_block = (int)(threadIdx.x / kRowLanes);
    const int piece_slot0 = STAGEABLE ? warp_in_block * kG4StagedPieces : 0, slot0 = STAGEABLE ? warp_in_block * kG4StagedGroups : 0;
    const auto pair_row = [&](int pair) { // R compile-time compares, no division, no indexed rows
        int r = 0;
#pragma unroll
        for (int rr = 1; rr < R; ++rr) r += pair >= rr * a.ng;
        return r;
    };
    float held_scale[KP];
    if (staged) {
        for (int k = 0; k < KP; ++k) {
            const int pair = lane + kRowLanes * k, r = pair_row(pair);
            const float *scales = rows.scales[0];
#pragma unroll
            for (int rr = 1; rr < R; ++rr) scales = r == rr ? rows.scales[rr] : scales;
            held_scale[k] = pair < R * a.ng ? scales[pair - r * a.ng] : 0.0f;
        }
    }

    int iacc[R][ST];
    float facc[R][ST];
    for (int r = 0; r < R; ++r) {
        for (int s = 0; s < ST; ++s) {
            iacc[r][s] = 0;
            facc[r][s] = 0.0f;
        }
    }
    for (int base = 0; base < pieces; base += kRowLanes * U) {
        unsigned raw[U][R][(WB + 3) / 4];
        // G4 (but exact at one row): each piece's group scale, loaded with its weights. Loaded
        // where the products need it, each step waited for its scale's latency in turn.
        constexpr bool SCALES_WITH_WEIGHTS = FMT == kG4 && !STAGEABLE;
        float piece_scale[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int pc = base + u * kRowLanes + lane;
            for (int r = 0; r < R; ++r) {
                if (pc < pieces) load_piece<WB>(rows.w[r] + (size_t)pc * WB, raw[u][r]);
                else for (int k = 0; k < (WB + 3) / 4; ++k) raw[u][r][k] = 0u;
                if (SCALES_WITH_WEIGHTS) {
                    const int pl = min(pc, pieces - 1);
                    piece_scale[u][r] = rows.scales[r][EXACT ? pl >> group_shift : scale_group(a, pl * PIECE)];
                }
            }
        }
        if (base == 0) coli_wait_prior_grid();
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int pc = base + u * kRowLanes + lane;
            const bool live = pc < pieces;
            if (EXACT) {
                int part[R][ST];
                for (int r = 0; r < R; ++r)
                    for (int s = 0; s < ST; ++s) part[r][s] = 0;
                if (live) {
                    for (int s = 0; s < ST; ++s) {
                        const int4 *qs = (const int4 *)(q + (size_t)row_of[s] * a.ldq) + (size_t)pc * (NW / 4);
#pragma unroll
                        for (int k4 = 0; k4 < NW / 4; ++k4) {
                            const int4 q4 = qs[k4];
                            const int qw[4] = {q4.x, q4.y, q4.z, q4.w};
                            for (int k = 0; k < 4; ++k) {
                                for (int r = 0; r < R; ++r) {
                                    part[r][s] = coli_dot4_i8(signed_codes<FMT>(biased_word<FMT>(raw[u][r], 4 * k4 + k)), qw[k],
                                                              part[r][s]);
                                }
                            }
                        }
                    }
                }
                if (FMT != kG4) {
                    for (int r = 0; r < R; ++r)
                        for (int s = 0; s < ST; ++s) iacc[r][s] += part[r][s];
                } else if (staged) {
                    if (live) {
                        for (int r = 0; r < R; ++r) g4_piece_sums[piece_slot0 + r * pieces + pc] = part[r][0];
                    }
                } else if (base + u * kRowLanes < pieces) {
                    // The contract's G4 epilogue, t = t + acc_g * scale_g in group order: sum
                    // each group over its lanes, round its product once, then add this step's
                    // groups in lane (= group) order. Every lane computes the same t.
                    const int first = base + u * kRowLanes;
                    for (int r = 0; r < R; ++r) {
                        // (exact at one row: a shape too large to stage, loaded here)
                        const float scale = SCALES_WITH_WEIGHTS ? piece_scale[u][r]
                                                                : rows.scales[r][min(pc, pieces - 1) >> group_shift];
                        for (int s = 0; s < ST; ++s) {
                            int sum = part[r][s];
                            for (int m = 1; m < group_pieces; m <<= 1) sum += coli_shfl_xor(sum, m, kRowLanes);
                            const float prod = coli_exact_group_product(sum, scale);
                            for (int leader = 0; leader < kRowLanes && first + leader < pieces; leader += group_pieces) {
                                facc[r][s] = coli_fadd_rn(facc[r][s], coli_shfl(prod, leader, kRowLanes));
                            }
                        }
                    }
                }
            } else if (live) {
                for (int s = 0; s < ST; ++s) {
                    const float4 *xs = (const float4 *)(x + (size_t)row_of[s] * a.I) + (size_t)pc * NW;
                    float part[R];
                    for (int r = 0; r < R; ++r) part[r] = 0.0f;
#pragma unroll
                    for (int k = 0; k < NW; ++k) {
                        const float4 xv = xs[k];
                        for (int r = 0; r < R; ++r) {
                            const unsigned bw = biased_word<FMT>(raw[u][r], k);
                            part[r] += xv.x * float_code<FMT>(bw, 0) + xv.y * float_code<FMT>(bw, 1) +
                                       xv.z * float_code<FMT>(bw, 2) + xv.w * float_code<FMT>(bw, 3);
                        }
                    }
                    for (int r = 0; r < R; ++r) {
                        if (FMT == kG4) part[r] *= piece_scale[u][r];
                        facc[r][s] += part[r];
                    }
                }
            }
        }
    }
    if (staged) {
        coli_sync_lanes();
        for (int k = 0; k < KP; ++k) {
            const int pair = lane + kRowLanes * k;
            if (pair < R * a.ng) {
                const int r = pair_row(pair), first = (pair - r * a.ng) * group_pieces;
                const int n = min(group_pieces, pieces - first); // a partial last group has fewer
                const int *sums = g4_piece_sums + piece_slot0 + r * pieces + first;
                int sum = 0;
                if (n % 4 == 0 && (r * pieces + first) % 4 == 0) {
                    for (int j = 0; j < n; j += 4) {
                        const int4 v = *(const int4 *)(sums + j);
                        sum += v.x + v.y + v.z + v.w;
                    }
                } else {
                    for (int j = 0; j < n; ++j) sum += sums[j];
                }
                g4_products[slot0 + pair] = coli_exact_group_product(sum, held_scale[k]);
            }
        }
        coli_sync_lanes();
        float t = 0.0f;
        if (lane < R) {
            for (int g = 0; g < a.ng; ++g) t = coli_fadd_rn(t, g4_products[slot0 + lane * a.ng + g]);
        }
        for (int r = 0; r < R; ++r) facc[r][0] = coli_shfl(t, r, kRowLanes);
    }
    for (int r = 0; r < R; ++r) {
        for (int s = 0; s < ST; ++s) {
            if (EXACT && FMT != kG4) {
                out[r][s] = coli_exact_row_output(row_sum_i32(iacc[r][s]), rows.scales[r][0], sx[row_of[s]]);
            } else if (EXACT) {
                out[r][s] = coli_fmul_rn(facc[r][s], sx[row_of[s]]);
            } else {
                const float sum = row_sum_f32(facc[r][s]);
                out[r][s] = FMT == kG4 ? sum : sum * rows.scales[r][0];
            }
        }
    }
}

// One 32-lane group per row pair: block b of problem p takes its rows from (b - first_block) *
// kVecRowsPerBlock. Launched overlapped (coli_compat.h): a group's first weight loads are issued
// before the wait for the kernel that writes the activations. (A persistent one-wave variant that
// walked all pairs per group measured no faster at decode and slower at S = 4 on the H200.)
template <int FMT, int ST, bool EXACT, bool WIDE, int R = kVecRowsPerGroup, int U = vec_pieces_in_flight(EXACT)>
__global__ void __launch_bounds__(kBlockThreads) matvec_kernel(BatchArgs a) {
    coli_release_dependents();
    const BatchProblem &p = batch_problem(a);
    const int s0 = blockIdx.y * ST, lane = threadIdx.x % kRowLanes;
    const int o0 = ((int)blockIdx.x - p.first_block) * kRowsPerBlock * R + (int)(threadIdx.x / kRowLanes) * R;
    if (s0 < p.S && o0 < a.O) {
        float out[R][ST];
        const int n_s = min(ST, p.S - s0);
        matvec_rows<FMT, ST, EXACT, WIDE, R, U>(a, consecutive_rows<R>(a, p, o0), EXACT ? p.q + (size_t)s0 * a.ldq : nullptr,
                                                EXACT ? p.sx + s0 : nullptr, EXACT ? nullptr : p.x + (size_t)s0 * a.I, n_s, lane,
                                                out);
        for (int r = 0; r < R; ++r) {
            for (int s = 0; s < n_s; ++s) {
                if (lane == 0 && o0 + r < a.O) p.y[(size_t)(s0 + s) * a.O + o0 + r] = out[r][s];
            }
        }
    }
    coli_wait_prior_grid(); // every thread, also those without a pair
}

} // namespace coli::gpu
