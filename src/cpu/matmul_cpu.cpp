#include "cpu/matmul_cpu.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

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

// Decoded block: codes (exact) or dequantized weights (float), transposed to [I][kLanes].
struct Block {
    int64_t o0 = 0;
    int n = 0; // live lanes (< kLanes only in the last block)
    std::vector<int8_t> codes;
    std::vector<float> weights;
};

void decode_codes(const WeightsView &W, Block &b) {
    const Layout &L = W.L;
    b.codes.assign(static_cast<size_t>(L.I) * kLanes, 0);
    for (int l = 0; l < b.n; ++l) {
        for (int64_t i = 0; i < L.I; ++i) {
            b.codes[i * kLanes + l] = static_cast<int8_t>(weight_code(L, W.weights, b.o0 + l, i));
        }
    }
}

void decode_weights(const WeightsView &W, Block &b) {
    const Layout &L = W.L;
    b.weights.assign(static_cast<size_t>(L.I) * kLanes, 0.0f);
    const float *f32 = reinterpret_cast<const float *>(W.weights);
    for (int l = 0; l < b.n; ++l) {
        const int64_t o = b.o0 + l;
        for (int64_t i = 0; i < L.I; ++i) {
            b.weights[i * kLanes + l] =
                L.fmt == COLI_FORMAT_F32
                    ? f32[o * L.I + i]
                    : coli_fmul_rn(static_cast<float>(weight_code(L, W.weights, o, i)),
                                   weight_scale(L, W.scales, o, i));
        }
    }
}

// Integer dot products of one activation row with kLanes rows over [begin, end).
COLI_CPU_CLONES
void dot_lanes(const int8_t *q, const int8_t *codes, int64_t begin, int64_t end, int32_t *acc) {
    int32_t a[kLanes] = {};
    for (int64_t i = begin; i < end; ++i) {
        const int32_t qi = q[i];
        for (int l = 0; l < kLanes; ++l) a[l] += qi * codes[i * kLanes + l];
    }
    for (int l = 0; l < kLanes; ++l) acc[l] = a[l];
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

void run_block_exact(const WeightsView &W, Block &b, const int8_t *q, const float *sx, float *y, int64_t S) {
    const Layout &L = W.L;
    decode_codes(W, b);
    int32_t acc[kLanes];
    for (int64_t s = 0; s < S; ++s) {
        const int8_t *qs = q + s * L.I;
        if (L.fmt == COLI_FORMAT_G4) {
            float t[kLanes] = {};
            for (int64_t g = 0; g < L.groups; ++g) {
                const int64_t end = std::min((g + 1) * L.gs, L.I);
                dot_lanes(qs, b.codes.data(), g * L.gs, end, acc);
                for (int l = 0; l < b.n; ++l) {
                    t[l] = coli_exact_group_step(t[l], acc[l], W.scales[(b.o0 + l) * L.groups + g]);
                }
            }
            for (int l = 0; l < b.n; ++l) y[s * L.O + b.o0 + l] = coli_fmul_rn(t[l], sx[s]);
        } else {
            dot_lanes(qs, b.codes.data(), 0, L.I, acc);
            for (int l = 0; l < b.n; ++l) {
                y[s * L.O + b.o0 + l] = coli_exact_row_output(acc[l], W.scales[b.o0 + l], sx[s]);
            }
        }
    }
}

void run_block_float(const WeightsView &W, Block &b, const float *x, float *y, int64_t S) {
    const Layout &L = W.L;
    decode_weights(W, b);
    float acc[kLanes];
    for (int64_t s = 0; s < S; ++s) {
        float_lanes(x + s * L.I, b.weights.data(), L.I, acc);
        for (int l = 0; l < b.n; ++l) y[s * L.O + b.o0 + l] = acc[l];
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
    std::vector<int8_t> q;
    std::vector<float> sx;
    if (exact) {
        q.resize(static_cast<size_t>(S * L.I));
        sx.resize(static_cast<size_t>(S));
        for (int64_t s = 0; s < S; ++s) sx[s] = coli_quantize_row(x + s * L.I, L.I, q.data() + s * L.I);
    }
    const int64_t n_blocks = (L.O + kLanes - 1) / kLanes;
    const double work = static_cast<double>(L.O) * static_cast<double>(L.I) * static_cast<double>(S);
    const int n_threads = work < kParallelWork ? 1 : static_cast<int>(std::min<int64_t>(threads(), n_blocks));
    std::atomic<int64_t> next{0};
    auto worker = [&]() {
        Block b;
        for (int64_t k = next++; k < n_blocks; k = next++) {
            b.o0 = k * kLanes;
            b.n = static_cast<int>(std::min<int64_t>(kLanes, L.O - b.o0));
            if (exact) {
                run_block_exact(W, b, q.data(), sx.data(), y, S);
            } else {
                run_block_float(W, b, x, y, S);
            }
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
}

} // namespace coli::cpu
