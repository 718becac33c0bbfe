// Balanced vector-load matmul for decode (the "split" path, MatmulPath::split): the same arithmetic
// as matvec_kernel (kernels_matvec.cuh) with the work cut so that every block streams the same
// number of weight bytes. CPU reference: src/ref/matmul_ref.cpp; checked by src/tests/test_gpu.cpp
// and coli-conformance through the path registry.
//
// Why: an expert group at S=1 is a pure weight stream (151 MB at 4 TB/s). Whole rows per 32-lane
// group leave waves of short blocks and a partly idle tail; here the rows of all matrices of the
// batch form one list of row pairs, block b takes an equal contiguous share of it, and its 8 groups
// take "tiles" (a row pair x a segment of 32 pieces, one 16-byte load per lane and row) in turn, so
// a block's groups finish together and the grid can be sized to the device (one wave).
//
// Each tile's sums over its 32 lanes land in shared memory per (row, activation row, unit), a unit
// being a segment, or a scale group for exact G4; after a barrier each output is finished from its
// units in order: integer sums (exact in any order) then the contract's epilogue (per row, or per
// group in group order for G4); float sums in segment order (deterministic).
//
// Takes: rows whose bytes are whole segments (32 x 16 bytes; I a multiple of 1024 codes for Q4),
// exact G4 with gs a multiple of the piece dividing the segment, float G4 with gs a multiple of the
// piece (one scale per piece). split_shape in backend_impl.cuh says so on the host.
#pragma once

#include <type_traits>

#include "coli_compat.h"
#include "gpu/kernels_matmul.cuh"
#include "gpu/kernels_matvec.cuh"

namespace coli::gpu {

constexpr int kSplitPieceBytes = 16;                        // one 16-byte weight load per lane and row
constexpr int kSplitSegmentBytes = kSplitPieceBytes * kRowLanes; // a tile's row span: 512 bytes
constexpr int kSplitGroupsPerBlock = kBlockThreads / kRowLanes;
// Automatic selection keeps exact G4 that the skinny tensor-core kernels do not take (gs not a
// multiple of 128) on this path from 2 rows (one row takes vector, whose G4 products are staged at
// one row, where the shape allows) up to kSplitMaxAutoRowsExactG4 rows, or
// kSplitMaxAutoRowsExactG4LongRows where the rows are longer than the matrix is tall (I > O: few
// 128-row tiles for the tensor cores), ahead of the tensor cores. Split against the faster
// tensor-core kernel on the H200 at 16 / 24 / 32 rows: 2048 x 6144 32.9 / 42.8 / 70.3 against 84.3
// / 84.6 / 84.9 us, 6144 x 2048 29.1 / 41.5 / 53.4 against 32.0 / 32.1 / 32.4
// (docs/performance.md).
constexpr int kSplitMaxAutoRowsExactG4 = 16;
constexpr int kSplitMaxAutoRowsExactG4LongRows = 32;

// Codes in one 16-byte piece of a row: the vector kernel's wide piece (split_shape on the host asks
// the same).
COLI_HD constexpr int split_piece_codes(int fmt) { return vec_wide_piece(fmt); }
static_assert(kSplitPieceBytes == 16, "a split piece is a wide vector piece");

// The shape of one launch, fixed on the host (launch_split in backend_impl.cuh).
struct SplitShape {
    int pairs_per_problem; // ceil(O / kVecRowsPerGroup)
    int total_pairs;       // over the batch
    int segments;          // per row: row_bytes / kSplitSegmentBytes
    int units;             // shared-memory sums per row and activation row (segments, or groups for exact G4)
    int unit_lanes;        // lanes per unit: 32, or gs / piece codes for exact G4 (a power of two)
    int unit_shift;        // exact G4: log2(unit_lanes), a piece's group is its index >> unit_shift
};

// A group's place in its walk over the block's tiles: pair in block, segment, and the pair's
// problem and first row, advanced without divisions (they would cost more than the tile's math).
struct SplitCursor {
    int pl, seg, prob, o;
    __device__ __forceinline__ void advance(const SplitShape &sh, int tiles) {
        seg += tiles;
        while (seg >= sh.segments) {
            seg -= sh.segments;
            ++pl;
            o += kVecRowsPerGroup;
            if (o >= sh.pairs_per_problem * kVecRowsPerGroup) o = 0, ++prob;
        }
    }
};

template <int FMT, int ST, bool EXACT>
__global__ void __launch_bounds__(kBlockThreads) matvec_split_kernel(BatchArgs a, SplitShape sh) {
    // U tiles in flight per group: 16 bytes x R rows x U per lane (float needs its registers for x)
    constexpr int R = kVecRowsPerGroup, PC = split_piece_codes(FMT), NW = PC / 4, U = EXACT ? 4 : 2;
    constexpr int G = kSplitGroupsPerBlock;
    static_assert(R == 2, "the tile unpacking below names two rows");
    using Sum = typename std::conditional<EXACT, int, float>::type;
    // Launched overlapped (coli_compat.h): the first tiles' weight loads are issued before the
    // wait for the kernel that writes the activations.
    coli_release_dependents();
    extern __shared__ unsigned char split_smem[];
    Sum *sums = reinterpret_cast<Sum *>(split_smem); // [pair in block][R][ST][units]
    const int s0 = blockIdx.y * ST;
    const int p0 = (int)((long long)blockIdx.x * sh.total_pairs / gridDim.x);
    const int p1 = (int)((long long)(blockIdx.x + 1) * sh.total_pairs / gridDim.x);
    const int lane = threadIdx.x % kRowLanes, group = threadIdx.x / kRowLanes;
    const int tiles = (p1 - p0) * sh.segments;
    const bool g4_exact = EXACT && FMT == kG4;
    SplitCursor walk{group / sh.segments, group % sh.segments, 0, 0};
    walk.prob = (p0 + walk.pl) / sh.pairs_per_problem;
    walk.o = (p0 + walk.pl) % sh.pairs_per_problem * R;

    for (int t0 = group; t0 < tiles; t0 += G * U) {
        uint4 raw[U][R];
        SplitCursor c = walk;
#pragma unroll
        for (int u = 0; u < U; ++u) { // U tiles' loads in flight before any is used
            if (t0 + u * G < tiles) {     // uniform over the group
                const uint8_t *w = a.p[c.prob].w + c.seg * kSplitSegmentBytes + lane * kSplitPieceBytes;
                for (int r = 0; r < R; ++r) raw[u][r] = *(const uint4 *)(w + (size_t)min(c.o + r, a.O - 1) * a.row_bytes);
            }
            c.advance(sh, G);
        }
        if (t0 == group) coli_wait_prior_grid();
        c = walk;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (t0 + u * G >= tiles) continue;
            const BatchProblem &p = a.p[c.prob];
            const int n_s = min(ST, p.S - s0); // may be <= 0: this problem has no rows here
            const int col = c.seg * kRowLanes + lane; // piece index within the row
            const unsigned w[R][4] = {{raw[u][0].x, raw[u][0].y, raw[u][0].z, raw[u][0].w},
                                      {raw[u][1].x, raw[u][1].y, raw[u][1].z, raw[u][1].w}};
            Sum part[R][ST];
            for (int s = 0; s < ST; ++s) {
                for (int r = 0; r < R; ++r) part[r][s] = 0;
                if (s >= n_s) continue;
                const int srow = s0 + s;
                if (EXACT) {
                    const int4 *q = (const int4 *)(p.q + (size_t)srow * a.ldq + (size_t)col * PC);
                    for (int k4 = 0; k4 < NW / 4; ++k4) {
                        const int4 q4 = q[k4];
                        const int qw[4] = {q4.x, q4.y, q4.z, q4.w};
                        for (int k = 0; k < 4; ++k) {
                            for (int r = 0; r < R; ++r) {
                                part[r][s] = coli_dot4_i8(signed_codes<FMT>(biased_word<FMT>(w[r], 4 * k4 + k)), qw[k],
                                                          (int)part[r][s]);
                            }
                        }
                    }
                } else {
                    const float4 *x = (const float4 *)(p.x + (size_t)srow * a.I + (size_t)col * PC);
                    for (int k = 0; k < NW; ++k) {
                        const float4 xv = x[k];
                        for (int r = 0; r < R; ++r) {
                            const unsigned bw = biased_word<FMT>(w[r], k);
                            part[r][s] += xv.x * float_code<FMT>(bw, 0) + xv.y * float_code<FMT>(bw, 1) +
                                          xv.z * float_code<FMT>(bw, 2) + xv.w * float_code<FMT>(bw, 3);
                        }
                    }
                    if (FMT == kG4) {
                        for (int r = 0; r < R; ++r) {
                            part[r][s] *= p.scales[(size_t)min(c.o + r, a.O - 1) * a.ng + col * PC / a.gs];
                        }
                    }
                }
            }
            // Sum over each unit's lanes (a butterfly: every lane ends with its unit's sum), then
            // the unit's first lane stores it.
            const int unit = g4_exact ? col >> sh.unit_shift : c.seg;
            for (int r = 0; r < R; ++r) {
                for (int s = 0; s < ST; ++s) {
                    Sum v = part[r][s];
                    for (int m = 1; m < sh.unit_lanes; m <<= 1) v += coli_shfl_xor(v, m, kRowLanes);
                    if (lane % sh.unit_lanes == 0) sums[((c.pl * R + r) * ST + s) * sh.units + unit] = v;
                }
            }
            c.advance(sh, G);
        }
        walk = c; // past the last tile only when the loop ends
    }
    coli_wait_prior_grid(); // groups without tiles have not waited yet
    __syncthreads();
    // Each output from its units: (pair in block, row of the pair, activation row).
    for (int k = threadIdx.x; k < (p1 - p0) * R * ST; k += kBlockThreads) {
        const int s = k % ST, r = (k / ST) % R, pl = k / (ST * R);
        const int pair = p0 + pl;
        const BatchProblem &p = a.p[pair / sh.pairs_per_problem];
        const int o = (pair % sh.pairs_per_problem) * R + r;
        if (o >= a.O || s0 + s >= p.S) continue;
        const Sum *v = sums + ((pl * R + r) * ST + s) * sh.units;
        float out;
        if (EXACT && FMT != kG4) {
            int acc = 0;
            for (int j = 0; j < sh.units; ++j) acc += (int)v[j];
            out = coli_exact_row_output(acc, p.scales[o], p.sx[s0 + s]);
        } else if (EXACT) {
            float t = 0.0f;
            for (int g = 0; g < sh.units; ++g) t = coli_exact_group_step(t, (int)v[g], p.scales[(size_t)o * a.ng + g]);
            out = coli_fmul_rn(t, p.sx[s0 + s]);
        } else {
            float sum = 0.0f;
            for (int j = 0; j < sh.units; ++j) sum += (float)v[j];
            out = FMT == kG4 ? sum : sum * p.scales[o];
        }
        p.y[(size_t)(s0 + s) * a.O + o] = out;
    }
}

} // namespace coli::gpu
