#include "gpu/group_inputs.h"

#include <cstring>

namespace coli::gpu {

namespace {

// x == nullptr: every candidate's bytes are taken to be equal (assume_repeated_inputs).
GroupInputs plan(const int64_t *rows, size_t n_experts, const float *x, int64_t D) {
    GroupInputs in;
    in.staged_row.resize(n_experts);
    in.caller_row.resize(n_experts);
    in.staged.resize(n_experts);
    int64_t caller = 0;
    size_t previous = 0; // the last expert with rows
    for (size_t e = 0; e < n_experts; ++e) {
        in.caller_row[e] = caller;
        const size_t bytes = (size_t)(rows[e] * D) * sizeof(float);
        // Only the first and the previous expert with rows are candidates: the check stays linear in the
        // number of experts, and top-k decode (every expert on one token) repeats the first.
        const auto repeats = [&](size_t f) {
            return rows[f] == rows[e] && (!x || std::memcmp(x + in.caller_row[f] * D, x + caller * D, bytes) == 0);
        };
        size_t from = e;
        if (e > 0 && rows[e] > 0) {
            if (repeats(0)) from = 0;
            else if (repeats(previous)) from = previous;
        }
        if (rows[e] > 0) previous = e;
        if (from != e) {
            in.staged_row[e] = in.staged_row[from];
        } else {
            in.staged_row[e] = in.staged_rows;
            in.staged[e] = 1;
            in.staged_rows += rows[e];
        }
        caller += rows[e];
    }
    return in;
}

} // namespace

GroupInputs plan_group_inputs(const int64_t *rows, size_t n_experts, const float *x, int64_t D) {
    return plan(rows, n_experts, x, D);
}

GroupInputs assume_repeated_inputs(const int64_t *rows, size_t n_experts) { return plan(rows, n_experts, nullptr, 0); }

bool same_plan(const GroupInputs &a, const GroupInputs &b) {
    return a.staged_rows == b.staged_rows && a.staged_row == b.staged_row && a.staged == b.staged;
}

void gather_group_inputs(const GroupInputs &in, const int64_t *rows, const float *x, int64_t D, float *dst) {
    for (size_t e = 0; e < in.staged.size(); ++e) {
        if (in.staged[e] && rows[e] > 0)
            std::memcpy(dst + in.staged_row[e] * D, x + in.caller_row[e] * D, (size_t)(rows[e] * D) * sizeof(float));
    }
}

} // namespace coli::gpu
