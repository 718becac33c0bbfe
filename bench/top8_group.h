// The expert-group workload both group benchmarks run (coli-bench-gpu and coli-bench-expert):
// `rows` tokens, each routed to all kGlm5TopK experts with weight 1/8, so expert e's rows are
// tokens 0..rows-1 and the combine sums 8 rows per token (rows = 1: one decode step). A token's row
// of x is its hidden state, the same for each of its experts (as an engine passes it).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "registry.h"
#include "testing/test_data.h"

namespace coli {

struct Top8Group {
    int64_t rows, total;
    std::vector<int64_t> row_counts, row_token;
    std::vector<float> row_weight, x, y;
};

inline Top8Group top8_group(int64_t rows) {
    Top8Group g;
    g.rows = rows;
    g.total = rows * kGlm5TopK;
    g.row_counts.assign(kGlm5TopK, rows);
    for (int64_t r = 0; r < g.total; ++r) g.row_token.push_back(r % rows);
    g.row_weight.assign(static_cast<size_t>(g.total), 1.0f / kGlm5TopK);
    const std::vector<float> tokens = testing::random_normal(static_cast<size_t>(rows * kGlm5Hidden), 9);
    for (int64_t r = 0; r < g.total; ++r) {
        const float *state = tokens.data() + g.row_token[static_cast<size_t>(r)] * kGlm5Hidden;
        g.x.insert(g.x.end(), state, state + kGlm5Hidden);
    }
    g.y.resize(static_cast<size_t>(rows * kGlm5Hidden));
    return g;
}

// The group's weights in format fmt: expert e's gate and up (kGlm5ExpertIntermediate x
// kGlm5Hidden) and down (kGlm5Hidden x kGlm5ExpertIntermediate), seeds 10e + 1, 2, 3, G4 groups of
// 128. The 24 matrices are made on parallel threads (each is independent, so the data are the
// same): one takes about half a second, and made in turn they were most of a benchmark binary's
// start-up.
inline std::vector<std::array<testing::Quantized, 3>> top8_weights(int fmt) {
    std::vector<std::array<testing::Quantized, 3>> w(kGlm5TopK);
    const int64_t gs = fmt == COLI_FORMAT_G4 ? 128 : 0, D = kGlm5Hidden, F = kGlm5ExpertIntermediate;
    std::atomic<int> next{0};
    const auto work = [&]() {
        for (int k; (k = next++) < 3 * kGlm5TopK;) {
            const int e = k / 3, m = k % 3;
            w[e][m] = m < 2 ? testing::random_quantized(fmt, F, D, gs, 10 * e + m + 1) : testing::random_quantized(fmt, D, F, gs, 10 * e + 3);
        }
    };
    std::vector<std::thread> threads(std::max(1u, std::min(std::thread::hardware_concurrency(), 3u * kGlm5TopK)));
    for (std::thread &t : threads) t = std::thread(work);
    for (std::thread &t : threads) t.join();
    return w;
}

} // namespace coli
