// Weight formats: layouts, hand-packed bytes, quantizers and dequantizers (docs/formats.md).
#include "catch_compat.h"
#include "formats/codes.h"
#include "testing/test_data.h"

using namespace coli;
using namespace coli::testing;

namespace {

Layout layout_of(int fmt, int64_t O, int64_t I, int64_t gs) {
    Layout L;
    std::string why;
    REQUIRE(make_layout(fmt, O, I, gs, &L, &why));
    return L;
}

std::vector<float> dequantized(const Layout &L, const std::vector<uint8_t> &w, const std::vector<float> &s) {
    std::vector<float> out(static_cast<size_t>(L.O * L.I));
    dequantize(L, w.data(), s.data(), out.data());
    return out;
}

} // namespace

TEST_CASE("layouts give row strides, byte counts and scale counts of every format", "[formats]") {
    const Layout f32 = layout_of(COLI_FORMAT_F32, 3, 5, 0);
    CHECK(f32.row_bytes == 20);
    CHECK(f32.weight_bytes == 60);
    CHECK(f32.scale_count == 0);
    const Layout q8 = layout_of(COLI_FORMAT_Q8, 3, 5, 0);
    CHECK(q8.row_bytes == 5);
    CHECK(q8.scale_count == 3);
    const Layout q4 = layout_of(COLI_FORMAT_Q4, 3, 5, 0);
    CHECK(q4.row_bytes == 3); // ceil(5/2)
    CHECK(q4.weight_bytes == 9);
    const Layout q2 = layout_of(COLI_FORMAT_Q2, 3, 5, 0);
    CHECK(q2.row_bytes == 2); // ceil(5/4)
    const Layout g4 = layout_of(COLI_FORMAT_G4, 2, 20, 8);
    CHECK(g4.row_bytes == 10);
    CHECK(g4.groups == 3); // 8 + 8 + 4: the last group is partial
    CHECK(g4.scale_count == 6);
    CHECK(g4.total_bytes() == 20 + 24);
}

TEST_CASE("layouts reject bad codes, sizes, group sizes and overflow", "[formats]") {
    Layout L;
    std::string why;
    CHECK_FALSE(make_layout(5, 4, 4, 0, &L, &why));
    CHECK(why.find("unknown format code 5") != std::string::npos);
    CHECK_FALSE(make_layout(-1, 4, 4, 0, &L, &why));
    CHECK_FALSE(make_layout(COLI_FORMAT_Q8, 0, 4, 0, &L, &why));
    CHECK_FALSE(make_layout(COLI_FORMAT_Q8, 4, -3, 0, &L, &why));
    CHECK_FALSE(make_layout(COLI_FORMAT_Q8, int64_t(1) << 40, 4, 0, &L, &why));
    CHECK_FALSE(make_layout(COLI_FORMAT_Q4, 4, 4, 32, &L, &why)); // gs only for G4
    CHECK(why.find("only G4") != std::string::npos);
    CHECK_FALSE(make_layout(COLI_FORMAT_G4, 4, 64, 0, &L, &why));
    CHECK_FALSE(make_layout(COLI_FORMAT_G4, 4, 64, 12, &L, &why)); // not a multiple of 8
    CHECK_FALSE(make_layout(COLI_FORMAT_G4, 4, 64, -8, &L, &why));
    CHECK_FALSE(make_layout(COLI_FORMAT_F32, kMaxDim + 1, 4, 0, &L, &why));
    CHECK(why.find("must not exceed") != std::string::npos);
    // The largest accepted matrix still has a representable size (the overflow checks matter on
    // 32-bit hosts only): 4 * (2^31 - 1)^2 bytes < 2^64.
    REQUIRE(make_layout(COLI_FORMAT_F32, kMaxDim, kMaxDim, 0, &L, &why));
    CHECK(L.weight_bytes == 4 * static_cast<size_t>(kMaxDim) * static_cast<size_t>(kMaxDim));
}

TEST_CASE("code decoders read the documented bit positions", "[formats]") {
    const uint8_t q4[] = {0xF0, 0x08};
    CHECK(coli_q4_code(q4, 0) == -8); // low nibble of byte 0
    CHECK(coli_q4_code(q4, 1) == 7);  // high nibble of byte 0
    CHECK(coli_q4_code(q4, 2) == 0);  // low nibble of byte 1
    const uint8_t q2[] = {0xE4, 0x03}; // fields 0,1,2,3 | 3
    CHECK(coli_q2_code(q2, 0) == -2);
    CHECK(coli_q2_code(q2, 1) == -1);
    CHECK(coli_q2_code(q2, 2) == 0);
    CHECK(coli_q2_code(q2, 3) == 1);
    CHECK(coli_q2_code(q2, 4) == 1);
    const uint8_t q8[] = {0x81, 0x7F};
    CHECK(coli_q8_code(q8, 0) == -127);
    CHECK(coli_q8_code(q8, 1) == 127);
}

TEST_CASE("Q8 quantizer: absmax/127 scale, ties to even, hand-computed", "[formats][quantize]") {
    const Layout L = layout_of(COLI_FORMAT_Q8, 2, 3, 0);
    const std::vector<float> w = {127.0f, -63.5f, 0.5f, 0.0f, 0.0f, 0.0f};
    std::vector<uint8_t> q(L.weight_bytes);
    std::vector<float> s(L.scale_count);
    quantize(L, w.data(), q.data(), s.data());
    CHECK(s[0] == 1.0f);
    CHECK(static_cast<int8_t>(q[0]) == 127);
    CHECK(static_cast<int8_t>(q[1]) == -64); // -63.5 rounds to the even -64
    CHECK(static_cast<int8_t>(q[2]) == 0);   // 0.5 rounds to the even 0
    CHECK(s[1] == 0.0f);                     // an all-zero row gets scale 0 and codes 0
    CHECK(q[3] == 0);
}

TEST_CASE("Q4 quantizer: signed-extreme scale, clamp, odd I, hand-computed", "[formats][quantize]") {
    const Layout L = layout_of(COLI_FORMAT_Q4, 2, 5, 0);
    // Row 0: extreme -4 -> scale 0.5 -> codes -8 4 2 0 7 (0.25/0.5 = 0.5 ties to 0).
    // Row 1: extreme +4 -> scale -0.5 -> codes -8, 8 clamped to 7, -2, 0, 0.
    const std::vector<float> w = {-4.0f, 2.0f, 1.0f, 0.25f, 3.5f, 4.0f, -4.0f, 1.0f, 0.0f, 0.0f};
    std::vector<uint8_t> q(L.weight_bytes);
    std::vector<float> s(L.scale_count);
    quantize(L, w.data(), q.data(), s.data());
    CHECK(s[0] == 0.5f);
    CHECK(s[1] == -0.5f);
    const std::vector<uint8_t> expect = {0xC0, 0x8A, 0x0F, 0xF0, 0x86, 0x08};
    CHECK(q == expect);
    const std::vector<float> back = dequantized(L, q, s);
    const std::vector<float> expect_back = {-4.0f, 2.0f, 1.0f, 0.0f, 3.5f, 4.0f, -3.5f, 1.0f, 0.0f, 0.0f};
    CHECK(back == expect_back);
}

TEST_CASE("Q2 quantizer: signed-extreme scale, I not a multiple of 4, hand-computed", "[formats][quantize]") {
    const Layout L = layout_of(COLI_FORMAT_Q2, 2, 5, 0);
    // Row 0: extreme -2 -> scale 1 -> codes -2 1 0 -1 1 (0.5 ties to 0).
    // Row 1: extreme 3 -> scale -1.5 -> codes -2 1 0 0 0.
    const std::vector<float> w = {-2.0f, 1.0f, 0.5f, -1.0f, 1.0f, 3.0f, -1.5f, 0.0f, 0.0f, 0.0f};
    std::vector<uint8_t> q(L.weight_bytes);
    std::vector<float> s(L.scale_count);
    quantize(L, w.data(), q.data(), s.data());
    CHECK(s[0] == 1.0f);
    CHECK(s[1] == -1.5f);
    // fields (code+2): row 0 = 0 3 2 1 | 3 ; row 1 = 0 3 2 2 | 2
    const std::vector<uint8_t> expect = {0x6C, 0x03, 0xAC, 0x02};
    CHECK(q == expect);
}

TEST_CASE("G4 quantizer: one scale per group, partial last group, hand-computed", "[formats][quantize]") {
    const Layout L = layout_of(COLI_FORMAT_G4, 1, 10, 8);
    std::vector<float> w = {-4.0f, 2.0f, 1.0f, 0.25f, 3.5f, 0.0f, 0.0f, 0.0f, /* group 1: */ 3.0f, -1.5f};
    std::vector<uint8_t> q(L.weight_bytes);
    std::vector<float> s(L.scale_count);
    quantize(L, w.data(), q.data(), s.data());
    CHECK(s[0] == 0.5f);
    CHECK(s[1] == -0.375f); // 3 / -8
    // codes: -8 4 2 0 7 0 0 0 | -8 4  -> nibbles 0 12 10 8 15 8 8 8 | 0 12
    const std::vector<uint8_t> expect = {0xC0, 0x8A, 0x8F, 0x88, 0xC0};
    CHECK(q == expect);
}

TEST_CASE("F32 quantize and dequantize are copies", "[formats][quantize]") {
    const Layout L = layout_of(COLI_FORMAT_F32, 2, 3, 0);
    const std::vector<float> w = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 7.0f};
    std::vector<uint8_t> q(L.weight_bytes);
    quantize(L, w.data(), q.data(), nullptr);
    std::vector<float> back(6);
    dequantize(L, q.data(), nullptr, back.data());
    CHECK(count_bit_differences(w.data(), back.data(), 6) == 0);
}

TEST_CASE("round trips stay within one quantization step and re-quantize to the same codes",
          "[formats][quantize]") {
    struct Case { int fmt; int64_t O, I, gs; };
    const Case cases[] = {{COLI_FORMAT_Q8, 7, 33, 0}, {COLI_FORMAT_Q4, 9, 37, 0}, {COLI_FORMAT_Q2, 5, 41, 0},
                          {COLI_FORMAT_G4, 6, 100, 32}, {COLI_FORMAT_G4, 3, 77, 8}};
    for (const Case &c : cases) {
        INFO("format " << format_name(c.fmt) << " O=" << c.O << " I=" << c.I << " gs=" << c.gs);
        const std::vector<float> w = random_normal(static_cast<size_t>(c.O * c.I), 11 + c.fmt, 0.1f);
        const Quantized q = quantized(c.fmt, c.O, c.I, c.gs, w);
        const std::vector<float> back = dequantized(q.L, q.weights, q.scales);
        double worst = 0;
        for (int64_t o = 0; o < c.O; ++o)
            for (int64_t i = 0; i < c.I; ++i) {
                const double step = std::fabs(weight_scale(q.L, q.scales.data(), o, i));
                const double err = std::fabs(static_cast<double>(back[o * c.I + i]) - w[o * c.I + i]);
                // Half a step from rounding; a full step only where the +max code was clamped.
                worst = std::max(worst, err / step);
            }
        CHECK(worst <= 1.0 + 1e-6);
        if (c.fmt != COLI_FORMAT_Q8) {
            // The signed extreme maps exactly onto the most negative code, so quantizing the
            // dequantized matrix reproduces the same scales and codes.
            const Quantized again = quantized(c.fmt, c.O, c.I, c.gs, back);
            CHECK(again.scales == q.scales);
            CHECK(again.weights == q.weights);
        }
    }
}
