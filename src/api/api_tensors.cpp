// C API: tensor upload, in-place update, free and description.
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "api/dispatch.h"
#include "api/errors.h"
#include "api/runtime.h"
#include "api/validate.h"

using namespace coli;


namespace {

// Adds a new tensor to the live set and the counters; false (and nothing changed) when the set
// cannot grow.
bool register_tensor(Runtime &rt, coli_tensor_t *t) {
    try {
        rt.live.insert(t);
    } catch (const std::bad_alloc &) {
        return false;
    }
    rt.account(t->device, 1, static_cast<int64_t>(t->layout.total_bytes()));
    return true;
}

} // namespace

extern "C" {

COLI_API coli_status coli_tensor_upload(coli_tensor *out, int fmt, int64_t O, int64_t I, int64_t gs,
                                        const void *weights, const float *scales, int device) {
    COLI_FORWARD(coli_tensor_upload, out, fmt, O, I, gs, weights, scales, device);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (!out) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "out must not be NULL");
        Layout L;
        if (const coli_status st = check_layout(fn, fmt, O, I, gs, &L); st != COLI_OK) return st;
        if (const coli_status st = check_weight_buffers(fn, L, weights, scales); st != COLI_OK) return st;
        Runtime &rt = runtime();
        std::unique_lock<std::shared_mutex> lock(rt.mutex);
        if (!rt.initialized) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "coli_init() has not been called");
        if (!rt.has_device(device)) {
            return fail(COLI_ERR_NO_DEVICE, fn, "device " + std::to_string(device) + " was not started by coli_init");
        }
        auto t = std::make_unique<coli_tensor_t>();
        t->layout = L;
        t->device = device;
        rt.stats[device]; // may allocate: before anything refers to t
        if (device == COLI_DEVICE_CPU) {
            try {
                t->weights.resize(L.weight_bytes);
                t->scales.resize(L.scale_count);
            } catch (const std::bad_alloc &) {
                return fail(COLI_ERR_OUT_OF_MEMORY, fn,
                            "cannot allocate " + std::to_string(L.total_bytes()) + " bytes of host memory for the tensor");
            } catch (const std::length_error &) {
                return fail(COLI_ERR_OUT_OF_MEMORY, fn,
                            "cannot allocate " + std::to_string(L.total_bytes()) + " bytes of host memory for the tensor");
            }
            std::memcpy(t->weights.data(), weights, L.weight_bytes);
            if (L.has_scales()) std::memcpy(t->scales.data(), scales, L.scale_bytes());
        } else {
            std::string why;
            const coli_status st = gpu::tensor_create(device, L, static_cast<const uint8_t *>(weights), scales,
                                                      &t->device_tensor, &why);
            if (st != COLI_OK) return fail(st, fn, "GPU " + std::to_string(device) + ": " + why);
        }
        if (!register_tensor(rt, t.get())) return fail(COLI_ERR_OUT_OF_MEMORY, fn, "out of host memory");
        *out = t.release();
        return COLI_OK;
    });
}

COLI_API coli_status coli_tensor_update(coli_tensor t, const void *weights, const float *scales) {
    COLI_FORWARD(coli_tensor_update, t, weights, scales);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::unique_lock<std::shared_mutex> lock(rt.mutex);
        if (const coli_status st = check_tensor(fn, rt, t, "t"); st != COLI_OK) return st;
        if (const coli_status st = check_weight_buffers(fn, t->layout, weights, scales); st != COLI_OK) return st;
        if (t->pending_tickets > 0) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, "t is read by an issued expert group; take it first");
        }
        if (t->device_tensor) {
            std::string why;
            const coli_status st =
                gpu::tensor_update(t->device_tensor, static_cast<const uint8_t *>(weights), scales, &why);
            return st == COLI_OK ? COLI_OK : fail(st, fn, "GPU " + std::to_string(t->device) + ": " + why);
        }
        std::memcpy(t->weights.data(), weights, t->layout.weight_bytes);
        if (t->layout.has_scales()) std::memcpy(t->scales.data(), scales, t->layout.scale_bytes());
        return COLI_OK;
    });
}

COLI_API coli_status coli_tensor_free(coli_tensor t) {
    COLI_FORWARD(coli_tensor_free, t);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::unique_lock<std::shared_mutex> lock(rt.mutex);
        if (const coli_status st = check_tensor(fn, rt, t, "t"); st != COLI_OK) return st;
        if (t->pending_tickets > 0) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, "t is read by an issued expert group; take it first");
        }
        rt.live.erase(t);
        rt.account(t->device, -1, -static_cast<int64_t>(t->layout.total_bytes()));
        delete t;
        return COLI_OK;
    });
}

COLI_API coli_status coli_tensor_describe(coli_tensor t, coli_tensor_desc *desc) {
    COLI_FORWARD(coli_tensor_describe, t, desc);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::shared_lock<std::shared_mutex> lock(rt.mutex);
        if (const coli_status st = check_tensor(fn, rt, t, "t"); st != COLI_OK) return st;
        if (!desc) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "desc must not be NULL");
        desc->format = t->layout.fmt;
        desc->O = t->layout.O;
        desc->I = t->layout.I;
        desc->gs = t->layout.gs;
        desc->device = t->device;
        desc->bytes = t->layout.total_bytes();
        return COLI_OK;
    });
}

} // extern "C"
