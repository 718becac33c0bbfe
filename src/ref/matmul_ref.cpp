#include "ref/matmul_ref.h"

#include <vector>

#include "formats/quantize.h"
#include "numerics/exact_math.h"

namespace coli::ref {

void matmul_float(const WeightsView &W, const float *x, float *y, int64_t S) {
    const Layout &L = W.L;
    const float *f32 = reinterpret_cast<const float *>(W.weights);
    for (int64_t s = 0; s < S; ++s) {
        for (int64_t o = 0; o < L.O; ++o) {
            float acc = 0.0f;
            for (int64_t i = 0; i < L.I; ++i) {
                const float w = L.fmt == COLI_FORMAT_F32
                                    ? f32[o * L.I + i]
                                    : coli_fmul_rn(static_cast<float>(weight_code(L, W.weights, o, i)),
                                                   weight_scale(L, W.scales, o, i));
                acc = coli_fadd_rn(acc, coli_fmul_rn(x[s * L.I + i], w));
            }
            y[s * L.O + o] = acc;
        }
    }
}

void matmul_exact(const WeightsView &W, const float *x, float *y, int64_t S) {
    const Layout &L = W.L;
    std::vector<int8_t> q(static_cast<size_t>(L.I));
    for (int64_t s = 0; s < S; ++s) {
        const float sx = coli_quantize_row(x + s * L.I, L.I, q.data());
        for (int64_t o = 0; o < L.O; ++o) {
            if (L.fmt == COLI_FORMAT_G4) {
                float t = 0.0f;
                for (int64_t g = 0; g < L.groups; ++g) {
                    int32_t acc = 0;
                    const int64_t end = (g + 1) * L.gs < L.I ? (g + 1) * L.gs : L.I;
                    for (int64_t i = g * L.gs; i < end; ++i) acc += q[i] * weight_code(L, W.weights, o, i);
                    t = coli_exact_group_step(t, acc, W.scales[o * L.groups + g]);
                }
                y[s * L.O + o] = coli_fmul_rn(t, sx);
            } else {
                int32_t acc = 0;
                for (int64_t i = 0; i < L.I; ++i) acc += q[i] * weight_code(L, W.weights, o, i);
                y[s * L.O + o] = coli_exact_row_output(acc, W.scales[o], sx);
            }
        }
    }
}

void matmul(const WeightsView &W, const float *x, float *y, int64_t S, int numerics) {
    if (numerics == COLI_NUMERICS_EXACT) {
        matmul_exact(W, x, y, S);
    } else {
        matmul_float(W, x, y, S);
    }
}

} // namespace coli::ref
