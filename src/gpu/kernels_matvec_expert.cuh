// The gate and up projections of the decode expert MLP with its hidden step, on the vector kernels
// (kernels_matvec.cuh): a 32-lane group takes row o of the gate and of the up projection (one
// activation load serves both) and writes h[o] = silu(g) * u, so the gate and up outputs never
// leave the registers and the separate hidden step's launch is gone (float mode; exact mode still
// quantizes h, with quantize_rows_kernel). For a decode step's group, the down projections and the
// routed combination are one launch too (matvec_down_combine_kernel). CPU reference:
// src/ref/expert_ref.cpp (expert_mlp, expert_group: the same shared scalar functions in the same
// order). Checked by test_gpu.cpp's expert and group tests (bit-exact in exact mode) and
// coli-conformance's expert family (its decode group cases).
#pragma once

#include "coli_compat.h"
#include "gpu/kernels_matmul.cuh"
#include "gpu/kernels_matvec.cuh"
#include "numerics/exact_math.h"

namespace coli::gpu {

// Hidden rows one block computes: one per 32-lane group.
constexpr int kSwigluRowsPerBlock = kRowsPerBlock;

// Problem p: gate p.w / p.scales, up p.w2 / p.scales2, h into p.y [S][O].
template <int FMT, int ST, bool EXACT, bool WIDE, int U = vec_pieces_in_flight(EXACT)>
__global__ void __launch_bounds__(kBlockThreads) matvec_swiglu_kernel(BatchArgs a) {
    coli_release_dependents();
    const BatchProblem &p = batch_problem(a);
    const int s0 = blockIdx.y * ST, lane = threadIdx.x % kRowLanes;
    const int o = ((int)blockIdx.x - p.first_block) * kSwigluRowsPerBlock + (int)(threadIdx.x / kRowLanes);
    if (s0 < p.S && o < a.O) {
        const int n_s = min(ST, p.S - s0);
        GroupRows<2> rows;
        rows.w[0] = p.w + (size_t)o * a.row_bytes;
        rows.w[1] = p.w2 + (size_t)o * a.row_bytes;
        rows.scales[0] = p.scales + (size_t)o * a.ng;
        rows.scales[1] = p.scales2 + (size_t)o * a.ng;
        float out[2][ST];
        matvec_rows<FMT, ST, EXACT, WIDE, 2, U>(a, rows, EXACT ? p.q + (size_t)s0 * a.ldq : nullptr, EXACT ? p.sx + s0 : nullptr,
                                          EXACT ? nullptr : p.x + (size_t)s0 * a.I, n_s, lane, out);
        for (int s = 0; s < n_s; ++s) {
            if (lane == 0) p.y[(size_t)(s0 + s) * a.O + o] = coli_swiglu(out[0][s], out[1][s]);
        }
    }
    coli_wait_prior_grid(); // every thread, also those without a row
}

// The down projections of a one-token group (decode: the top-k experts, one row each, at most
// kRowsPerBlock of them) with the routed combination: group g of a block computes rows o0 .. o0 +
// R - 1 of problem g (the g-th expert with a row, in call order), so the block holds every
// expert's outputs for its rows and adds them in call order, as combine_kernel does for one token
// (t = +0, then t + weight * out per row). The expert outputs never reach memory, and the combine
// launch is gone. Problem g's row weight is weights.w[g].
struct RowWeights {
    float w[kRowsPerBlock];
};

// Output r of a one-token group from its n experts' outputs outs[e][r], in call order as
// combine_kernel adds them: +0, then t + weight * out per expert, each product rounded.
template <int R> __device__ inline float combined_row_output(const float (&outs)[kRowsPerBlock][R], const RowWeights &weights, int n, int r) {
    float t = 0.0f;
    for (int e = 0; e < n; ++e) t = coli_fadd_rn(t, coli_fmul_rn(weights.w[e], outs[e][r]));
    return t;
}

template <int FMT, bool EXACT, bool WIDE, int R, int U>
__global__ void __launch_bounds__(kBlockThreads) matvec_down_combine_kernel(BatchArgs a, RowWeights weights, float *y) {
    coli_release_dependents();
    __shared__ float outs[kRowsPerBlock][R];
    const int g = threadIdx.x / kRowLanes, lane = threadIdx.x % kRowLanes, o0 = blockIdx.x * R;
    if (g < a.n) {
        const BatchProblem &p = a.p[g];
        float out[R][1];
        matvec_rows<FMT, 1, EXACT, WIDE, R, U>(a, consecutive_rows<R>(a, p, o0), p.q, p.sx, p.x, 1, lane, out);
        if (lane == 0) {
            for (int r = 0; r < R; ++r) outs[g][r] = out[r][0];
        }
    }
    coli_wait_prior_grid(); // every thread, also those of groups without an expert
    __syncthreads();
    const int r = threadIdx.x;
    if (r < R && o0 + r < a.O) y[o0 + r] = combined_row_output(outs, weights, a.n, r);
}

} // namespace coli::gpu
