#include "formats/layout.h"

#include <climits>

namespace coli {

namespace {

bool mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }

} // namespace

const char *format_name(int fmt) {
    switch (fmt) {
    case COLI_FORMAT_F32: return "F32";
    case COLI_FORMAT_Q8: return "Q8";
    case COLI_FORMAT_Q4: return "Q4";
    case COLI_FORMAT_Q2: return "Q2";
    case COLI_FORMAT_G4: return "G4";
    default: return "?";
    }
}

int64_t exact_max_inputs(int fmt) {
    const int64_t max_code = fmt == COLI_FORMAT_Q8 ? 128 : fmt == COLI_FORMAT_Q2 ? 2 : 8;
    return INT32_MAX / (127 * max_code);
}

bool make_layout(int fmt, int64_t O, int64_t I, int64_t gs, Layout *out, std::string *why) {
    if (fmt < COLI_FORMAT_F32 || fmt > COLI_FORMAT_G4) {
        *why = "unknown format code " + std::to_string(fmt) + " (valid: 0 F32, 1 Q8, 2 Q4, 3 Q2, 4 G4)";
        return false;
    }
    if (O <= 0 || I <= 0) {
        *why = "O and I must be positive (got O=" + std::to_string(O) + ", I=" + std::to_string(I) + ")";
        return false;
    }
    if (O > kMaxDim || I > kMaxDim) {
        *why = "O and I must not exceed " + std::to_string(kMaxDim);
        return false;
    }
    Layout L;
    L.fmt = fmt;
    L.O = O;
    L.I = I;
    L.gs = gs;
    if (fmt == COLI_FORMAT_G4) {
        if (gs <= 0 || gs % 8 != 0) {
            *why = "G4 group size gs must be a positive multiple of 8 (got " + std::to_string(gs) + ")";
            return false;
        }
        L.groups = (I + gs - 1) / gs;
    } else {
        if (gs != 0) {
            *why = std::string("gs must be 0 for format ") + format_name(fmt) + " (got " +
                   std::to_string(gs) + "; only G4 has groups)";
            return false;
        }
        L.groups = fmt == COLI_FORMAT_F32 ? 0 : 1;
    }
    const size_t i = static_cast<size_t>(I);
    switch (fmt) {
    case COLI_FORMAT_F32: L.row_bytes = i * sizeof(float); break;
    case COLI_FORMAT_Q8: L.row_bytes = i; break;
    case COLI_FORMAT_Q4:
    case COLI_FORMAT_G4: L.row_bytes = (i + 1) / 2; break;
    case COLI_FORMAT_Q2: L.row_bytes = (i + 3) / 4; break;
    }
    size_t scale_bytes = 0, total = 0;
    if (!mul_ok(L.row_bytes, static_cast<size_t>(O), &L.weight_bytes) ||
        !mul_ok(static_cast<size_t>(L.groups), static_cast<size_t>(O), &L.scale_count) ||
        !mul_ok(L.scale_count, sizeof(float), &scale_bytes) ||
        __builtin_add_overflow(L.weight_bytes, scale_bytes, &total)) {
        *why = "matrix size overflows size_t (O=" + std::to_string(O) + ", I=" + std::to_string(I) + ")";
        return false;
    }
    *out = L;
    return true;
}

} // namespace coli
