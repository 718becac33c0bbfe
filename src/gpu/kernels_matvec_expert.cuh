// The gate and up projections of the decode expert MLP with its hidden step, on the vector kernels
// (kernels_matvec.cuh): a 32-lane group takes row o of the gate and of the up projection (one
// activation load serves both) and writes h[o] = silu(g) * u, so the gate and up outputs never
// leave the registers and the separate hidden step's launch is gone (float mode; exact mode still
// quantizes h, with quantize_rows_kernel). CPU reference: src/ref/expert_ref.cpp (expert_mlp: the
// same shared scalar functions in the same order). Checked by test_gpu.cpp's expert and group
// tests (bit-exact in exact mode) and coli-conformance's expert family.
#pragma once

#include "coli_compat.h"
#include "gpu/kernels_matmul.cuh"
#include "gpu/kernels_matvec.cuh"
#include "numerics/exact_math.h"

namespace coli::gpu {

// Hidden rows one block computes: one per 32-lane group.
constexpr int kSwigluRowsPerBlock = kRowsPerBlock;

// Problem p: gate p.w / p.scales, up p.w2 / p.scales2, h into p.y [S][O].
template <int FMT, int ST, bool EXACT, bool WIDE>
__global__ void __launch_bounds__(kBlockThreads) matvec_swiglu_kernel(BatchArgs a) {
    coli_release_dependents();
    const BatchProblem &p = batch_problem(a);
    const int s0 = blockIdx.y * ST, lane = threadIdx.x % kRowLanes;
    const int o = ((int)blockIdx.x - p.first_block) * kSwigluRowsPerBlock + (int)(threadIdx.x / kRowLanes);
    if (s0 < p.S && o < a.O) {
        const int n_s = min(ST, p.S - s0);
        GroupRows rows;
        rows.w[0] = p.w + (size_t)o * a.row_bytes;
        rows.w[1] = p.w2 + (size_t)o * a.row_bytes;
        rows.scales[0] = p.scales + (size_t)o * a.ng;
        rows.scales[1] = p.scales2 + (size_t)o * a.ng;
        float out[kVecRowsPerGroup][ST];
        matvec_rows<FMT, ST, EXACT, WIDE>(a, rows, EXACT ? p.q + (size_t)s0 * a.ldq : nullptr, EXACT ? p.sx + s0 : nullptr,
                                          EXACT ? nullptr : p.x + (size_t)s0 * a.I, n_s, lane, out);
        for (int s = 0; s < n_s; ++s) {
            if (lane == 0) p.y[(size_t)(s0 + s) * a.O + o] = coli_swiglu(out[0][s], out[1][s]);
        }
    }
    coli_wait_prior_grid(); // every thread, also those without a row
}

} // namespace coli::gpu
