// Expert composition as the contract states it (docs/numerics.md): the fused expert MLP and the
// expert group, written once over any matmul. With ref::matmul it is the reference; the CPU
// backend passes its own matmul, whose results are bit-identical.
#pragma once

#include "ref/weights_view.h"

namespace coli::ref {

// Adds weight * out[r] of n rows to y[token[r]] in row order, each product rounded and then added
// (the expert group's combination; token or weight may be nullptr: row r -> token r, weight 1).
void combine_rows(const float *out, int64_t n, int64_t D, const int64_t *token, const float *weight, float *y);

// y[S][D] = down(silu(gate(x)) * up(x)); in exact mode down() re-quantizes h per row.
void expert_mlp(MatmulFn mm, const ExpertView &E, const float *x, float *y, int64_t S, int numerics);

// Expert e takes the next rows[e] rows of x. y [n_tokens][D] starts at +0; then, in call order,
// y[tok][d] = y[tok][d] + weight * out[r][d] (the product rounded, then added).
void expert_group(MatmulFn mm, const ExpertView *experts, int n_experts, const int64_t *rows,
                  const float *x, const int64_t *row_token, const float *row_weight, float *y,
                  int64_t n_tokens, int numerics);

} // namespace coli::ref
