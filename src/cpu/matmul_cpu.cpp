#include "cpu/matmul_cpu.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "formats/codes.h"
#include "formats/quantize.h"
#include "numerics/exact_math.h"

// GCC/Clang function multi-versioning: an AVX2 clone chosen at load time, plus the baseline.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define COLI_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define COLI_CPU_CLONES
#endif // x86-64 Linux

namespace coli::cpu {

namespace {

constexpr int kLanes = 8; // output rows decoded and computed together
std::atomic<int> g_threads{1};

// Float mode decodes a block of output rows once into w[i][kLanes] = code * scale (transposed,
// so the lanes of one i are adjacent) and reuses it for every activation row.
struct Block {
    int64_t o0 = 0;
    int n = 0; // live lanes (< kLanes only in the last block)
    std::vector<float> weights;
};

// One row of dequantized weights, w[i] = code * scale, into out[0, I).
COLI_CPU_CLONES
void decode_row(const Layout &L, const uint8_t *row, const float *scales, float *out) {
    const int64_t gsize = L.group_size();
    for (int64_t g = 0; g < L.groups; ++g) {
        const float scale = scales[g];
        const int64_t i0 = g * gsize, i1 = std::min(i0 + gsize, L.I);
        switch (L.fmt) {
        case COLI_FORMAT_Q8:
            for (int64_t i = i0; i < i1; ++i) out[i] = coli_fmul_rn(static_cast<float>(static_cast<int8_t>(row[i])), scale);
            break;
        case COLI_FORMAT_Q2:
            for (int64_t i = i0; i < i1; ++i) out[i] = coli_fmul_rn(static_cast<float>(coli_q2_code(row, i)), scale);
            break;
        default: // Q4, G4: i0 is even
            for (int64_t j = i0 / 2; j < i1 / 2; ++j) {
                out[2 * j] = coli_fmul_rn(static_cast<float>((row[j] & 15) - 8), scale);
                out[2 * j + 1] = coli_fmul_rn(static_cast<float>((row[j] >> 4) - 8), scale);
            }
            if (i1 & 1) out[i1 - 1] = coli_fmul_rn(static_cast<float>(coli_q4_code(row, i1 - 1)), scale);
            break;
        }
    }
}

void decode_block(const WeightsView &W, Block &b, std::vector<float> &tmp) {
    const Layout &L = W.L;
    b.weights.assign(static_cast<size_t>(L.I) * kLanes, 0.0f);
    tmp.resize(static_cast<size_t>(L.I));
    float *w = b.weights.data();
    for (int l = 0; l < b.n; ++l) {
        const int64_t o = b.o0 + l;
        const uint8_t *row = W.weights + static_cast<size_t>(o) * L.row_bytes;
        if (L.fmt == COLI_FORMAT_F32) {
            std::memcpy(tmp.data(), row, L.row_bytes);
        } else {
            decode_row(L, row, W.scales + o * L.groups, tmp.data());
        }
        for (int64_t i = 0; i < L.I; ++i) w[i * kLanes + l] = tmp[i];
    }
}

// Float lanes: each lane a sequential sum over i, exactly the reference's order.
COLI_CPU_CLONES
void float_lanes(const float *x, const float *w, int64_t I, float *acc) {
    float a[kLanes] = {};
    for (int64_t i = 0; i < I; ++i) {
        for (int l = 0; l < kLanes; ++l) a[l] = coli_fadd_rn(a[l], coli_fmul_rn(x[i], w[i * kLanes + l]));
    }
    for (int l = 0; l < kLanes; ++l) acc[l] = a[l];
}

void run_block_float(const WeightsView &W, Block &b, std::vector<float> &tmp, const float *x, float *y, int64_t S) {
    const Layout &L = W.L;
    decode_block(W, b, tmp);
    float acc[kLanes];
    for (int64_t s = 0; s < S; ++s) {
        float_lanes(x + s * L.I, b.weights.data(), L.I, acc);
        for (int l = 0; l < b.n; ++l) y[s * L.O + b.o0 + l] = acc[l];
    }
}

// Exact mode: integer sums are exact in any order, so each dot product runs straight over the
// packed bytes of a row and the compiler may vectorise and reassociate freely. To keep the loops
// contiguous, the activation codes of Q4/G4 (Q2) rows are split into 2 (4) streams by position
// within a byte: stream k holds q[P*j + k] (P codes per byte), zero-padded to whole bytes, so a
// padded position contributes 0 whatever its code.
struct ActivationCodes {
    int per_byte = 1;    // P: 1 (Q8), 2 (Q4, G4), 4 (Q2)
    int64_t stream = 0;  // length of one stream: ceil(I / P)
    std::vector<int8_t> q; // [S][P][stream]
    std::vector<float> sx; // [S]

    const int8_t *row(int64_t s) const { return q.data() + s * per_byte * stream; }
};

ActivationCodes quantize_activations(const Layout &L, const float *x, int64_t S) {
    ActivationCodes a;
    a.per_byte = L.fmt == COLI_FORMAT_Q8 ? 1 : L.fmt == COLI_FORMAT_Q2 ? 4 : 2;
    a.stream = (L.I + a.per_byte - 1) / a.per_byte;
    a.q.assign(static_cast<size_t>(S * a.per_byte * a.stream), 0);
    a.sx.resize(static_cast<size_t>(S));
    std::vector<int8_t> codes(static_cast<size_t>(L.I));
    for (int64_t s = 0; s < S; ++s) {
        a.sx[s] = coli_quantize_row(x + s * L.I, L.I, codes.data());
        int8_t *dst = a.q.data() + s * a.per_byte * a.stream;
        for (int64_t i = 0; i < L.I; ++i) dst[(i % a.per_byte) * a.stream + i / a.per_byte] = codes[i];
    }
    return a;
}

// Dot products over bytes [b0, b1) of a row.
COLI_CPU_CLONES
int32_t dot_q8(const int8_t *q, const uint8_t *row, int64_t b0, int64_t b1) {
    int32_t acc = 0;
    for (int64_t j = b0; j < b1; ++j) acc += q[j] * static_cast<int8_t>(row[j]);
    return acc;
}

COLI_CPU_CLONES
int32_t dot_q4(const int8_t *q, int64_t stream, const uint8_t *row, int64_t b0, int64_t b1) {
    const int8_t *lo = q, *hi = q + stream;
    int32_t acc = 0;
    for (int64_t j = b0; j < b1; ++j) acc += lo[j] * ((row[j] & 15) - 8) + hi[j] * ((row[j] >> 4) - 8);
    return acc;
}

COLI_CPU_CLONES
int32_t dot_q2(const int8_t *q, int64_t stream, const uint8_t *row, int64_t b0, int64_t b1) {
    const int8_t *q0 = q, *q1 = q + stream, *q2 = q + 2 * stream, *q3 = q + 3 * stream;
    int32_t acc = 0;
    for (int64_t j = b0; j < b1; ++j) {
        const int b = row[j];
        acc += q0[j] * ((b & 3) - 2) + q1[j] * (((b >> 2) & 3) - 2) + q2[j] * (((b >> 4) & 3) - 2) +
               q3[j] * ((b >> 6) - 2);
    }
    return acc;
}

// Dot product of activation row s with elements [i0, i1) of a row; i0 is 0 or a G4 group start
// (a multiple of 8), so both ends fall on whole bytes once padded.
int32_t dot_codes(const Layout &L, const ActivationCodes &a, int64_t s, const uint8_t *row, int64_t i0, int64_t i1) {
    const int64_t b0 = i0 / a.per_byte, b1 = (i1 + a.per_byte - 1) / a.per_byte;
    switch (L.fmt) {
    case COLI_FORMAT_Q8: return dot_q8(a.row(s), row, b0, b1);
    case COLI_FORMAT_Q2: return dot_q2(a.row(s), a.stream, row, b0, b1);
    default: return dot_q4(a.row(s), a.stream, row, b0, b1);
    }
}

void run_rows_exact(const WeightsView &W, int64_t o0, int64_t o1, const ActivationCodes &a, float *y, int64_t S) {
    const Layout &L = W.L;
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t *row = W.weights + static_cast<size_t>(o) * L.row_bytes;
        for (int64_t s = 0; s < S; ++s) {
            if (L.fmt == COLI_FORMAT_G4) {
                float t = 0.0f;
                for (int64_t g = 0; g < L.groups; ++g) {
                    const int64_t end = std::min((g + 1) * L.gs, L.I);
                    t = coli_exact_group_step(t, dot_codes(L, a, s, row, g * L.gs, end), W.scales[o * L.groups + g]);
                }
                y[s * L.O + o] = coli_fmul_rn(t, a.sx[s]);
            } else {
                y[s * L.O + o] = coli_exact_row_output(dot_codes(L, a, s, row, 0, L.I), W.scales[o], a.sx[s]);
            }
        }
    }
}

// Below this many multiply-adds a call stays on the calling thread.
constexpr double kParallelWork = 1 << 22;

} // namespace

void set_threads(int n) { g_threads.store(std::max(1, n)); }
int threads() { return g_threads.load(); }

void matmul(const WeightsView &W, const float *x, float *y, int64_t S, int numerics) {
    const Layout &L = W.L;
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    const ActivationCodes codes = exact ? quantize_activations(L, x, S) : ActivationCodes{};
    const int64_t n_blocks = (L.O + kLanes - 1) / kLanes;
    const double macs = static_cast<double>(L.O) * static_cast<double>(L.I) * static_cast<double>(S);
    const int n_threads = macs < kParallelWork ? 1 : static_cast<int>(std::min<int64_t>(threads(), n_blocks));
    std::atomic<int64_t> next{0};
    // An exception must not escape a worker thread (std::terminate): the first one is kept, the
    // other workers stop taking blocks, and it is rethrown on the calling thread.
    std::exception_ptr error;
    std::mutex error_mutex;
    auto run_blocks = [&]() {
        Block b;
        std::vector<float> tmp;
        for (int64_t k = next++; k < n_blocks; k = next++) {
            b.o0 = k * kLanes;
            b.n = static_cast<int>(std::min<int64_t>(kLanes, L.O - b.o0));
            if (exact) {
                run_rows_exact(W, b.o0, b.o0 + b.n, codes, y, S);
            } else {
                run_block_float(W, b, tmp, x, y, S);
            }
        }
    };
    auto worker = [&]() {
        try {
            run_blocks();
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!error) error = std::current_exception();
            next = n_blocks;
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < n_threads; ++t) {
        try {
            pool.emplace_back(worker);
        } catch (...) { // no thread to be had: the remaining workers take its share
            break;
        }
    }
    worker();
    for (auto &t : pool) t.join();
    if (error) std::rethrow_exception(error);
}

} // namespace coli::cpu
