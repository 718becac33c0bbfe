// Which input rows of an expert group cross to the device. Top-k routing hands the backend a
// token's row once per expert it visits; an expert whose rows repeat, bit for bit, those of the
// first expert or of the previous expert with rows reads that copy instead, so a decode step's
// activations are copied and quantized once instead of top-k times. Same input bits, same
// results: equality is bitwise (memcmp), so -0 against +0 or two NaN payloads count as different.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace coli::gpu {

struct GroupInputs {
    std::vector<int64_t> staged_row; // per expert: where its rows start in the staged activations
    std::vector<int64_t> caller_row; // per expert: where its rows start in the caller's x
    std::vector<char> staged;        // per expert: its rows are staged (1) or repeat staged ones (0)
    int64_t staged_rows = 0;
};

// x holds sum(rows) rows of D floats, expert after expert.
GroupInputs plan_group_inputs(const int64_t *rows, size_t n_experts, const float *x, int64_t D);

// The plan plan_group_inputs makes where every candidate comparison finds equal bytes (one token's
// row handed to each of its top-k experts: the first expert's rows alone are staged). A caller may
// act on it before the comparisons and check it against plan_group_inputs' afterwards.
GroupInputs assume_repeated_inputs(const int64_t *rows, size_t n_experts);

bool same_plan(const GroupInputs &a, const GroupInputs &b);

// Writes the staged rows of x, in order, to dst (staged_rows × D floats).
void gather_group_inputs(const GroupInputs &in, const int64_t *rows, const float *x, int64_t D, float *dst);

} // namespace coli::gpu
