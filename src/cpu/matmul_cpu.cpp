#include "cpu/matmul_cpu.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/clones.h"
#include "cpu/exact_sums.h"
#include "formats/quantize.h"
#include "numerics/exact_math.h"


namespace coli::cpu {

namespace {

constexpr int kLanes = 32; // output rows per block: the unit of work a thread takes
std::atomic<int> g_threads{1};

// Float mode: every output is the reference's sequential sum over i, so the vectors run across
// outputs, never along a sum. A block's 32 rows walk the inputs in chunks of kChunkCodes codes:
// the chunk's packed 32-bit words of the 32 rows are transposed (words[j][lane]), decoded to
// w[i][lane] = code * scale with the lanes contiguous, and applied to every activation row, whose
// 32 running sums stay in acc from chunk to chunk: each output still adds its products in the
// reference's order. 32 lanes are four independent 8-float sums per step (one alone waits on the
// add's latency), and a chunk's decoded weights (32 KB) stay in L1/L2 for all S activation rows.
// 256 codes per chunk (Q4: 128 bytes of each row) measured faster than 128 or 512 on this
// project's CI machine (docs/performance.md): shorter pieces of 32 rows at once stream worse.
constexpr int64_t kChunkCodes = 256; // a multiple of every format's codes per word

// Codes per 32-bit word of a packed row: F32 1, Q8 4, Q4/G4 8, Q2 16.
int codes_per_word(int fmt) {
    switch (fmt) {
    case COLI_FORMAT_F32: return 1;
    case COLI_FORMAT_Q8: return 4;
    case COLI_FORMAT_Q2: return 16;
    default: return 8;
    }
}

struct FloatScratch {
    std::vector<uint32_t> words; // [words of the chunk][kLanes]
    std::vector<float> scales;   // [scale groups the chunk touches][kLanes]
    std::vector<float> w;        // [kChunkCodes][kLanes]
    std::vector<float> acc;      // [S][kLanes]
};

// Transposes words [k0, k0 + nw) of the block's rows into f.words, little-endian whatever the
// host; bytes past a row's end, and the rows of dead lanes, read as 0.
void transpose_words(const WeightsView &W, int64_t o0, int n, int64_t k0, int64_t nw, FloatScratch &f) {
    const size_t row_bytes = W.L.row_bytes;
    const size_t left = row_bytes - static_cast<size_t>(k0) * 4; // bytes from word k0 to the row's end (> 0)
    const int64_t whole = std::min<int64_t>(nw, static_cast<int64_t>(left / 4)); // words inside the row
    f.words.resize(static_cast<size_t>(nw * kLanes));
    uint32_t *words = f.words.data();
    for (int l = 0; l < kLanes; ++l) {
        if (l >= n) { // a dead lane
            for (int64_t j = 0; j < nw; ++j) words[j * kLanes + l] = 0;
            continue;
        }
        const uint8_t *row = W.weights + static_cast<size_t>(o0 + l) * row_bytes + static_cast<size_t>(k0) * 4;
        for (int64_t j = 0; j < whole; ++j) {
            const uint8_t *b = row + j * 4;
            words[j * kLanes + l] = b[0] | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16 |
                                    static_cast<uint32_t>(b[3]) << 24;
        }
        for (int64_t j = whole; j < nw; ++j) {
            uint32_t u = 0;
            for (size_t b = static_cast<size_t>(j) * 4, t = 0; b + t < left && t < 4; ++t)
                u |= static_cast<uint32_t>(row[b + t]) << (8 * t);
            words[j * kLanes + l] = u;
        }
    }
}

// w[i][lane] = code * scale for the chunk's nw words of P codes, each code a BITS-wide field
// minus OFFSET (Q8's 8-bit field is read as int8). scales[(code position / gs - g0)][lane].
template <int P, int BITS, int OFFSET>
COLI_CPU_CLONES void decode_words(const uint32_t *words, int64_t nw, const float *scales, int64_t c0, int64_t gs,
                                  int64_t g0, float *w) {
    constexpr uint32_t mask = (1u << BITS) - 1u;
    for (int64_t j = 0; j < nw; ++j) {
        const float *scale = scales + ((c0 + j * P) / gs - g0) * kLanes; // a word lies in one G4 group
        const uint32_t *u = words + j * kLanes;
        for (int k = 0; k < P; ++k) {
            float *wk = w + (j * P + k) * kLanes;
            for (int l = 0; l < kLanes; ++l) {
                const uint32_t field = (u[l] >> (BITS * k)) & mask;
                const int code = BITS == 8 ? static_cast<int>(static_cast<int8_t>(field)) : static_cast<int>(field) - OFFSET;
                wk[l] = coli_fmul_rn(static_cast<float>(code), scale[l]);
            }
        }
    }
}

// Decodes codes [c0, c1) of the block into f.w (positions past c1 hold junk the sums never read).
void decode_chunk(const WeightsView &W, int64_t o0, int n, int64_t c0, int64_t c1, FloatScratch &f) {
    const Layout &L = W.L;
    const int P = codes_per_word(L.fmt);
    const int64_t nw = (c1 - c0 + P - 1) / P;
    transpose_words(W, o0, n, c0 / P, nw, f);
    if (L.fmt == COLI_FORMAT_F32) { // the words are the weights
        std::memcpy(f.w.data(), f.words.data(), static_cast<size_t>(nw * kLanes) * sizeof(float));
        return;
    }
    const int64_t gs = L.group_size(), g0 = c0 / gs, g1 = (c1 - 1) / gs;
    f.scales.resize(static_cast<size_t>((g1 - g0 + 1) * kLanes));
    for (int64_t g = g0; g <= g1; ++g)
        for (int l = 0; l < kLanes; ++l)
            f.scales[static_cast<size_t>((g - g0) * kLanes + l)] = l < n ? W.scales[(o0 + l) * L.groups + g] : 0.0f;
    switch (L.fmt) {
    case COLI_FORMAT_Q8: decode_words<4, 8, 0>(f.words.data(), nw, f.scales.data(), c0, gs, g0, f.w.data()); break;
    case COLI_FORMAT_Q2: decode_words<16, 2, 2>(f.words.data(), nw, f.scales.data(), c0, gs, g0, f.w.data()); break;
    default: decode_words<8, 4, 8>(f.words.data(), nw, f.scales.data(), c0, gs, g0, f.w.data()); break;
    }
}

// acc[lane] = acc[lane] + x[i] * w[i][lane] for i in [0, n), in order: the reference's sum.
COLI_CPU_CLONES
void float_lanes(const float *x, const float *w, int64_t n, float *acc) {
    float a[kLanes];
    for (int l = 0; l < kLanes; ++l) a[l] = acc[l];
    for (int64_t i = 0; i < n; ++i) {
        const float xi = x[i];
        for (int l = 0; l < kLanes; ++l) a[l] = coli_fadd_rn(a[l], coli_fmul_rn(xi, w[i * kLanes + l]));
    }
    for (int l = 0; l < kLanes; ++l) acc[l] = a[l];
}

void run_block_float(const WeightsView &W, int64_t o0, int n, FloatScratch &f, const float *x, float *y, int64_t S) {
    const Layout &L = W.L;
    f.w.resize(static_cast<size_t>(kChunkCodes * kLanes));
    f.acc.assign(static_cast<size_t>(S * kLanes), 0.0f);
    for (int64_t c0 = 0; c0 < L.I; c0 += kChunkCodes) {
        const int64_t c1 = std::min(c0 + kChunkCodes, L.I);
        decode_chunk(W, o0, n, c0, c1, f);
        for (int64_t s = 0; s < S; ++s) float_lanes(x + s * L.I + c0, f.w.data(), c1 - c0, f.acc.data() + s * kLanes);
    }
    for (int64_t s = 0; s < S; ++s)
        for (int l = 0; l < n; ++l) y[s * L.O + o0 + l] = f.acc[static_cast<size_t>(s * kLanes + l)];
}

// Exact mode: integer sums are exact in any order, so each dot product runs straight over the
// packed bytes of a row (exact_sums.h). To keep the loops contiguous, the activation codes of
// Q4/G4 (Q2) rows are split into 2 (4) streams by position within a byte: stream k holds
// q[P*j + k] (P codes per byte), zero-padded to whole bytes, so a padded position contributes 0
// whatever its code. code_sums[s][g] = sum of row s's codes over group g turns the kernels' raw
// sums of unsigned fields into the sums of codes.
struct ActivationCodes {
    int per_byte = 1;    // P: 1 (Q8), 2 (Q4, G4), 4 (Q2)
    int64_t stream = 0;  // length of one stream: ceil(I / P)
    int64_t groups = 1;  // G4's groups per row, 1 otherwise
    std::vector<int8_t> q; // [S][P][stream]
    std::vector<float> sx; // [S]
    std::vector<int32_t> code_sums; // [S][groups]

    int64_t stride() const { return per_byte * stream; }
    const int8_t *row(int64_t s) const { return q.data() + s * stride(); }
};

ActivationCodes quantize_activations(const Layout &L, const float *x, int64_t S) {
    ActivationCodes a;
    a.per_byte = L.fmt == COLI_FORMAT_Q8 ? 1 : L.fmt == COLI_FORMAT_Q2 ? 4 : 2;
    a.stream = (L.I + a.per_byte - 1) / a.per_byte;
    a.groups = L.fmt == COLI_FORMAT_G4 ? L.groups : 1;
    a.q.assign(static_cast<size_t>(S * a.stride()), 0);
    a.sx.resize(static_cast<size_t>(S));
    a.code_sums.assign(static_cast<size_t>(S * a.groups), 0);
    const int64_t gs = L.group_size();
    std::vector<int8_t> codes(static_cast<size_t>(L.I));
    for (int64_t s = 0; s < S; ++s) {
        a.sx[s] = coli_quantize_row(x + s * L.I, L.I, codes.data());
        int8_t *dst = a.q.data() + s * a.stride();
        int32_t *sums = a.code_sums.data() + s * a.groups;
        // Loops free of divisions: at S = 8 a division per code cost 12% of a Q4 2048x6144 call.
        for (int k = 0; k < a.per_byte; ++k)
            for (int64_t j = 0, i = k; i < L.I; ++j, i += a.per_byte) dst[k * a.stream + j] = codes[i];
        for (int64_t g = 0; g < a.groups; ++g)
            for (int64_t i = g * gs; i < std::min(L.I, (g + 1) * gs); ++i) sums[g] += codes[i];
    }
    return a;
}

// Rows [o0, o1) against every activation row, kMaxRows activation rows per kernel call.
void run_rows_exact(const ExactSums &kernels, const WeightsView &W, int64_t o0, int64_t o1, const ActivationCodes &a,
                    float *y, int64_t S) {
    const Layout &L = W.L;
    const bool g4 = L.fmt == COLI_FORMAT_G4;
    const RawSumFn fn = L.fmt == COLI_FORMAT_Q8 ? kernels.q8 : L.fmt == COLI_FORMAT_Q2 ? kernels.q2 : kernels.q4;
    const int32_t offset = raw_offset(L.fmt);
    std::vector<int32_t> raw(static_cast<size_t>(kMaxRows * a.groups));
    RawSumArgs args;
    args.q_stride = a.stride();
    args.stream = a.stream;
    args.group_bytes = g4 ? L.gs / 2 : a.stream; // gs is even: a group is whole bytes of each stream
    args.groups = a.groups;
    args.out = raw.data();
    for (int64_t o = o0; o < o1; ++o) {
        args.row = W.weights + static_cast<size_t>(o) * L.row_bytes;
        for (int64_t s0 = 0; s0 < S; s0 += kMaxRows) {
            args.ns = static_cast<int>(std::min<int64_t>(kMaxRows, S - s0));
            args.q = a.row(s0);
            fn(args);
            for (int k = 0; k < args.ns; ++k) {
                const int64_t s = s0 + k;
                const int32_t *r = raw.data() + k * a.groups, *code_sums = a.code_sums.data() + s * a.groups;
                if (g4) {
                    const float *scales = W.scales + o * L.groups;
                    float t = 0.0f;
                    for (int64_t g = 0; g < L.groups; ++g)
                        t = coli_exact_group_step(t, exact_sum(r[g], offset, code_sums[g]), scales[g]);
                    y[s * L.O + o] = coli_fmul_rn(t, a.sx[s]);
                } else {
                    y[s * L.O + o] = coli_exact_row_output(exact_sum(r[0], offset, code_sums[0]), W.scales[o], a.sx[s]);
                }
            }
        }
    }
}

const ExactSums &best_exact_sums() {
    static const ExactSums &best = exact_sums_avx2() ? *exact_sums_avx2() : exact_sums_generic();
    return best;
}

// Below this many multiply-adds a call stays on the calling thread.
constexpr double kParallelWork = 1 << 22;

} // namespace

void set_threads(int n) { g_threads.store(std::max(1, n)); }
int threads() { return g_threads.load(); }

namespace {

void matmul_with(const ExactSums &kernels, const WeightsView &W, const float *x, float *y, int64_t S, int numerics) {
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
        FloatScratch scratch;
        for (int64_t k = next++; k < n_blocks; k = next++) {
            const int64_t o0 = k * kLanes;
            const int n = static_cast<int>(std::min<int64_t>(kLanes, L.O - o0));
            if (exact) {
                run_rows_exact(kernels, W, o0, o0 + n, codes, y, S);
            } else {
                run_block_float(W, o0, n, scratch, x, y, S);
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

} // namespace

const char *exact_sums_name() { return best_exact_sums().name; }

void matmul(const WeightsView &W, const float *x, float *y, int64_t S, int numerics) {
    matmul_with(best_exact_sums(), W, x, y, S, numerics);
}

void matmul_generic(const WeightsView &W, const float *x, float *y, int64_t S, int numerics) {
    matmul_with(exact_sums_generic(), W, x, y, S, numerics);
}

} // namespace coli::cpu
