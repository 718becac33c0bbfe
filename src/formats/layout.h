// Byte layout of the weight formats (docs/formats.md): sizes, strides, groups, validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "coli/coli.h"

namespace coli {

struct Layout {
    int fmt = COLI_FORMAT_F32;
    int64_t O = 0, I = 0, gs = 0;
    int64_t groups = 0;      // scales per row: G4 ceil(I/gs), Q8/Q4/Q2 1, F32 0
    size_t row_bytes = 0;    // stride between rows of the weight matrix
    size_t weight_bytes = 0; // row_bytes * O
    size_t scale_count = 0;  // groups * O

    size_t scale_bytes() const { return scale_count * sizeof(float); }
    size_t total_bytes() const { return weight_bytes + scale_bytes(); }
    bool has_scales() const { return fmt != COLI_FORMAT_F32; }
    // Elements per group: G4's gs, otherwise the whole row.
    int64_t group_size() const { return fmt == COLI_FORMAT_G4 ? gs : I; }
};

// Largest O or I accepted: kernels index rows and columns with 32-bit ints.
constexpr int64_t kMaxDim = INT32_MAX;

// Fills *out for a matrix [O][I]; false with the reason in *why for a bad format code, a
// non-positive or too large dimension, a bad group size, or sizes that overflow size_t.
bool make_layout(int fmt, int64_t O, int64_t I, int64_t gs, Layout *out, std::string *why);

// "F32", "Q8", "Q4", "Q2", "G4"; "?" for an unknown code.
const char *format_name(int fmt);

// Exact mode accumulates int8 activations times weight codes in int32. Largest I (per group for
// G4) for which no dot product can overflow: 127 * max|code| * I <= INT32_MAX.
int64_t exact_max_inputs(int fmt);

} // namespace coli
