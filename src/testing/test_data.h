// Deterministic test data and comparisons, shared by the unit tests, coli-selfcheck and the
// benchmarks: the same generator gives the same matrices on every platform.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "formats/layout.h"
#include "formats/quantize.h"
#include "ref/weights_view.h"

namespace coli::testing {

// splitmix64: the same numbers on every platform and standard library.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next() {
        uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    // Standard normal by Box-Muller (the cosine branch only).
    float normal() {
        const double u1 = uniform() + 1e-300, u2 = uniform();
        return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }

private:
    uint64_t s_;
};

inline std::vector<float> random_normal(size_t n, uint64_t seed, float sigma = 1.0f) {
    Rng r(seed);
    std::vector<float> v(n);
    for (auto &x : v) x = sigma * r.normal();
    return v;
}

// A matrix quantized into a format, owning its bytes.
struct Quantized {
    Layout L;
    std::vector<uint8_t> weights;
    std::vector<float> scales;
    WeightsView view() const { return {L, weights.data(), scales.empty() ? nullptr : scales.data()}; }
};

inline Quantized quantized(int fmt, int64_t O, int64_t I, int64_t gs, const std::vector<float> &w) {
    Quantized q;
    std::string why;
    if (!make_layout(fmt, O, I, gs, &q.L, &why)) throw std::runtime_error(why);
    q.weights.resize(q.L.weight_bytes);
    q.scales.resize(q.L.scale_count);
    quantize(q.L, w.data(), q.weights.data(), q.scales.data());
    return q;
}

inline Quantized random_quantized(int fmt, int64_t O, int64_t I, int64_t gs, uint64_t seed) {
    return quantized(fmt, O, I, gs, random_normal(static_cast<size_t>(O * I), seed, 0.05f));
}

// Normalised mean squared error of got against a double-precision reference.
inline double nmse(const std::vector<double> &ref, const float *got) {
    double num = 0, den = 0;
    for (size_t k = 0; k < ref.size(); ++k) {
        const double d = static_cast<double>(got[k]) - ref[k];
        num += d * d;
        den += ref[k] * ref[k];
    }
    return den > 0 ? num / den : num;
}

// y = x * W^T in double over the dequantized weights: the accuracy reference of float mode.
inline std::vector<double> matmul_double(const Quantized &q, const std::vector<float> &x, int64_t S) {
    std::vector<float> w(static_cast<size_t>(q.L.O * q.L.I));
    dequantize(q.L, q.weights.data(), q.scales.empty() ? nullptr : q.scales.data(), w.data());
    std::vector<double> y(static_cast<size_t>(S * q.L.O));
    for (int64_t s = 0; s < S; ++s)
        for (int64_t o = 0; o < q.L.O; ++o) {
            double acc = 0;
            for (int64_t i = 0; i < q.L.I; ++i) acc += static_cast<double>(x[s * q.L.I + i]) * w[o * q.L.I + i];
            y[s * q.L.O + o] = acc;
        }
    return y;
}

// Number of positions whose bit patterns differ (so -0 != +0 and NaN payloads count).
inline size_t count_bit_differences(const float *a, const float *b, size_t n) {
    size_t diff = 0;
    for (size_t k = 0; k < n; ++k) diff += std::memcmp(&a[k], &b[k], sizeof(float)) != 0;
    return diff;
}

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

} // namespace coli::testing
