#include "ref/expert_ref.h"

#include <vector>

#include "numerics/exact_math.h"

namespace coli::ref {

void combine_rows(const float *out, int64_t n, int64_t D, const int64_t *token, const float *weight, float *y) {
    for (int64_t r = 0; r < n; ++r) {
        float *yt = y + (token ? token[r] : r) * D;
        const float w = weight ? weight[r] : 1.0f;
        for (int64_t d = 0; d < D; ++d) yt[d] = coli_fadd_rn(yt[d], coli_fmul_rn(w, out[r * D + d]));
    }
}

void expert_mlp(MatmulFn mm, const ExpertView &E, const float *x, float *y, int64_t S, int numerics) {
    const int64_t F = E.gate.L.O;
    std::vector<float> g(static_cast<size_t>(S * F)), u(static_cast<size_t>(S * F));
    mm(E.gate, x, g.data(), S, numerics);
    mm(E.up, x, u.data(), S, numerics);
    for (size_t k = 0; k < g.size(); ++k) g[k] = coli_swiglu(g[k], u[k]);
    mm(E.down, g.data(), y, S, numerics);
}

void expert_group(MatmulFn mm, const ExpertView *experts, int n_experts, const int64_t *rows,
                  const float *x, const int64_t *row_token, const float *row_weight, float *y,
                  int64_t n_tokens, int numerics) {
    const int64_t D = experts[0].gate.L.I;
    for (int64_t k = 0; k < n_tokens * D; ++k) y[k] = 0.0f;
    std::vector<float> out;
    int64_t row0 = 0;
    for (int e = 0; e < n_experts; ++e) {
        const int64_t n = rows[e];
        if (n == 0) continue;
        out.resize(static_cast<size_t>(n * D));
        expert_mlp(mm, experts[e], x + row0 * D, out.data(), n, numerics);
        // Without row_token, row r goes to token r: offset y so that this expert's rows land there.
        combine_rows(out.data(), n, D, row_token ? row_token + row0 : nullptr, row_weight ? row_weight + row0 : nullptr,
                     row_token ? y : y + row0 * D);
        row0 += n;
    }
}

} // namespace coli::ref
