// The GPU backend as the host code sees it: plain C++ declarations, implemented by backend.cu
// (compiled by nvcc or hipcc) or by stubs/gpu_none.cpp in a CPU-only build.
#pragma once

#include <string>

#include "coli/coli.h"

namespace coli::gpu {

// "cuda", "hip" or "none".
const char *backend_name();

// Devices the runtime sees. A CPU-only build: 0 and COLI_OK. No driver or no device: 0 and
// COLI_ERR_NO_DEVICE with the runtime's reason in *why.
coli_status device_count(int *count, std::string *why);

coli_status device_info(int ordinal, coli_device_info *info, std::string *why);

// Evaluates the shared numerics header (src/numerics/exact_math.h) and the compat dot product on
// the device, for n inputs, so tests can compare the bits with the host:
//   exp_out[k] = coli_expf(x[k]), silu_out[k] = coli_silu(x[k]),
//   codes[k] = coli_quantize_row(x, n, ...)[k] with *sx its scale,
//   dot_out[k] = coli_dot4_i8(a[k], b[k], c[k]).
struct NumericsProbe {
    int n = 0;
    const float *x = nullptr;
    const int *a = nullptr, *b = nullptr, *c = nullptr;
    float *exp_out = nullptr, *silu_out = nullptr, *sx = nullptr;
    int8_t *codes = nullptr;
    int *dot_out = nullptr;
};
coli_status run_numerics_probe(int ordinal, const NumericsProbe &p, std::string *why);

} // namespace coli::gpu
