// CPU backend matmul: what coli_matmul runs on COLI_DEVICE_CPU. Bit-identical to ref::matmul in
// BOTH modes (tested): blocks of 8 output rows are decoded once into a transposed buffer, and
// each lane keeps the reference's sequential order over i, so the compiler can vectorise across
// lanes (AVX2 clone where the CPU has it, SSE2 otherwise) without reassociating any sum.
#pragma once

#include "ref/weights_view.h"

namespace coli::cpu {

// Worker threads for large calls (1 = single-threaded). Results never depend on it.
void set_threads(int n);
int threads();

void matmul(const WeightsView &W, const float *x, float *y, int64_t S, int numerics);

} // namespace coli::cpu
