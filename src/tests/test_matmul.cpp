// Matmul: the CPU reference against hand-computed vectors and double precision, and the CPU
// backend against the reference, bit for bit (docs/numerics.md).
#include <algorithm>

#include "catch_compat.h"
#include "cpu/matmul_cpu.h"
#include "ref/matmul_ref.h"
#include "registry.h"
#include "testing/test_data.h"

using namespace coli;
using namespace coli::testing;

namespace {

Quantized packed(int fmt, int64_t O, int64_t I, int64_t gs, std::vector<uint8_t> bytes, std::vector<float> scales) {
    Quantized q;
    std::string why;
    REQUIRE(make_layout(fmt, O, I, gs, &q.L, &why));
    REQUIRE(bytes.size() == q.L.weight_bytes);
    REQUIRE(scales.size() == q.L.scale_count);
    q.weights = std::move(bytes);
    q.scales = std::move(scales);
    return q;
}

std::vector<float> run(MatmulFn fn, const Quantized &q, const std::vector<float> &x, int64_t S, int mode) {
    std::vector<float> y(static_cast<size_t>(S * q.L.O), -12345.0f); // poison: every output must be written
    fn(q.view(), x.data(), y.data(), S, mode);
    return y;
}

// The activation rows of the hand vectors have amax 127, so sx = 1 and their codes are the
// values rounded half to even: {127, -63.5, 2.5} -> {127, -64, 2}, {0.5, 1.5, -127} -> {0, 2, -127}.
const std::vector<float> kX3 = {127.0f, -63.5f, 2.5f, 0.5f, 1.5f, -127.0f};

} // namespace

TEST_CASE("Q8 hand vectors, S = 2, both modes", "[matmul][ref]") {
    // rows {1, -2, 3} * 0.5 and {-127, 0, 127} * 0.25
    const Quantized q = packed(COLI_FORMAT_Q8, 2, 3, 0, {0x01, 0xFE, 0x03, 0x81, 0x00, 0x7F}, {0.5f, 0.25f});
    // exact: acc = 127 + 128 + 6 = 261 | -16129 + 254 = -15875 | -4 - 381 = -385 | -16129
    const std::vector<float> exact = {130.5f, -3968.75f, -192.5f, -4032.25f};
    CHECK(run(ref::matmul, q, kX3, 2, COLI_NUMERICS_EXACT) == exact);
    // float: 63.5 + 63.5 + 3.75 | -4032.25 + 79.375 | 0.25 - 1.5 - 190.5 | -15.875 - 4032.25
    const std::vector<float> flt = {130.75f, -3952.875f, -191.75f, -4048.125f};
    CHECK(run(ref::matmul, q, kX3, 2, COLI_NUMERICS_FLOAT) == flt);
}

TEST_CASE("Q4 hand vectors, odd I", "[matmul][ref]") {
    // row 0 codes {-8, 7, 0} scale 0.5; row 1 codes {1, -1, 3} scale 2
    const Quantized q = packed(COLI_FORMAT_Q4, 2, 3, 0, {0xF0, 0x08, 0x79, 0x0B}, {0.5f, 2.0f});
    // exact: -1016 - 448 + 0 = -1464 -> -732 | 127 + 64 + 6 = 197 -> 394
    CHECK(run(ref::matmul, q, kX3, 1, COLI_NUMERICS_EXACT) == std::vector<float>{-732.0f, 394.0f});
    // float: w0 = {-4, 3.5, 0}, w1 = {2, -2, 6}: -508 - 222.25 + 0 | 254 + 127 + 15
    CHECK(run(ref::matmul, q, kX3, 1, COLI_NUMERICS_FLOAT) == std::vector<float>{-730.25f, 396.0f});
}

TEST_CASE("Q2 hand vectors, I = 5", "[matmul][ref]") {
    // codes {-2, -1, 0, 1, 1} scale 1.5
    const Quantized q = packed(COLI_FORMAT_Q2, 1, 5, 0, {0xE4, 0x03}, {1.5f});
    const std::vector<float> x = {127.0f, 1.0f, -1.0f, 2.0f, 3.0f};
    // exact: -254 - 1 + 0 + 2 + 3 = -250 -> -375; float: -381 - 1.5 + 0 + 3 + 4.5 = -375
    CHECK(run(ref::matmul, q, x, 1, COLI_NUMERICS_EXACT) == std::vector<float>{-375.0f});
    CHECK(run(ref::matmul, q, x, 1, COLI_NUMERICS_FLOAT) == std::vector<float>{-375.0f});
}

TEST_CASE("G4 hand vectors, I not a multiple of the group", "[matmul][ref]") {
    // I = 12, gs = 8: codes -8..-1 | 0..3 (a partial group of 4), scales 0.5 | 0.25
    const Quantized q = packed(COLI_FORMAT_G4, 1, 12, 8, {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA}, {0.5f, 0.25f});
    const std::vector<float> x = {127, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, -2};
    // exact: acc0 = -1016 - 1 = -1017, acc1 = 0 + 1 + 2 - 6 = -3; t = -508.5 - 0.75
    CHECK(run(ref::matmul, q, x, 1, COLI_NUMERICS_EXACT) == std::vector<float>{-509.25f});
    CHECK(run(ref::matmul, q, x, 1, COLI_NUMERICS_FLOAT) == std::vector<float>{-509.25f});
}

TEST_CASE("no fused multiply-add: G4 group sums and float accumulation round every product",
          "[matmul][ref]") {
    const float third = 1.0f / 3.0f; // 3 * third rounds to exactly 1.0f
    // G4, I = 16, gs = 8: group 0 gives acc -4 at scale 0.25 (t = -1), group 1 acc 3 at scale fl(1/3).
    // codes: group 0 {0, -4, 0...}, group 1 {1, 1, 1, 0...}
    std::vector<uint8_t> bytes = {0x48, 0x88, 0x88, 0x88, 0x99, 0x89, 0x88, 0x88};
    const Quantized g4 = packed(COLI_FORMAT_G4, 1, 16, 8, bytes, {0.25f, third});
    std::vector<float> x(16, 0.0f);
    x[0] = 127.0f; // sx = 1 (code 0 there)
    x[1] = 1.0f;
    x[8] = x[9] = x[10] = 1.0f;
    CHECK(run(ref::matmul, g4, x, 1, COLI_NUMERICS_EXACT)[0] == 0.0f);
    CHECK(run(cpu::matmul, g4, x, 1, COLI_NUMERICS_EXACT)[0] == 0.0f);
    // F32 float mode: acc = 0 + 1*(-1) = -1, then -1 + fl(3 * third) = 0.
    std::vector<uint8_t> f32(8);
    const float w[2] = {-1.0f, third};
    std::memcpy(f32.data(), w, 8);
    const Quantized f = packed(COLI_FORMAT_F32, 1, 2, 0, f32, {});
    CHECK(run(ref::matmul, f, {1.0f, 3.0f}, 1, COLI_NUMERICS_FLOAT)[0] == 0.0f);
    CHECK(run(cpu::matmul, f, {1.0f, 3.0f}, 1, COLI_NUMERICS_FLOAT)[0] == 0.0f);
}

namespace {

struct Shape { int fmt; int64_t O, I, gs, S; };

const Shape kShapes[] = {
    {COLI_FORMAT_F32, 17, 33, 0, 3},   {COLI_FORMAT_Q8, 37, 101, 0, 1},  {COLI_FORMAT_Q8, 64, 256, 0, 5},
    {COLI_FORMAT_Q4, 13, 99, 0, 2},    {COLI_FORMAT_Q4, 128, 512, 0, 8}, {COLI_FORMAT_Q2, 9, 75, 0, 4},
    {COLI_FORMAT_Q2, 96, 384, 0, 1},   {COLI_FORMAT_G4, 31, 100, 32, 3}, {COLI_FORMAT_G4, 64, 520, 64, 2},
    {COLI_FORMAT_G4, 8, 24, 8, 7},
    // The CPU backend's float blocks (32 rows) and chunks (256 codes): partial blocks, a last
    // partial chunk and word, groups that straddle chunks (96, 200) or span several (520).
    {COLI_FORMAT_F32, 40, 300, 0, 2},  {COLI_FORMAT_Q8, 70, 259, 0, 3},  {COLI_FORMAT_Q4, 33, 385, 0, 2},
    {COLI_FORMAT_Q2, 65, 301, 0, 3},   {COLI_FORMAT_G4, 33, 1000, 96, 2}, {COLI_FORMAT_G4, 35, 391, 200, 3},
    {COLI_FORMAT_G4, 34, 1100, 520, 2},
};

} // namespace

TEST_CASE("float mode stays within the documented NMSE of double precision", "[matmul][ref][accuracy]") {
    for (const Shape &c : kShapes) {
        INFO(format_name(c.fmt) << " O=" << c.O << " I=" << c.I << " gs=" << c.gs << " S=" << c.S);
        const Quantized q = random_quantized(c.fmt, c.O, c.I, c.gs, 100 + c.O);
        const std::vector<float> x = random_normal(static_cast<size_t>(c.S * c.I), 200 + c.I);
        const std::vector<double> want = matmul_double(q, x, c.S);
        CHECK(nmse(want, run(ref::matmul, q, x, c.S, COLI_NUMERICS_FLOAT).data()) < 1e-10);
        if (c.fmt != COLI_FORMAT_F32) {
            // Exact mode adds the int8 activation rounding (docs/numerics.md: below 1e-3).
            CHECK(nmse(want, run(ref::matmul, q, x, c.S, COLI_NUMERICS_EXACT).data()) < 1e-3);
        }
    }
}

TEST_CASE("every registered variant equals the reference bit for bit in both modes", "[matmul][cpu]") {
    const int threads = GENERATE(1, 2, 3);
    cpu::set_threads(threads);
    REQUIRE(matmul_variants().at(0).is_reference);
    for (const MatmulVariant &v : matmul_variants()) {
        for (const Shape &c : kShapes) {
            for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
                if (mode == COLI_NUMERICS_EXACT && c.fmt == COLI_FORMAT_F32) continue;
                INFO(v.name << " " << format_name(c.fmt) << " O=" << c.O << " I=" << c.I << " S=" << c.S
                            << " mode=" << mode << " threads=" << threads);
                const Quantized q = random_quantized(c.fmt, c.O, c.I, c.gs, 300 + c.I);
                const std::vector<float> x = random_normal(static_cast<size_t>(c.S * c.I), 400 + c.O);
                const std::vector<float> want = run(ref::matmul, q, x, c.S, mode);
                const std::vector<float> got = run(v.fn, q, x, c.S, mode);
                CHECK(count_bit_differences(want.data(), got.data(), want.size()) == 0);
            }
        }
    }
    cpu::set_threads(1);
}

namespace {

// A matrix of the given raw bytes (every value a file may hold) and random positive scales.
Quantized raw_matrix(int fmt, int64_t O, int64_t I, int64_t gs, uint64_t seed, int fill) {
    Quantized q;
    std::string why;
    REQUIRE(make_layout(fmt, O, I, gs, &q.L, &why));
    Rng r(seed);
    q.weights.resize(q.L.weight_bytes);
    for (uint8_t &b : q.weights) b = static_cast<uint8_t>(fill >= 0 ? fill : r.next());
    q.scales.resize(q.L.scale_count);
    for (float &sc : q.scales) sc = static_cast<float>(0.001 + 0.01 * r.uniform());
    return q;
}

} // namespace

// The exact kernels multiply unsigned fields by activation codes in saturating 16-bit pairs and
// subtract the fields' offset afterwards (src/cpu/exact_sums.h): the extremes of both operands
// and every group-size / tail / row-count combination must still give the reference's sums.
TEST_CASE("exact mode: every variant equals the reference at the codes' extremes, all bytes, 1-9 rows",
          "[matmul][cpu]") {
    struct Case { int fmt; int64_t I, gs; };
    const Case cases[] = {
        {COLI_FORMAT_Q8, 2048, 0}, {COLI_FORMAT_Q8, 77, 0},   {COLI_FORMAT_Q4, 2048, 0},  {COLI_FORMAT_Q4, 131, 0},
        {COLI_FORMAT_Q2, 2048, 0}, {COLI_FORMAT_Q2, 259, 0},  {COLI_FORMAT_G4, 2048, 128}, {COLI_FORMAT_G4, 1024, 64},
        {COLI_FORMAT_G4, 608, 32}, {COLI_FORMAT_G4, 1000, 200}, {COLI_FORMAT_G4, 100, 8},
    };
    // Activation rows: all +127 codes, alternating +-127, and random ones.
    auto activations = [](int kind, int64_t S, int64_t I) {
        std::vector<float> x = random_normal(static_cast<size_t>(S * I), 77 + I);
        if (kind < 2)
            for (size_t i = 0; i < x.size(); ++i) x[i] = kind == 0 || i % 2 == 0 ? 1.0f : -1.0f;
        return x;
    };
    for (const MatmulVariant &v : matmul_variants()) {
        for (const Case &c : cases) {
            // Bytes: Q8 -128 and 127, Q4/G4 codes -8 and 7, Q2 -2 and 1 in every field; random.
            for (int fill : {0x80, 0x7F, 0x00, 0xFF, -1}) {
                const Quantized q = raw_matrix(c.fmt, 5, c.I, c.gs, 900 + c.I, fill);
                for (int kind : {0, 1, 2}) {
                    for (int64_t S : {1, 2, 3, 4, 5, 9}) {
                        INFO(v.name << " " << format_name(c.fmt) << " I=" << c.I << " gs=" << c.gs << " fill=" << fill
                                    << " activations=" << kind << " S=" << S);
                        const std::vector<float> x = activations(kind, S, c.I);
                        const std::vector<float> want = run(ref::matmul, q, x, S, COLI_NUMERICS_EXACT);
                        const std::vector<float> got = run(v.fn, q, x, S, COLI_NUMERICS_EXACT);
                        CHECK(count_bit_differences(want.data(), got.data(), want.size()) == 0);
                    }
                }
            }
        }
    }
}

// A Q4 row of 1.5M inputs, every code 7 against codes 127: the sum 7 * 127 * I fits in int32
// (exact_max_inputs), the kernels' raw sum of fields 15 * 127 * I does not, and must wrap back.
TEST_CASE("exact mode: a raw sum past INT32_MAX still gives the exact sum", "[matmul][cpu]") {
    const int64_t I = 1500000;
    REQUIRE(I <= exact_max_inputs(COLI_FORMAT_Q4));
    REQUIRE(15.0 * 127.0 * static_cast<double>(I) > static_cast<double>(INT32_MAX));
    for (int fmt : {COLI_FORMAT_Q4, COLI_FORMAT_G4}) {
        const Quantized q = raw_matrix(fmt, 2, I, fmt == COLI_FORMAT_G4 ? I : 0, 5, 0xFF);
        const std::vector<float> x(static_cast<size_t>(I), 1.0f);
        const std::vector<float> want = run(ref::matmul, q, x, 1, COLI_NUMERICS_EXACT);
        REQUIRE(want[0] > 0.0f);
        for (const MatmulVariant &v : matmul_variants()) {
            INFO(v.name << " " << format_name(fmt));
            CHECK(count_bit_differences(want.data(), run(v.fn, q, x, 1, COLI_NUMERICS_EXACT).data(), want.size()) == 0);
        }
    }
}

TEST_CASE("the CPU backend splits large calls across threads without changing a bit", "[matmul][cpu]") {
    // 640 x 2048 x 4 = 5.2M multiply-adds: above the threshold where threads start.
    const Quantized q = random_quantized(COLI_FORMAT_Q4, 640, 2048, 0, 7);
    const std::vector<float> x = random_normal(4 * 2048, 8);
    for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
        cpu::set_threads(1);
        const std::vector<float> one = run(cpu::matmul, q, x, 4, mode);
        cpu::set_threads(4);
        const std::vector<float> four = run(cpu::matmul, q, x, 4, mode);
        CHECK(count_bit_differences(one.data(), four.data(), one.size()) == 0);
        CHECK(count_bit_differences(one.data(), run(ref::matmul, q, x, 4, mode).data(), one.size()) == 0);
    }
    cpu::set_threads(1);
}

TEST_CASE("batch invariance: rows of an S-row call equal the same rows computed one at a time",
          "[matmul][ref][cpu]") {
    for (int fmt : {COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4}) {
        const int64_t gs = fmt == COLI_FORMAT_G4 ? 32 : 0;
        const Quantized q = random_quantized(fmt, 45, 200, gs, 50 + fmt);
        const int64_t S = 6;
        const std::vector<float> x = random_normal(static_cast<size_t>(S * 200), 60 + fmt);
        for (MatmulFn fn : {static_cast<MatmulFn>(ref::matmul), static_cast<MatmulFn>(cpu::matmul)}) {
            const std::vector<float> batch = run(fn, q, x, S, COLI_NUMERICS_EXACT);
            for (int64_t s = 0; s < S; ++s) {
                const std::vector<float> row(x.begin() + s * 200, x.begin() + (s + 1) * 200);
                const std::vector<float> single = run(fn, q, row, 1, COLI_NUMERICS_EXACT);
                CHECK(count_bit_differences(single.data(), batch.data() + s * 45, 45) == 0);
            }
        }
    }
}
