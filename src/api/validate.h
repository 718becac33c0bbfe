// Argument checks shared by the C API entry points. Each returns COLI_OK or the failure status
// with coli_last_error() set ("<function>: <reason>").
#pragma once

#include <cstdint>

#include "api/runtime.h"
#include "formats/layout.h"

namespace coli {

// Format code, shape and group size of a matrix; fills *L.
coli_status check_layout(const char *fn, int fmt, int64_t O, int64_t I, int64_t gs, Layout *L);

// weights must be given; scales too unless the format is F32.
coli_status check_weight_buffers(const char *fn, const Layout &L, const void *weights, const float *scales);

// t is a handle returned by upload and not yet freed (the caller holds the runtime lock).
coli_status check_tensor(const char *fn, const Runtime &rt, const coli_tensor_t *t, const char *name);

} // namespace coli
