// The shared numerics header (src/numerics/exact_math.h): activation quantization, exp, SiLU and
// the exact-mode epilogues, against hand-computed values and double precision.
#include <cmath>
#include <limits>

#include "catch_compat.h"
#include "numerics/exact_math.h"
#include "testing/test_data.h"

using namespace coli::testing;

namespace {

// Distance in units in the last place between a and the correctly rounded float of exact
// (both positive here, so their bit patterns order like the values).
int64_t ulp_distance(float a, double exact) {
    const int64_t d = static_cast<int64_t>(float_bits(a)) - static_cast<int64_t>(float_bits(static_cast<float>(exact)));
    return d < 0 ? -d : d;
}

} // namespace

TEST_CASE("activation rows quantize with round half to even and a 1/127 absmax scale", "[numerics]") {
    const float x[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -126.5f, 3.49f};
    int8_t q[8];
    const float sx = coli_quantize_row(x, 8, q);
    CHECK(sx == 1.0f);
    const int8_t expect[] = {127, 0, 2, 2, 0, -2, -126, 3};
    for (int k = 0; k < 8; ++k) CHECK(q[k] == expect[k]);
}

TEST_CASE("activation quantization multiplies by the reciprocal of the scale", "[numerics]") {
    const float x[] = {3.0f, 1.0f, -2.0f};
    int8_t q[3];
    const float sx = coli_quantize_row(x, 3, q);
    CHECK(sx == 3.0f / 127.0f);
    const float inv = 1.0f / sx;
    for (int k = 0; k < 3; ++k) CHECK(q[k] == static_cast<int8_t>(std::nearbyint(x[k] * inv)));
    CHECK(q[0] == 127);
}

TEST_CASE("all-zero rows use the 1e-12 floor and NaN inputs give code 0", "[numerics]") {
    const float zeros[] = {0.0f, -0.0f, 0.0f};
    int8_t q[3] = {1, 1, 1};
    CHECK(coli_quantize_row(zeros, 3, q) == 1e-12f);
    CHECK((q[0] == 0 && q[1] == 0 && q[2] == 0));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float with_nan[] = {nan, 127.0f, -5.0f};
    CHECK(coli_quantize_row(with_nan, 3, q) == 1.0f); // NaN does not take part in amax
    CHECK(q[0] == 0);
    CHECK(q[2] == -5);
}

TEST_CASE("coli_expf is within 1 ulp of the correctly rounded exp over the whole normal range", "[numerics][exp]") {
    int64_t worst = 0;
    float worst_x = 0;
    const int n = 2000003;
    for (int k = 0; k <= n; ++k) {
        const float x = -87.3f + (88.7f + 87.3f) * static_cast<float>(k) / n;
        const int64_t d = ulp_distance(coli_expf(x), std::exp(static_cast<double>(x)));
        if (d > worst) {
            worst = d;
            worst_x = x;
        }
    }
    INFO("worst ulp distance " << worst << " at x = " << worst_x);
    CHECK(worst <= 1);
}

TEST_CASE("coli_expf special values", "[numerics][exp]") {
    CHECK(coli_expf(0.0f) == 1.0f);
    CHECK(coli_expf(-0.0f) == 1.0f);
    CHECK(std::isinf(coli_expf(89.0f)));
    CHECK(std::isinf(coli_expf(std::numeric_limits<float>::infinity())));
    CHECK(coli_expf(-88.0f) == 0.0f); // below FLT_MIN: flushed by contract
    CHECK(coli_expf(-std::numeric_limits<float>::infinity()) == 0.0f);
    CHECK(std::isnan(coli_expf(std::numeric_limits<float>::quiet_NaN())));
    CHECK(coli_expf(88.72f) > 3.0e38f); // the 2^128 branch
    CHECK(coli_expf(-87.3f) >= std::numeric_limits<float>::min());
}

TEST_CASE("coli_silu is g / (1 + exp(-g)) with the library's exp", "[numerics][silu]") {
    CHECK(coli_silu(0.0f) == 0.0f);
    CHECK(coli_silu(100.0f) == 100.0f);
    CHECK(coli_silu(-100.0f) == 0.0f); // -100 / inf = -0
    double worst = 0;
    for (int k = -4000; k <= 4000; ++k) {
        const float g = k * 0.005f;
        const double exact = g / (1.0 + std::exp(-static_cast<double>(g)));
        const double err = std::fabs(coli_silu(g) - exact) / std::max(std::fabs(exact), 1e-30);
        worst = std::max(worst, g == 0 ? 0.0 : err);
        CHECK(coli_silu(g) == g / (1.0f + coli_expf(-g)));
    }
    CHECK(worst < 4e-7);
    CHECK(coli_swiglu(2.0f, 3.0f) == coli_silu(2.0f) * 3.0f);
}

TEST_CASE("exact epilogues round each operation once, left to right, without fused multiply-add",
          "[numerics]") {
    CHECK(coli_exact_row_output(261, 0.5f, 1.0f) == 130.5f);
    CHECK(coli_exact_row_output(-3, 0.1f, 3.0f) == (-3.0f * 0.1f) * 3.0f);
    // t + acc*scale with t = -1, acc = 3, scale = fl(1/3): the product rounds to exactly 1, so the
    // contract gives 0; a fused multiply-add would keep the product's 2.98e-8 remainder.
    const float third = 1.0f / 3.0f;
    CHECK(coli_exact_group_step(-1.0f, 3, third) == 0.0f);
    CHECK(std::fma(3.0f, third, -1.0f) != 0.0f);
}

TEST_CASE("the small-integer conversion equals (float)v up to 2^22 and the group step with it the contract's",
          "[numerics]") {
    // Every v with |v| <= 2^22 (the warpgroup kernel's G4 group sums; kWgMaxGroupCodes).
    int64_t differ = 0;
    for (int32_t v = -kSmallIntToFloatMax; v <= kSmallIntToFloatMax; ++v)
        differ += float_bits(coli_small_int_to_float(v)) != float_bits(static_cast<float>(v));
    CHECK(differ == 0);
    // The bound is where it stops: one past it the carry leaves 2^24 + 2.
    CHECK(coli_small_int_to_float(kSmallIntToFloatMax + 1) != static_cast<float>(kSmallIntToFloatMax + 1));
    CHECK(coli_small_int_to_float(0) == 0.0f);
    CHECK(!std::signbit(coli_small_int_to_float(0))); // +0, as (float)0: t = +0 + 0 * scale stays +0
    Rng rng(77);
    int64_t step_differ = 0;
    for (int k = 0; k < 100000; ++k) {
        const int32_t acc = static_cast<int32_t>(rng.next() % (2u * kSmallIntToFloatMax + 1)) - kSmallIntToFloatMax;
        const float t = static_cast<float>(static_cast<int32_t>(rng.next() % 2000001) - 1000000) / 997.0f;
        const float scale = static_cast<float>(rng.next() % 100000 + 1) / 3e7f;
        step_differ += float_bits(coli_exact_group_step_small(t, acc, scale)) != float_bits(coli_exact_group_step(t, acc, scale));
    }
    CHECK(step_differ == 0);
}
