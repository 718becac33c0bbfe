// The expert tier's entry points in a build without nlohmann_json (the weight store's header
// parser): the same ABI, COLI_ERR_UNSUPPORTED with the reason.
#include <string>

#include "api/errors.h"

using namespace coli;

namespace {
coli_status not_built(const char *fn) {
    return fail(COLI_ERR_UNSUPPORTED, fn,
                "this library was built without the expert tier (it needs nlohmann_json: install nlohmann-json3-dev "
                "or configure with -Dexpert_tier=enabled to use the wrap)");
}
} // namespace

extern "C" {
COLI_API coli_status coli_store_write_random(const char *, int, int, int64_t, int64_t, int, int64_t, uint64_t) {
    return not_built(__func__);
}
COLI_API coli_status coli_tier_open(const char *, coli_tier *) { return not_built(__func__); }
COLI_API coli_status coli_tier_forward(coli_tier, int, const int *, int, const int64_t *, const float *, const int64_t *,
                                       const float *, float *, int64_t, int) {
    return not_built(__func__);
}
COLI_API coli_status coli_tier_shared_expert(coli_tier, int, float *, const float *, int64_t, int) { return not_built(__func__); }
COLI_API coli_status coli_tier_expert_device(coli_tier, int, int, int *) { return not_built(__func__); }
COLI_API coli_status coli_tier_info_get(coli_tier, coli_tier_info *) { return not_built(__func__); }
COLI_API coli_status coli_tier_profile_write(coli_tier, const char *) { return not_built(__func__); }
COLI_API coli_status coli_tier_close(coli_tier) { return not_built(__func__); }
} // extern "C"
