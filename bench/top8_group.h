// The expert-group workload both group benchmarks run (coli-bench-gpu and coli-bench-expert):
// `rows` tokens, each routed to all kGlm5TopK experts with weight 1/8, so expert e's rows are
// tokens 0..rows-1 and the combine sums 8 rows per token (rows = 1: one decode step). A token's row
// of x is its hidden state, the same for each of its experts (as an engine passes it).
#pragma once

#include <cstdint>
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

} // namespace coli
