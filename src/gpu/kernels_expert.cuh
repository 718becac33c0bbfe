// Expert kernels: the SwiGLU hidden step and the routed combination of an expert group.
// CPU reference: src/ref/expert_ref.cpp (same shared scalar functions, same order).
#pragma once

#include "coli_compat.h"
#include "gpu/kernels_matmul.cuh"
#include "numerics/exact_math.h"

namespace coli::gpu {

// h[k] = silu(g[k]) * u[k] with the library's own exp (coli_swiglu), n elements.
__global__ void swiglu_kernel(const float *g, const float *u, float *h, size_t n) {
    coli_release_dependents();
    coli_wait_prior_grid(); // launched overlapped (coli_compat.h)
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) h[k] = coli_swiglu(g[k], u[k]);
}

// Exact mode's hidden step of the three-launch path, one block per row: h = silu(g) * u (kept for
// the float paths' benefit and for tests), then the row's activation codes exactly as
// quantize_rows_kernel computes them from h (the same helper).
__global__ void __launch_bounds__(kBlockThreads) swiglu_quantize_kernel(const float *g, const float *u, float *h, int F,
                                                                        int8_t *q, int ldq, float *sx) {
    coli_release_dependents();
    coli_wait_prior_grid(); // launched overlapped (coli_compat.h)
    const size_t row = blockIdx.x;
    const float *gr = g + row * F, *ur = u + row * F;
    float *hr = h + row * F;
    float m = 0.0f;
#pragma unroll 8
    for (int i = threadIdx.x; i < F; i += kBlockThreads) {
        const float v = coli_swiglu(gr[i], ur[i]);
        hr[i] = v;
        const float mag = fabsf(v);
        m = mag > m ? mag : m;
    }
    // Each thread reads back only the h it wrote itself: no barrier needed before the codes.
    quantize_row_from_partial_max(m, [hr](int i) { return hr[i]; }, F, q + row * ldq, ldq, sx + row);
}

// An expert group's routing for the combine, [start: n_tokens + 1][rows: total][weights: total]:
// token tok's rows are rows[start[tok] .. start[tok + 1]) in increasing row order (the call
// order), weights[r] is row r's weight (float bits). A decode step's table (a few dozen words)
// travels in the launch's parameters; a larger one is copied to the device first.
constexpr int kInlineRoutingWords = 512;

struct RoutingTable {
    const int *table; // the device copy, or nullptr: the table is `words`
    int n_tokens, total;
    int words[kInlineRoutingWords];
};

__device__ inline int routing_word(const RoutingTable &r, int k) { return r.table ? r.table[k] : r.words[k]; }

// y[tok][d] from the expert outputs out [rows][D]: +0, then for each row routed to tok in call
// order y = y + weight[r] * out[r][d], the product rounded, then added: the reference's order
// exactly. Up to 8 rows' loads are issued before their sums (the sums stay in order).
__global__ void combine_kernel(const float *out, RoutingTable rt, float *y, int D) {
    coli_release_dependents();
    coli_wait_prior_grid(); // launched overlapped (coli_compat.h)
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)rt.n_tokens * D) return;
    const int tok = (int)(k / D), d = (int)(k % D);
    const int j_end = routing_word(rt, tok + 1);
    float t = 0.0f;
    for (int j = routing_word(rt, tok); j < j_end; j += 8) {
        float v[8], w[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            if (j + u < j_end) {
                const int r = routing_word(rt, rt.n_tokens + 1 + j + u);
                v[u] = out[(size_t)r * D + d];
                w[u] = coli_float_from_bits((unsigned)routing_word(rt, rt.n_tokens + 1 + rt.total + r));
            }
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            if (j + u < j_end) t = coli_fadd_rn(t, coli_fmul_rn(w[u], v[u]));
        }
    }
    y[k] = t;
}

__global__ void invalid_launch_probe_kernel(int *p) {
    if (p) *p = 1;
}

} // namespace coli::gpu
