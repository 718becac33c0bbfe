// CPU backend matmul: what coli_matmul runs on COLI_DEVICE_CPU. Bit-identical to ref::matmul in
// BOTH modes (tested), vectorised (an AVX2 clone or AVX2 kernels where the CPU has AVX2, the
// baseline otherwise) and split across threads by blocks of 32 output rows:
//  - exact: integer dot products straight over the packed bytes (any order is exact), each
//    row's bytes unpacked once for up to 4 activation rows (exact_sums.h);
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
// The same with exact mode's generic sums, which matmul runs on CPUs without AVX2: registered
// beside matmul so that tests and benchmarks run both paths on every machine.
void matmul_generic(const WeightsView &W, const float *x, float *y, int64_t S, int numerics);
// The exact sums matmul runs on this CPU: "avx2" or "generic".
const char *exact_sums_name();

} // namespace coli::cpu
