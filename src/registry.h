// The registry of matmul implementations on the host: the reference first, then every optimised
// variant. Tests, the self-check (conformance/) and the benchmarks (bench/) all iterate this one
// table, so a new variant is checked and measured by adding one line (registry.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ref/weights_view.h"

namespace coli {

struct MatmulVariant {
    const char *name;        // stable identifier used in reports and benchmark names
    const char *description; // one line
    MatmulFn fn;
    bool is_reference;
};

// [0] is the reference (ref::matmul).
const std::vector<MatmulVariant> &matmul_variants();

// Expert shapes of the GLM-5 class models this backend serves (shared/README.md).
constexpr int64_t kGlm5Hidden = 6144;             // D
constexpr int64_t kGlm5ExpertIntermediate = 2048; // F
constexpr int kGlm5TopK = 8;

} // namespace coli
