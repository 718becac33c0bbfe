// Portable GPU kernels: activation quantization and matmul in both numerics modes, every format.
// CPU reference: src/ref/matmul_ref.cpp. Checked by src/tests/test_gpu_kernels.cpp and
// coli-selfcheck --device N.
//
// Layout: a block of 256 threads computes 8 output rows; each row belongs to a group of 32 lanes
// (kRowLanes) that strides over 4-element chunks of the row. 32-lane groups, reduced with
// width-32 shuffles, make the kernels independent of the warp/wavefront size (32 or 64).
// grid = (ceil(O / 8), ceil(S / ST)): each group handles ST activation rows, so a weight chunk is
// loaded once for ST rows.
//
// Exact mode sums int32 partial products in any order (exact), then applies the contract's float
// epilogue in the contract's order: per row, or per group left to right for G4 (all lanes hold
// the same group sums after the butterfly, and compute the same epilogue).
#pragma once

#include "coli_compat.h"
#include "formats/codes.h"
#include "numerics/exact_math.h"

namespace coli::gpu {

constexpr int kRowLanes = 32;
constexpr int kBlockThreads = 256;
constexpr int kRowsPerBlock = kBlockThreads / kRowLanes;
// Checked per target in the device pass: a 32-lane row group never straddles two warps.
static_assert(COLI_WARP_SIZE % kRowLanes == 0, "row groups must tile the warp/wavefront");

enum : int { kF32 = COLI_FORMAT_F32, kQ8 = COLI_FORMAT_Q8, kQ4 = COLI_FORMAT_Q4, kQ2 = COLI_FORMAT_Q2, kG4 = COLI_FORMAT_G4 };

struct MatmulArgs {
    const uint8_t *w;     // [O][row_bytes]
    const float *scales;  // [O][ng]
    int O, I, row_bytes, gs, ng;
    const int8_t *q;      // exact: activation codes [S][ldq], zero-padded past I
    int ldq;
    const float *sx;      // exact: activation scales [S]
    const float *x;       // float: activations [S][I]
    float *y;             // [S][O]
    int S;
};

// A batch: up to kBatchProblems matrices of one layout, each applied to its own activation rows,
// in one launch (kernels_matvec.cuh, kernels_tensor_core.cuh). Problem i owns blockIdx.x from
// p[i].first_block on; blockIdx.y walks its rows.
constexpr int kBatchProblems = 16;

struct BatchProblem {
    const uint8_t *w;
    const float *scales;
    const int8_t *q; // exact: [S][ldq]
    const float *sx; // exact: [S]
    const float *x;  // float: [S][I]
    float *y;        // [S][O]
    int S;
    int first_block;
    // matvec_swiglu_kernel only (kernels_matvec_expert.cuh): the up projection beside w (the gate).
    const uint8_t *w2 = nullptr;
    const float *scales2 = nullptr;
};

struct BatchArgs {
    BatchProblem p[kBatchProblems];
    int n, O, I, row_bytes, gs, ng, ldq;
    unsigned gs_magic; // G4: ceil(2^32 / gs), scale_group's multiplier
};

// The G4 scale group of code index c, c / gs as a multiply-high: exact while c * gs < 2^32
// (vector_piece_fits checks I * gs), and no division (gs is a runtime value) in the kernels' loops.
__device__ inline int scale_group(const BatchArgs &a, int c) {
    return (int)(((unsigned long long)(unsigned)c * a.gs_magic) >> 32);
}

__device__ inline const BatchProblem &batch_problem(const BatchArgs &a) {
    int i = 0;
    while (i + 1 < a.n && (int)blockIdx.x >= a.p[i + 1].first_block) ++i;
    return a.p[i];
}

__device__ inline int pack4(int a, int b, int c, int d) {
    return (a & 0xff) | ((b & 0xff) << 8) | ((c & 0xff) << 16) | (d << 24);
}

// Four weight codes of chunk c (elements 4c..4c+3) packed as int8 lanes. Bytes past the row read
// as code 0; elements past I may decode to anything, their activation codes are 0.
template <int FMT> __device__ inline int load_codes4(const uint8_t *row, int c, int row_bytes) {
    if (FMT == kQ8) {
        const int b = 4 * c;
        const int c0 = b < row_bytes ? (int8_t)row[b] : 0, c1 = b + 1 < row_bytes ? (int8_t)row[b + 1] : 0;
        const int c2 = b + 2 < row_bytes ? (int8_t)row[b + 2] : 0, c3 = b + 3 < row_bytes ? (int8_t)row[b + 3] : 0;
        return pack4(c0, c1, c2, c3);
    } else if (FMT == kQ2) {
        const int v = c < row_bytes ? row[c] : 0xaa; // 0xaa: four fields of 2 = code 0
        return pack4((v & 3) - 2, ((v >> 2) & 3) - 2, ((v >> 4) & 3) - 2, (v >> 6) - 2);
    } else { // Q4, G4
        const int b0 = 2 * c < row_bytes ? row[2 * c] : 0x88, b1 = 2 * c + 1 < row_bytes ? row[2 * c + 1] : 0x88;
        return pack4((b0 & 15) - 8, (b0 >> 4) - 8, (b1 & 15) - 8, (b1 >> 4) - 8);
    }
}

__device__ inline int row_sum_i32(int v) {
    for (int m = kRowLanes / 2; m > 0; m >>= 1) v += coli_shfl_xor(v, m, kRowLanes);
    return v;
}

__device__ inline float row_sum_f32(float v) {
    for (int m = kRowLanes / 2; m > 0; m >>= 1) v += coli_shfl_xor(v, m, kRowLanes);
    return v;
}

template <int FMT, int ST> __global__ void __launch_bounds__(kBlockThreads) matmul_exact_kernel(MatmulArgs a) {
    const int lane = threadIdx.x % kRowLanes;
    const int o = blockIdx.x * kRowsPerBlock + threadIdx.x / kRowLanes;
    const int s0 = blockIdx.y * ST;
    if (o >= a.O) return; // the whole 32-lane group leaves together
    const uint8_t *row = a.w + (size_t)o * a.row_bytes;
    const int chunks = (a.I + 3) / 4;
    int n_s = a.S - s0;
    if (n_s > ST) n_s = ST;
    const int *q4[ST];
    for (int s = 0; s < ST; ++s) q4[s] = (const int *)(a.q + (size_t)(s0 + (s < n_s ? s : 0)) * a.ldq);

    if (FMT != kG4) {
        int acc[ST];
        for (int s = 0; s < ST; ++s) acc[s] = 0;
        for (int c = lane; c < chunks; c += kRowLanes) {
            const int w4 = load_codes4<FMT>(row, c, a.row_bytes);
            for (int s = 0; s < ST; ++s) acc[s] = coli_dot4_i8(w4, q4[s][c], acc[s]);
        }
        for (int s = 0; s < ST; ++s) acc[s] = row_sum_i32(acc[s]);
        if (lane == 0) {
            for (int s = 0; s < n_s; ++s) {
                a.y[(size_t)(s0 + s) * a.O + o] = coli_exact_row_output(acc[s], a.scales[o], a.sx[s0 + s]);
            }
        }
    } else {
        float t[ST];
        for (int s = 0; s < ST; ++s) t[s] = 0.0f;
        const int per_group = a.gs / 4; // gs is a multiple of 8: groups start on whole chunks
        for (int g = 0; g < a.ng; ++g) {
            int acc[ST];
            for (int s = 0; s < ST; ++s) acc[s] = 0;
            const int c_end = min((g + 1) * per_group, chunks);
            for (int c = g * per_group + lane; c < c_end; c += kRowLanes) {
                const int w4 = load_codes4<FMT>(row, c, a.row_bytes);
                for (int s = 0; s < ST; ++s) acc[s] = coli_dot4_i8(w4, q4[s][c], acc[s]);
            }
            const float scale = a.scales[(size_t)o * a.ng + g];
            for (int s = 0; s < ST; ++s) t[s] = coli_exact_group_step(t[s], row_sum_i32(acc[s]), scale);
        }
        if (lane == 0) {
            for (int s = 0; s < n_s; ++s) a.y[(size_t)(s0 + s) * a.O + o] = coli_fmul_rn(t[s], a.sx[s0 + s]);
        }
    }
}

// Float mode: float32 activations times dequantized weights, float32 sums (any order: the
// contract is an NMSE bound, so fused multiply-adds are welcome here).
template <int FMT> __device__ inline float weight_at(const uint8_t *row, const float *scales, int i, int gs) {
    if (FMT == kF32) return ((const float *)row)[i];
    if (FMT == kQ8) return (float)coli_q8_code(row, i) * scales[0];
    if (FMT == kQ2) return (float)coli_q2_code(row, i) * scales[0];
    if (FMT == kQ4) return (float)coli_q4_code(row, i) * scales[0];
    return (float)coli_q4_code(row, i) * scales[i / gs];
}

template <int FMT, int ST> __global__ void __launch_bounds__(kBlockThreads) matmul_float_kernel(MatmulArgs a) {
    const int lane = threadIdx.x % kRowLanes;
    const int o = blockIdx.x * kRowsPerBlock + threadIdx.x / kRowLanes;
    const int s0 = blockIdx.y * ST;
    if (o >= a.O) return;
    const uint8_t *row = a.w + (size_t)o * a.row_bytes;
    const float *scales = a.scales ? a.scales + (size_t)o * a.ng : nullptr;
    int n_s = a.S - s0;
    if (n_s > ST) n_s = ST;
    float acc[ST];
    for (int s = 0; s < ST; ++s) acc[s] = 0.0f;
    for (int i = lane; i < a.I; i += kRowLanes) {
        const float w = weight_at<FMT>(row, scales, i, a.gs);
        for (int s = 0; s < ST; ++s) {
            if (s < n_s) acc[s] += a.x[(size_t)(s0 + s) * a.I + i] * w;
        }
    }
    for (int s = 0; s < ST; ++s) acc[s] = row_sum_f32(acc[s]);
    if (lane == 0) {
        for (int s = 0; s < n_s; ++s) a.y[(size_t)(s0 + s) * a.O + o] = acc[s];
    }
}

// The row's 1 / sx for every thread of the block from each thread's partial max of |v| (max is
// exact in any order; NaN never wins a comparison, as on the host): the block's max (32-lane
// shuffles, then across groups), then the contract's scale; thread 0 stores sx.
__device__ inline float block_row_inverse_scale(float m, float *sx) {
    __shared__ float group_max[kBlockThreads / kRowLanes];
    __shared__ float row_inv;
    for (int k = kRowLanes / 2; k > 0; k >>= 1) {
        const float other = coli_shfl_xor(m, k, kRowLanes);
        m = other > m ? other : m;
    }
    if (threadIdx.x % kRowLanes == 0) group_max[threadIdx.x / kRowLanes] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float amax = 0.0f;
        for (int g = 0; g < kBlockThreads / kRowLanes; ++g) amax = group_max[g] > amax ? group_max[g] : amax;
        const float s = coli_act_scale(amax);
        *sx = s;
        row_inv = coli_fdiv_rn(1.0f, s);
    }
    __syncthreads();
    return row_inv;
}

// The contract's quantization of one activation row by one block: codes v(i) * (1 / sx) for
// i < I and 0 up to ldq. Shared by quantize_rows_kernel and the hidden step
// (swiglu_quantize_kernel, kernels_expert.cuh).
template <class Value>
__device__ inline void quantize_row_from_partial_max(float m, const Value &v, int I, int8_t *qr, int ldq, float *sx) {
    const float inv = block_row_inverse_scale(m, sx);
#pragma unroll 8
    for (int i = threadIdx.x; i < ldq; i += kBlockThreads) qr[i] = i < I ? (int8_t)coli_act_code(v(i), inv) : 0;
}

// One block per activation row of x [rows][I] -> codes q [rows][ldq], scales sx [rows]. The loads
// are unrolled so that a thread has several in flight (a row is one dependent chain otherwise).
__global__ void __launch_bounds__(kBlockThreads) quantize_rows_kernel(const float *x, int I, int8_t *q, int ldq,
                                                                      float *sx) {
    coli_release_dependents();
    coli_wait_prior_grid();
    const float *xr = x + (size_t)blockIdx.x * I;
    float m = 0.0f;
#pragma unroll 8
    for (int i = threadIdx.x; i < I; i += kBlockThreads) {
        const float v = fabsf(xr[i]);
        m = v > m ? v : m;
    }
    quantize_row_from_partial_max(m, [xr](int i) { return xr[i]; }, I, q + (size_t)blockIdx.x * ldq, ldq, sx + blockIdx.x);
}

// The larger of m and the magnitudes of v's four floats (a thread's partial max).
__device__ inline float max_abs4(float4 v, float m) {
    const float e[4] = {fabsf(v.x), fabsf(v.y), fabsf(v.z), fabsf(v.w)};
    for (int j = 0; j < 4; ++j) m = e[j] > m ? e[j] : m;
    return m;
}

// Loads a row of n4 float4s into registers, V per thread (elements 4i..4i+3 of i = threadIdx.x +
// k x kBlockThreads from load(i); past the row: zeros), all at once (one round trip instead of a
// chain), and returns the thread's partial max of their magnitudes.
template <int V, class Load> __device__ inline float hold_row(float4 (&v)[V], int n4, Load load) {
    float m = 0.0f;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int i = threadIdx.x + k * kBlockThreads;
        v[k] = i < n4 ? load(i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        m = max_abs4(v[k], m);
    }
    return m;
}

// A row held in registers, V float4s per thread (elements 4i..4i+3 of i = threadIdx.x + k x
// kBlockThreads; past the row: zeros), n4 = I / 4 of them in all: its codes from each thread's
// partial max m, stored four per word, and zeros up to ldq (a multiple of 32).
template <int V> __device__ inline void quantize_held_row(const float4 (&v)[V], float m, int n4, int ldq, int8_t *q, float *sx) {
    const float inv = block_row_inverse_scale(m, sx);
    int *qr = (int *)q;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int i = threadIdx.x + k * kBlockThreads;
        if (i < n4) {
            qr[i] = pack4(coli_act_code(v[k].x, inv), coli_act_code(v[k].y, inv), coli_act_code(v[k].z, inv),
                          coli_act_code(v[k].w, inv));
        }
    }
    for (int i = n4 + threadIdx.x; i < ldq / 4; i += kBlockThreads) qr[i] = 0;
}

// quantize_rows_kernel for rows of at most V * 1024 floats, I a multiple of 4: a thread holds its
// V float4s of the row in registers for the codes (hold_row).
template <int V>
__global__ void __launch_bounds__(kBlockThreads) quantize_short_rows_kernel(const float *x, int I, int8_t *q, int ldq,
                                                                            float *sx) {
    coli_release_dependents();
    coli_wait_prior_grid();
    const float4 *xr = (const float4 *)(x + (size_t)blockIdx.x * I);
    const int n4 = I / 4;
    float4 v[V];
    const float m = hold_row<V>(v, n4, [xr](int i) { return xr[i]; });
    quantize_held_row<V>(v, m, n4, ldq, q + (size_t)blockIdx.x * ldq, sx + blockIdx.x);
}

// V float4s per thread that hold a row of at most 8,192 floats; 0 where the row is longer.
inline int held_row_float4s(int64_t I) {
    const int64_t v = (I + 4 * kBlockThreads - 1) / (4 * kBlockThreads);
    return v <= 2 ? 2 : v <= 4 ? 4 : v <= 8 ? 8 : 0;
}

} // namespace coli::gpu
