#include "api/validate.h"

#include <string>

#include "api/errors.h"

namespace coli {

coli_status check_layout(const char *fn, int fmt, int64_t O, int64_t I, int64_t gs, Layout *L) {
    std::string why;
    return make_layout(fmt, O, I, gs, L, &why) ? COLI_OK : fail(COLI_ERR_INVALID_ARGUMENT, fn, why);
}

coli_status check_weight_buffers(const char *fn, const Layout &L, const void *weights, const float *scales) {
    if (!weights) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "weights must not be NULL");
    if (L.has_scales() && !scales) {
        return fail(COLI_ERR_INVALID_ARGUMENT, fn, std::string("scales must not be NULL for format ") + format_name(L.fmt));
    }
    return COLI_OK;
}

coli_status check_tensor(const char *fn, const Runtime &rt, const coli_tensor_t *t, const char *name) {
    if (!t || !rt.is_live(t)) {
        return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                    std::string(name) +
                        " is not a live tensor (NULL, never uploaded, or already freed: freed twice or used after free)");
    }
    return COLI_OK;
}

} // namespace coli
