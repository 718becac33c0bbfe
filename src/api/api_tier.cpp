// C API: the expert tier and the weight-store writer (src/tier/, src/store/).
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "api/dispatch.h"
#include "api/errors.h"
#include "api/runtime.h"
#include "tier/expert_tier.h"

using namespace coli;

struct coli_tier_t {
    tier::ExpertTier tier;
};

namespace {

coli_status check_tier(const char *fn, coli_tier t) {
    return t ? COLI_OK : fail(COLI_ERR_INVALID_ARGUMENT, fn, "tier must not be NULL");
}

} // namespace

extern "C" {

COLI_API coli_status coli_store_write_random(const char *path, int layers, int experts, int64_t hidden,
                                             int64_t intermediate, int format, int64_t group_size, uint64_t seed) {
    COLI_FORWARD(coli_store_write_random, path, layers, experts, hidden, intermediate, format, group_size, seed);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (!path) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "path must not be NULL");
        if (layers <= 0 || experts <= 0) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "layers and experts must be positive");
        Layout L;
        std::string why;
        const int64_t gs = format == COLI_FORMAT_G4 ? group_size : 0;
        if (!make_layout(format, intermediate, hidden, gs, &L, &why) || !make_layout(format, hidden, intermediate, gs, &L, &why)) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, why);
        }
        store::StoreConfig c{layers, experts, hidden, intermediate, format, gs, true};
        return store::write_random_store(path, c, seed, &why) ? COLI_OK : fail(COLI_ERR_IO, fn, why);
    });
}

COLI_API coli_status coli_tier_open(const char *store_path, coli_tier *out) {
    COLI_FORWARD(coli_tier_open, store_path, out);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (!store_path || !out) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "store_path and tier must not be NULL");
        std::vector<int> gpus;
        {
            Runtime &rt = runtime();
            std::shared_lock<std::shared_mutex> lock(rt.mutex);
            if (!rt.initialized) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "coli_init() has not been called");
            for (int d : rt.devices) {
                if (d != COLI_DEVICE_CPU) gpus.push_back(d);
            }
        }
        tier::TierSettings settings;
        std::string why;
        if (!tier::settings_from_environment(static_cast<int>(gpus.size()), &settings, &why)) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, why);
        }
        auto t = std::make_unique<coli_tier_t>();
        if (const coli_status st = t->tier.open(store_path, gpus, settings, &why); st != COLI_OK) return fail(st, fn, why);
        *out = t.release();
        return COLI_OK;
    });
}

COLI_API coli_status coli_tier_forward(coli_tier t, int layer, const int *experts, int n_experts, const int64_t *rows,
                                       const float *x, const int64_t *row_token, const float *row_weight, float *y,
                                       int64_t n_tokens, int numerics) {
    COLI_FORWARD(coli_tier_forward, t, layer, experts, n_experts, rows, x, row_token, row_weight, y, n_tokens, numerics);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (const coli_status st = check_tier(fn, t); st != COLI_OK) return st;
        std::string why;
        const coli_status st =
            t->tier.forward(layer, experts, n_experts, rows, x, row_token, row_weight, y, n_tokens, numerics, &why);
        return st == COLI_OK ? COLI_OK : fail(st, fn, why);
    });
}

COLI_API coli_status coli_tier_shared_expert(coli_tier t, int layer, float *y, const float *x, int64_t S, int numerics) {
    COLI_FORWARD(coli_tier_shared_expert, t, layer, y, x, S, numerics);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (const coli_status st = check_tier(fn, t); st != COLI_OK) return st;
        std::string why;
        const coli_status st = t->tier.shared_expert(layer, y, x, S, numerics, &why);
        return st == COLI_OK ? COLI_OK : fail(st, fn, why);
    });
}

COLI_API coli_status coli_tier_expert_device(coli_tier t, int layer, int expert, int *device) {
    COLI_FORWARD(coli_tier_expert_device, t, layer, expert, device);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (const coli_status st = check_tier(fn, t); st != COLI_OK) return st;
        if (!device) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "device must not be NULL");
        std::string why;
        const coli_status st = t->tier.expert_device(layer, expert, device, &why);
        return st == COLI_OK ? COLI_OK : fail(st, fn, why);
    });
}

COLI_API coli_status coli_tier_info_get(coli_tier t, coli_tier_info *info) {
    COLI_FORWARD(coli_tier_info_get, t, info);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (const coli_status st = check_tier(fn, t); st != COLI_OK) return st;
        if (!info) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "info must not be NULL");
        *info = t->tier.info();
        return COLI_OK;
    });
}

COLI_API coli_status coli_tier_profile_write(coli_tier t, const char *path) {
    COLI_FORWARD(coli_tier_profile_write, t, path);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (const coli_status st = check_tier(fn, t); st != COLI_OK) return st;
        if (!path) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "path must not be NULL");
        std::ofstream out(path);
        out << tier::format_profile(t->tier.recorded());
        out.close();
        return out ? COLI_OK : fail(COLI_ERR_IO, fn, std::string(path) + ": cannot write the profile");
    });
}

COLI_API coli_status coli_tier_close(coli_tier t) {
    COLI_FORWARD(coli_tier_close, t);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (const coli_status st = check_tier(fn, t); st != COLI_OK) return st;
        delete t;
        return COLI_OK;
    });
}

} // extern "C"
