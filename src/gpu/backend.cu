// The GPU backend: ONE translation unit compiled unchanged by nvcc (-Dgpu=cuda) or by hipcc
// (-Dgpu=hip, src/gpu/meson.build). Vendor differences come from compat/coli_compat.h only.
// A single TU keeps one dependency file per build (Meson 1.0.1 needs it named by hand for nvcc).
#include "coli_compat.h"
#include "gpu/backend_impl.cuh"
#include "gpu/device_context.cuh"
#include "gpu/device_query.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/measure.cuh"
#include "gpu/numerics_probe.cuh"

namespace coli::gpu {

const char *backend_name() { return COLI_GPU_BACKEND_NAME; }

} // namespace coli::gpu
