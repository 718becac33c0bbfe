// A weight matrix as the CPU code paths see it: layout plus host pointers (not owned).
#pragma once

#include <cstdint>

#include "formats/layout.h"

namespace coli {

struct WeightsView {
    Layout L;
    const uint8_t *weights = nullptr; // [O][row_bytes]
    const float *scales = nullptr;    // [O][groups], nullptr for F32
};

struct ExpertView {
    WeightsView gate; // [F][D]
    WeightsView up;   // [F][D]
    WeightsView down; // [D][F]
};

// y[S][O] = x[S][I] * W^T in a numerics mode; the caller has validated every argument.
using MatmulFn = void (*)(const WeightsView &W, const float *x, float *y, int64_t S, int numerics);

} // namespace coli
