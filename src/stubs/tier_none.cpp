// The expert tier's entry points in a build without nlohmann_json (the weight store's header
// parser): the same ABI, COLI_ERR_UNSUPPORTED with the reason (or the bound backend module's).
#include <string>

#include "api/dispatch.h"
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
COLI_API coli_status coli_store_write_random(const char *a0, int a1, int a2, int64_t a3, int64_t a4, int a5, int64_t a6,
                                             uint64_t a7) {
    COLI_FORWARD(coli_store_write_random, a0, a1, a2, a3, a4, a5, a6, a7);
    return not_built(__func__);
}
COLI_API coli_status coli_tier_open(const char *a0, coli_tier *a1) {
    COLI_FORWARD(coli_tier_open, a0, a1);
    return not_built(__func__);
}
COLI_API coli_status coli_tier_forward(coli_tier a0, int a1, const int *a2, int a3, const int64_t *a4, const float *a5,
                                       const int64_t *a6, const float *a7, float *a8, int64_t a9, int a10) {
    COLI_FORWARD(coli_tier_forward, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10);
    return not_built(__func__);
}
COLI_API coli_status coli_tier_shared_expert(coli_tier a0, int a1, float *a2, const float *a3, int64_t a4, int a5) {
    COLI_FORWARD(coli_tier_shared_expert, a0, a1, a2, a3, a4, a5);
    return not_built(__func__);
}
COLI_API coli_status coli_tier_expert_device(coli_tier a0, int a1, int a2, int *a3) {
    COLI_FORWARD(coli_tier_expert_device, a0, a1, a2, a3);
    return not_built(__func__);
}
COLI_API coli_status coli_tier_info_get(coli_tier a0, coli_tier_info *a1) {
    COLI_FORWARD(coli_tier_info_get, a0, a1);
    return not_built(__func__);
}
COLI_API coli_status coli_tier_profile_write(coli_tier a0, const char *a1) {
    COLI_FORWARD(coli_tier_profile_write, a0, a1);
    return not_built(__func__);
}
COLI_API coli_status coli_tier_close(coli_tier a0) {
    COLI_FORWARD(coli_tier_close, a0);
    return not_built(__func__);
}
} // extern "C"
