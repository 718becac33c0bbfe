// CPU reference matmul: the oracle of every other backend (docs/numerics.md). Plain loops in
// the order the contract states; no SIMD, no threads, no tricks. Never optimise this file: the
// CPU backend (src/cpu/) is where speed goes, and it is checked against this.
#pragma once

#include "ref/weights_view.h"

namespace coli::ref {

// float: acc starts at +0; acc = acc + x[i] * (code * scale) for i = 0..I-1, each op rounded.
void matmul_float(const WeightsView &W, const float *x, float *y, int64_t S);

// exact: one activation quantization per row, int32 dot products, the float epilogue of
// coli_exact_row_output / coli_exact_group_step. Not defined for F32.
void matmul_exact(const WeightsView &W, const float *x, float *y, int64_t S);

void matmul(const WeightsView &W, const float *x, float *y, int64_t S, int numerics);

} // namespace coli::ref
