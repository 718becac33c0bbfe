// C API: weight format sizes, quantizers and dequantizers.
#include <cmath>
#include <string>

#include "api/dispatch.h"
#include "api/errors.h"
#include "api/validate.h"
#include "formats/layout.h"
#include "formats/quantize.h"

using namespace coli;

namespace {

// The checks quantize and dequantize share: a valid layout, its weight buffers, and w.
coli_status check_matrix_call(const char *fn, int fmt, int64_t O, int64_t I, int64_t gs, const void *weights,
                              const float *scales, const float *w, Layout *L) {
    if (const coli_status st = check_layout(fn, fmt, O, I, gs, L); st != COLI_OK) return st;
    if (const coli_status st = check_weight_buffers(fn, *L, weights, scales); st != COLI_OK) return st;
    return w ? COLI_OK : fail(COLI_ERR_INVALID_ARGUMENT, fn, "w must not be NULL");
}

} // namespace

extern "C" {

COLI_API coli_status coli_format_sizes(int fmt, int64_t O, int64_t I, int64_t gs, size_t *weight_bytes,
                                       size_t *scale_count) {
    COLI_FORWARD(coli_format_sizes, fmt, O, I, gs, weight_bytes, scale_count);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Layout L;
        if (const coli_status st = check_layout(fn, fmt, O, I, gs, &L); st != COLI_OK) return st;
        if (!weight_bytes || !scale_count) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, "weight_bytes and scale_count must not be NULL");
        }
        *weight_bytes = L.weight_bytes;
        *scale_count = L.scale_count;
        return COLI_OK;
    });
}

COLI_API coli_status coli_quantize(int fmt, int64_t O, int64_t I, int64_t gs, const float *w, void *weights,
                                   float *scales) {
    COLI_FORWARD(coli_quantize, fmt, O, I, gs, w, weights, scales);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Layout L;
        if (const coli_status st = check_matrix_call(fn, fmt, O, I, gs, weights, scales, w, &L); st != COLI_OK) return st;
        const int64_t n = O * I;
        for (int64_t k = 0; k < n; ++k) {
            if (!std::isfinite(w[k])) {
                return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                            "w[" + std::to_string(k / I) + "][" + std::to_string(k % I) + "] is not finite");
            }
        }
        quantize(L, w, static_cast<uint8_t *>(weights), scales);
        return COLI_OK;
    });
}

COLI_API coli_status coli_dequantize(int fmt, int64_t O, int64_t I, int64_t gs, const void *weights,
                                     const float *scales, float *w) {
    COLI_FORWARD(coli_dequantize, fmt, O, I, gs, weights, scales, w);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Layout L;
        if (const coli_status st = check_matrix_call(fn, fmt, O, I, gs, weights, scales, w, &L); st != COLI_OK) return st;
        dequantize(L, static_cast<const uint8_t *>(weights), scales, w);
        return COLI_OK;
    });
}

} // extern "C"
