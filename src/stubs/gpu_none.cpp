// GPU entry points of a CPU-only build (-Dgpu=none): the same interface, no device.
#include "gpu/gpu_backend.h"

namespace coli::gpu {

namespace {
const char *const kNotBuilt = "this library was built without a GPU backend (configure with -Dgpu=cuda or -Dgpu=hip)";

coli_status not_built(std::string *why) {
    *why = kNotBuilt;
    return COLI_ERR_NO_DEVICE;
}
} // namespace

struct DeviceTensor {};
struct GroupTicket {};

const char *backend_name() { return "none"; }

coli_status device_count(int *count, std::string *) {
    *count = 0;
    return COLI_OK;
}

coli_status device_info(int, coli_device_info *, std::string *why) { return not_built(why); }
coli_status start(const std::vector<int> &ordinals, const Options &, std::string *why) {
    return ordinals.empty() ? COLI_OK : not_built(why);
}
void stop() {}
bool w4a16_active(int) { return false; }
void inject_fault_after(long) {}
coli_status memory_info(int, uint64_t *, uint64_t *, std::string *why) { return not_built(why); }
coli_status tensor_create(int, const Layout &, const uint8_t *, const float *, DeviceTensor **, std::string *why) {
    return not_built(why);
}
coli_status tensor_update(DeviceTensor *, const uint8_t *, const float *, std::string *why) { return not_built(why); }
coli_status tensor_destroy(DeviceTensor *t, std::string *) {
    delete t;
    return COLI_OK;
}
coli_status matmul(const DeviceTensor *, const float *, float *, int64_t, int, std::string *why) { return not_built(why); }
coli_status expert_mlp(const Expert &, const float *, float *, int64_t, int, std::string *why) { return not_built(why); }
coli_status expert_group(const GroupCall &, const float *, float *, std::string *why) { return not_built(why); }
coli_status expert_group_issue(const GroupCall &, const float *, GroupTicket **, std::string *why) { return not_built(why); }
coli_status expert_group_take(GroupTicket *, float *, std::string *why) { return not_built(why); }
void expert_group_discard(GroupTicket *t) { delete t; }
coli_status buffer_alloc(int, size_t, void **, std::string *why) { return not_built(why); }
void buffer_free(int, void *) {}
coli_status buffer_write(int, void *, const void *, size_t, std::string *why) { return not_built(why); }
coli_status buffer_read(int, void *, const void *, size_t, std::string *why) { return not_built(why); }
coli_status matmul_device(const DeviceTensor *, const float *, float *, int64_t, int, MatmulPath, std::string *why) {
    return not_built(why);
}
std::vector<MatmulPath> matmul_paths(int, const Layout &, int) { return {}; }
MatmulPath automatic_path(int, const Layout &, int64_t, int) { return MatmulPath::automatic; }
coli_status launch_invalid_kernel(int, std::string *why) { return not_built(why); }
coli_status probe_read_bandwidth(int, size_t, int, double *, std::string *why) { return not_built(why); }
coli_status probe_copy(int, size_t, int, double *, std::string *why) { return not_built(why); }
coli_status time_matmul_device(const DeviceTensor *, const float *, float *, int64_t, int, MatmulPath, int, double *,
                               std::string *why) {
    return not_built(why);
}
coli_status time_expert_group(const GroupCall &, const float *, float *, int, double *, std::string *why) {
    return not_built(why);
}
coli_status run_numerics_probe(int, const NumericsProbe &, std::string *why) { return not_built(why); }

} // namespace coli::gpu
