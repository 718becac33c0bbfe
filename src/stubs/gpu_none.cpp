// GPU entry points of a CPU-only build (-Dgpu=none): the same ABI, no device.
#include "gpu/gpu_backend.h"

namespace coli::gpu {

namespace {
const char *const kNotBuilt = "this library was built without a GPU backend (configure with -Dgpu=cuda or -Dgpu=hip)";
} // namespace

const char *backend_name() { return "none"; }

coli_status device_count(int *count, std::string *) {
    *count = 0;
    return COLI_OK;
}

coli_status device_info(int, coli_device_info *, std::string *why) {
    *why = kNotBuilt;
    return COLI_ERR_NO_DEVICE;
}

coli_status run_numerics_probe(int, const NumericsProbe &, std::string *why) {
    *why = kNotBuilt;
    return COLI_ERR_NO_DEVICE;
}

} // namespace coli::gpu
