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

// swiglu_quantize_kernel for F of at most V * 1024 with F % 4 == 0: a thread holds its V float4s
// of h in registers for the codes (hold_row, quantize_held_row).
template <int V>
__global__ void __launch_bounds__(kBlockThreads) swiglu_quantize_short_kernel(const float *g, const float *u, float *h, int F,
                                                                              int8_t *q, int ldq, float *sx) {
    coli_release_dependents();
    coli_wait_prior_grid(); // launched overlapped (coli_compat.h)
    const size_t row = blockIdx.x;
    const float4 *gr = (const float4 *)(g + row * F), *ur = (const float4 *)(u + row * F);
    float4 *hr = (float4 *)(h + row * F);
    const int n4 = F / 4;
    float4 v[V];
    const float m = hold_row<V>(v, n4, [gr, ur, hr](int i) {
        const float4 a = gr[i], b = ur[i];
        const float4 h = make_float4(coli_swiglu(a.x, b.x), coli_swiglu(a.y, b.y), coli_swiglu(a.z, b.z), coli_swiglu(a.w, b.w));
        hr[i] = h;
        return h;
    });
    quantize_held_row<V>(v, m, n4, ldq, q + row * ldq, sx + row);
}

// An expert group's routing for the combine, [start: n_tokens + 1][rows: total][weights: total]:
// token tok's rows are rows[start[tok] .. start[tok + 1]) in increasing row order (the call
// order), weights[r] is row r's weight (float bits). A decode step's table (a few dozen words)
// travels in the launch's parameters; a larger one is copied to the device first.
constexpr int kInlineRoutingWords = 512;
constexpr int kCombineThreads = 256;

struct RoutingTable {
    const int *table; // the device copy, or nullptr: the table is `words`
    int n_tokens, total;
    int words[kInlineRoutingWords];
};

__device__ inline int routing_word(const RoutingTable &r, int k) { return r.table ? r.table[k] : r.words[k]; }

// V consecutive floats of a row (V = 4: one 16-byte load; the caller guarantees the alignment).
template <int V> struct Columns {
    float v[V];
};
template <int V> __device__ inline Columns<V> load_columns(const float *p) {
    Columns<V> c;
    for (int k = 0; k < V; ++k) c.v[k] = p[k];
    return c;
}
template <> __device__ inline Columns<4> load_columns<4>(const float *p) {
    const float4 f = *(const float4 *)p;
    return Columns<4>{{f.x, f.y, f.z, f.w}};
}
template <int V> __device__ inline void store_columns(float *p, const float (&t)[V]) {
    for (int k = 0; k < V; ++k) p[k] = t[k];
}
template <> __device__ inline void store_columns<4>(float *p, const float (&t)[4]) { *(float4 *)p = make_float4(t[0], t[1], t[2], t[3]); }

// y[tok][d] from the expert outputs out [rows][D]: +0, then for each row routed to tok in call
// order y = y + weight[r] * out[r][d], the product rounded, then added: the reference's order
// exactly. Block (tok, c) covers columns of one token, so the routing words it reads are the
// same for every thread; a thread sums V consecutive columns (V = 4 where D % 4 == 0) and issues
// up to 8 rows' loads before their sums (the sums stay in order).
template <int V> __global__ void __launch_bounds__(kCombineThreads) combine_kernel(const float *out, RoutingTable rt, float *y, int D) {
    coli_release_dependents();
    coli_wait_prior_grid(); // launched overlapped (coli_compat.h)
    const int tok = blockIdx.x, d = ((int)blockIdx.y * kCombineThreads + (int)threadIdx.x) * V;
    if (d >= D) return;
    const int j_end = routing_word(rt, tok + 1);
    float t[V];
    for (int k = 0; k < V; ++k) t[k] = 0.0f;
    for (int j = routing_word(rt, tok); j < j_end; j += 8) {
        Columns<V> v[8];
        float w[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            if (j + u < j_end) {
                const int r = routing_word(rt, rt.n_tokens + 1 + j + u);
                v[u] = load_columns<V>(out + (size_t)r * D + d);
                w[u] = coli_float_from_bits((unsigned)routing_word(rt, rt.n_tokens + 1 + rt.total + r));
            }
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            if (j + u < j_end) {
                for (int k = 0; k < V; ++k) t[k] = coli_fadd_rn(t[k], coli_fmul_rn(w[u], v[u].v[k]));
            }
        }
    }
    store_columns<V>(y + (size_t)tok * D + d, t);
}

__global__ void invalid_launch_probe_kernel(int *p) {
    if (p) *p = 1;
}

} // namespace coli::gpu
