#include "formats/quantize.h"

#include <cmath>
#include <cstring>

#include "formats/codes.h"

namespace coli {

namespace {

struct CodeRange {
    int lo, hi;
    float divisor; // scale = (signed extreme or amax) / divisor
    bool signed_extreme;
};

CodeRange code_range(int fmt) {
    switch (fmt) {
    case COLI_FORMAT_Q8: return {-127, 127, 127.0f, false};
    case COLI_FORMAT_Q2: return {-2, 1, -2.0f, true};
    default: return {-8, 7, -8.0f, true}; // Q4, G4
    }
}

void store_code(const Layout &L, uint8_t *row, int64_t i, int v) {
    switch (L.fmt) {
    case COLI_FORMAT_Q8: row[i] = static_cast<uint8_t>(static_cast<int8_t>(v)); break;
    case COLI_FORMAT_Q2: coli_q2_store(row, i, v); break;
    default: coli_q4_store(row, i, v); break;
    }
}

// Quantize w[begin, end) of one row with one scale; returns the scale.
float quantize_segment(const Layout &L, const float *w, int64_t begin, int64_t end, uint8_t *row) {
    const CodeRange r = code_range(L.fmt);
    float extreme = 0.0f; // element of largest magnitude (first one on ties)
    for (int64_t i = begin; i < end; ++i) {
        if (std::fabs(w[i]) > std::fabs(extreme)) extreme = w[i];
    }
    const float scale = (r.signed_extreme ? extreme : std::fabs(extreme)) / r.divisor;
    for (int64_t i = begin; i < end; ++i) {
        int v = 0;
        if (scale != 0.0f) {
            const float q = std::nearbyint(w[i] / scale); // ties to even
            v = q < r.lo ? r.lo : q > r.hi ? r.hi : static_cast<int>(q);
        }
        store_code(L, row, i, v);
    }
    return scale == 0.0f ? 0.0f : scale; // no negative zero scales
}

} // namespace

int weight_code(const Layout &L, const uint8_t *weights, int64_t o, int64_t i) {
    const uint8_t *row = weights + static_cast<size_t>(o) * L.row_bytes;
    switch (L.fmt) {
    case COLI_FORMAT_Q8: return coli_q8_code(row, i);
    case COLI_FORMAT_Q2: return coli_q2_code(row, i);
    default: return coli_q4_code(row, i);
    }
}

float weight_scale(const Layout &L, const float *scales, int64_t o, int64_t i) {
    return L.fmt == COLI_FORMAT_G4 ? scales[o * L.groups + i / L.gs] : scales[o];
}

void quantize(const Layout &L, const float *w, uint8_t *weights, float *scales) {
    if (L.fmt == COLI_FORMAT_F32) {
        std::memcpy(weights, w, L.weight_bytes);
        return;
    }
    std::memset(weights, 0, L.weight_bytes);
    const int64_t gsize = L.group_size();
    for (int64_t o = 0; o < L.O; ++o) {
        uint8_t *row = weights + static_cast<size_t>(o) * L.row_bytes;
        const float *wrow = w + o * L.I;
        for (int64_t g = 0; g < L.groups; ++g) {
            const int64_t begin = g * gsize;
            const int64_t end = begin + gsize < L.I ? begin + gsize : L.I;
            scales[o * L.groups + g] = quantize_segment(L, wrow, begin, end, row);
        }
    }
}

void dequantize(const Layout &L, const uint8_t *weights, const float *scales, float *w) {
    if (L.fmt == COLI_FORMAT_F32) {
        std::memcpy(w, weights, L.weight_bytes);
        return;
    }
    for (int64_t o = 0; o < L.O; ++o) {
        for (int64_t i = 0; i < L.I; ++i) {
            w[o * L.I + i] = static_cast<float>(weight_code(L, weights, o, i)) *
                             weight_scale(L, scales, o, i);
        }
    }
}

} // namespace coli
