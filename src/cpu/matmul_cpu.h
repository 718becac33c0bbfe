// CPU backend matmul: what coli_matmul runs on COLI_DEVICE_CPU. Bit-identical to ref::matmul in
// BOTH modes (tested), vectorised by the compiler (an AVX2 clone where the CPU has it, the
// baseline otherwise) and split across threads by blocks of 32 output rows:
//  - exact: integer dot products straight over the packed bytes (any order is exact);
//  - float: the block's rows decoded chunk by chunk into a transposed buffer w[i][row]; each
//    row's sum runs over i in the reference's order, the vectors across the 32 rows, so
//    vectorising reassociates no sum.
#pragma once

#include "ref/weights_view.h"

namespace coli::cpu {

// Worker threads for large calls (1 = single-threaded). Results never depend on it.
void set_threads(int n);
int threads();

void matmul(const WeightsView &W, const float *x, float *y, int64_t S, int numerics);

} // namespace coli::cpu
