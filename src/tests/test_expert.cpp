// Expert composition: the fused expert MLP and the expert group, as the contract writes them.
#include "catch_compat.h"
#include "cpu/matmul_cpu.h"
#include "numerics/exact_math.h"
#include "ref/expert_ref.h"
#include "ref/matmul_ref.h"
#include "testing/test_data.h"

using namespace coli;
using namespace coli::testing;

namespace {

struct Expert {
    Quantized gate, up, down;
    ExpertView view() const { return {gate.view(), up.view(), down.view()}; }
};

Expert random_expert(int fmt, int64_t D, int64_t F, uint64_t seed) {
    const int64_t gs = fmt == COLI_FORMAT_G4 ? 32 : 0;
    return {random_quantized(fmt, F, D, gs, seed), random_quantized(fmt, F, D, gs, seed + 1),
            random_quantized(fmt, D, F, gs, seed + 2)};
}

// The contract spelled out with plain operations: g, u, h = (g / (1 + exp(-g))) * u, down(h).
std::vector<float> mlp_by_hand(const Expert &e, const std::vector<float> &x, int64_t S, int mode) {
    const int64_t D = e.gate.L.I, F = e.gate.L.O;
    std::vector<float> g(S * F), u(S * F), y(S * D);
    ref::matmul(e.gate.view(), x.data(), g.data(), S, mode);
    ref::matmul(e.up.view(), x.data(), u.data(), S, mode);
    for (size_t k = 0; k < g.size(); ++k) g[k] = (g[k] / (1.0f + coli_expf(-g[k]))) * u[k];
    ref::matmul(e.down.view(), g.data(), y.data(), S, mode);
    return y;
}

std::vector<float> mlp(MatmulFn fn, const Expert &e, const std::vector<float> &x, int64_t S, int mode) {
    std::vector<float> y(static_cast<size_t>(S * e.gate.L.I), -7.0f);
    ref::expert_mlp(fn, e.view(), x.data(), y.data(), S, mode);
    return y;
}

} // namespace

TEST_CASE("the fused expert MLP is down(silu(gate(x)) * up(x)) with the shared SiLU", "[expert]") {
    for (int fmt : {COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4}) {
        const Expert e = random_expert(fmt, 96, 64, 10 + fmt);
        const std::vector<float> x = random_normal(3 * 96, 20 + fmt);
        for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
            INFO(format_name(fmt) << " mode " << mode);
            const std::vector<float> want = mlp_by_hand(e, x, 3, mode);
            CHECK(count_bit_differences(want.data(), mlp(ref::matmul, e, x, 3, mode).data(), want.size()) == 0);
            CHECK(count_bit_differences(want.data(), mlp(cpu::matmul, e, x, 3, mode).data(), want.size()) == 0);
        }
    }
}

TEST_CASE("the expert group combines routed rows in call order, each product rounded then added", "[expert]") {
    const int64_t D = 64, F = 32;
    const Expert a = random_expert(COLI_FORMAT_Q4, D, F, 1), b = random_expert(COLI_FORMAT_Q4, D, F, 5);
    // 3 tokens; expert a takes tokens {0, 2}, expert b takes tokens {2, 1, 0}.
    const int64_t rows[2] = {2, 3};
    const int64_t token[5] = {0, 2, 2, 1, 0};
    const float weight[5] = {0.7f, 0.3f, 0.55f, 1.0f, 0.3f};
    std::vector<float> x = random_normal(5 * D, 9);
    for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
        const std::vector<float> out_a = mlp_by_hand(a, {x.begin(), x.begin() + 2 * D}, 2, mode);
        const std::vector<float> out_b = mlp_by_hand(b, {x.begin() + 2 * D, x.end()}, 3, mode);
        std::vector<float> want(3 * D, 0.0f);
        for (int64_t r = 0; r < 5; ++r) {
            const float *out = r < 2 ? &out_a[r * D] : &out_b[(r - 2) * D];
            for (int64_t d = 0; d < D; ++d) want[token[r] * D + d] = want[token[r] * D + d] + weight[r] * out[d];
        }
        const ExpertView views[2] = {a.view(), b.view()};
        for (MatmulFn fn : {static_cast<MatmulFn>(ref::matmul), static_cast<MatmulFn>(cpu::matmul)}) {
            std::vector<float> y(3 * D, 99.0f); // overwritten, not accumulated into
            ref::expert_group(fn, views, 2, rows, x.data(), token, weight, y.data(), 3, mode);
            CHECK(count_bit_differences(want.data(), y.data(), want.size()) == 0);
        }
    }
}

TEST_CASE("an expert group without routing equals the experts' own outputs, empty experts allowed", "[expert]") {
    const int64_t D = 48, F = 24;
    const Expert a = random_expert(COLI_FORMAT_G4, D, F, 3), b = random_expert(COLI_FORMAT_G4, D, F, 7);
    const int64_t rows[3] = {1, 0, 2};
    const std::vector<float> x = random_normal(3 * D, 4);
    const ExpertView views[3] = {a.view(), b.view(), b.view()};
    std::vector<float> y(3 * D);
    ref::expert_group(cpu::matmul, views, 3, rows, x.data(), nullptr, nullptr, y.data(), 3, COLI_NUMERICS_EXACT);
    const std::vector<float> ya = mlp_by_hand(a, {x.begin(), x.begin() + D}, 1, COLI_NUMERICS_EXACT);
    const std::vector<float> yb = mlp_by_hand(b, {x.begin() + D, x.end()}, 2, COLI_NUMERICS_EXACT);
    CHECK(std::equal(ya.begin(), ya.end(), y.begin()));
    CHECK(std::equal(yb.begin(), yb.end(), y.begin() + D));
}
