// Family "expert": the fused expert MLP, the expert group (synchronous and the async issue/take
// pair; a decode step's one-token group, which a GPU runs with its down projections and combine in
// one launch, kernels_matvec_expert.cuh) and tensor_update, through the C API against src/ref/expert_ref.cpp. Exact mode must be
// bit-identical; float mode matches the CPU bits on the CPU and stays within NMSE on a GPU.
#include "ref/expert_ref.h"
#include "ref/matmul_ref.h"
#include "registry.h"
#include "runner.h"
#include "testing/test_data.h"

namespace coli::conformance {

namespace {

using namespace coli::testing;

struct Model {
    std::vector<Quantized> mats; // 3 per expert
    std::vector<coli_expert> experts;
    std::vector<ExpertView> views;
    bool ok = true;
    ~Model() {
        for (coli_expert &e : experts) {
            for (coli_tensor t : {e.gate, e.up, e.down}) {
                if (t) coli_tensor_free(t);
            }
        }
    }
};

void build(Model &m, int fmt, int64_t D, int64_t F, int n, int device, uint64_t seed) {
    const int64_t gs = fmt == COLI_FORMAT_G4 ? 64 : 0;
    for (int e = 0; e < n; ++e) {
        m.mats.push_back(random_quantized(fmt, F, D, gs, seed + 3 * e));
        m.mats.push_back(random_quantized(fmt, F, D, gs, seed + 3 * e + 1));
        m.mats.push_back(random_quantized(fmt, D, F, gs, seed + 3 * e + 2));
    }
    for (int e = 0; e < n; ++e) {
        coli_expert ex{nullptr, nullptr, nullptr};
        coli_tensor *slots[3] = {&ex.gate, &ex.up, &ex.down};
        for (int k = 0; k < 3; ++k) {
            const Quantized &q = m.mats[3 * e + k];
            m.ok = m.ok && coli_tensor_upload(slots[k], fmt, q.L.O, q.L.I, gs, q.weights.data(), q.scales.data(), device) == COLI_OK;
        }
        m.experts.push_back(ex);
        m.views.push_back({m.mats[3 * e].view(), m.mats[3 * e + 1].view(), m.mats[3 * e + 2].view()});
    }
}

// Exact: identical bits. Float: identical bits on the CPU, NMSE against the CPU's float result on a GPU.
bool judge(const Context &ctx, int mode, const std::vector<float> &want, const std::vector<float> &got, json *m) {
    *m = exact_metrics(want, got);
    if (mode == COLI_NUMERICS_EXACT || !ctx.is_gpu()) return (*m)["bit_identical"].get<bool>();
    const double e = nmse(std::vector<double>(want.begin(), want.end()), got.data());
    *m = {{"outputs", want.size()}, {"differing_from_cpu_reference", (*m)["differing_outputs"]}, {"nmse_vs_cpu_float", e}};
    return e < std::max(1e-6, ctx.float_bound());
}

} // namespace

void run_expert(const Context &ctx, Recorder &r) {
    const int64_t D = ctx.quick ? 256 : 1024, F = ctx.quick ? 128 : 512; // the engine's bench fixture sizes
    const int n_experts = ctx.quick ? 8 : 32, top_k = ctx.quick ? 4 : 8, tokens = 4;
    for (int fmt : {COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4}) {
        Model md;
        build(md, fmt, D, F, n_experts, ctx.device, ctx.seed + 100 * fmt);
        const json base = {{"format", format_name(fmt)}, {"D", D}, {"F", F}, {"experts", n_experts}, {"tokens", tokens},
                           {"top_k", top_k}};
        if (!md.ok) {
            r.record(ctx, "expert", std::string(format_name(fmt)) + " upload", base, json::object(), "fail", 0, coli_last_error());
            continue;
        }
        // Routing: token t goes to experts (t + 3j) % n for j < top_k, weights 1/(j+2).
        std::vector<int64_t> rows(n_experts, 0), token;
        std::vector<float> weight;
        for (int e = 0; e < n_experts; ++e)
            for (int64_t t = 0; t < tokens; ++t)
                for (int j = 0; j < top_k; ++j)
                    if ((t + 3 * j) % n_experts == e) {
                        ++rows[e];
                        token.push_back(t);
                        weight.push_back(1.0f / static_cast<float>(j + 2));
                    }
        const int64_t total = static_cast<int64_t>(token.size());
        const std::vector<float> x = random_normal(static_cast<size_t>(total * D), ctx.seed + 7 + fmt);
        for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
            json params = base;
            params["numerics"] = mode == COLI_NUMERICS_EXACT ? "exact" : "float";
            const std::string tag = std::string(format_name(fmt)) + (mode == COLI_NUMERICS_EXACT ? " exact" : " float");
            std::vector<float> want(static_cast<size_t>(tokens * D));
            ref::expert_group(ref::matmul, md.views.data(), n_experts, rows.data(), x.data(), token.data(), weight.data(),
                              want.data(), tokens, mode);
            json m;
            {   // the expert group
                std::vector<float> got(want.size(), std::nanf(""));
                Timer tm;
                const coli_status st = coli_expert_group(md.experts.data(), n_experts, rows.data(), x.data(), token.data(),
                                                         weight.data(), got.data(), tokens, mode);
                const bool ok = st == COLI_OK && judge(ctx, mode, want, got, &m);
                r.record(ctx, "expert", tag + " group", params, m, ok ? "ok" : "fail", tm.ms(), st ? coli_last_error() : "");
            }
            {   // the async pair: issue, then take
                std::vector<float> got(want.size(), std::nanf(""));
                Timer tm;
                coli_group_ticket ticket = nullptr;
                coli_status st = coli_expert_group_issue(md.experts.data(), n_experts, rows.data(), x.data(), token.data(),
                                                         weight.data(), tokens, mode, &ticket);
                if (st == COLI_OK) st = coli_expert_group_take(ticket, got.data());
                const bool ok = st == COLI_OK && judge(ctx, mode, want, got, &m);
                r.record(ctx, "expert", tag + " group issue/take", params, m, ok ? "ok" : "fail", tm.ms(),
                         st ? coli_last_error() : "");
            }
            {   // decode: one token to top_k experts (its row repeated per expert, as an engine passes it)
                std::vector<int64_t> d_rows(n_experts, 0), d_token;
                std::vector<float> d_weight, d_x;
                const std::vector<float> one = random_normal(static_cast<size_t>(D), ctx.seed + 11 + fmt);
                for (int e = 0; e < n_experts; ++e)
                    for (int j = 0; j < top_k; ++j)
                        if ((3 * j) % n_experts == e) {
                            d_rows[e] = 1;
                            d_token.push_back(0);
                            d_weight.push_back(1.0f / static_cast<float>(j + 2));
                            d_x.insert(d_x.end(), one.begin(), one.end());
                        }
                std::vector<float> dw(static_cast<size_t>(D)), dg(dw.size(), std::nanf(""));
                ref::expert_group(ref::matmul, md.views.data(), n_experts, d_rows.data(), d_x.data(), d_token.data(),
                                  d_weight.data(), dw.data(), 1, mode);
                Timer tm;
                const coli_status st = coli_expert_group(md.experts.data(), n_experts, d_rows.data(), d_x.data(),
                                                         d_token.data(), d_weight.data(), dg.data(), 1, mode);
                const bool ok = st == COLI_OK && judge(ctx, mode, dw, dg, &m);
                json p = params;
                p["tokens"] = 1;
                r.record(ctx, "expert", tag + " decode group", p, m, ok ? "ok" : "fail", tm.ms(), st ? coli_last_error() : "");
            }
            {   // the fused MLP of the first expert on its rows
                std::vector<float> mw(static_cast<size_t>(rows[0] * D)), mg(mw.size(), std::nanf(""));
                ref::expert_mlp(ref::matmul, md.views[0], x.data(), mw.data(), rows[0], mode);
                Timer tm;
                const coli_status st = coli_expert_mlp(&md.experts[0], mg.data(), x.data(), rows[0], mode);
                const bool ok = st == COLI_OK && judge(ctx, mode, mw, mg, &m);
                json p = params;
                p["S"] = rows[0];
                r.record(ctx, "expert", tag + " mlp", p, m, ok ? "ok" : "fail", tm.ms(), st ? coli_last_error() : "");
            }
        }
        {   // tensor_update: new contents in the same slot give the new results
            const Quantized fresh = random_quantized(fmt, F, D, fmt == COLI_FORMAT_G4 ? 64 : 0, ctx.seed + 999);
            coli_stats before{0, 0}, after{0, 0};
            coli_stats_get(ctx.device, &before);
            Timer tm;
            coli_status st = coli_tensor_update(md.experts[0].gate, fresh.weights.data(), fresh.scales.data());
            coli_stats_get(ctx.device, &after);
            std::vector<float> want(static_cast<size_t>(3 * F)), got(want.size(), std::nanf(""));
            ref::matmul(fresh.view(), x.data(), want.data(), 3, COLI_NUMERICS_EXACT);
            if (st == COLI_OK) st = coli_matmul(md.experts[0].gate, got.data(), x.data(), 3, COLI_NUMERICS_EXACT);
            json m = exact_metrics(want, got);
            m["stats_unchanged"] = before.tensors == after.tensors && before.bytes == after.bytes;
            const bool ok = st == COLI_OK && m["bit_identical"].get<bool>() && m["stats_unchanged"].get<bool>();
            r.record(ctx, "expert", std::string(format_name(fmt)) + " tensor_update", base, m, ok ? "ok" : "fail", tm.ms(),
                     st ? coli_last_error() : "");
        }
    }
}

} // namespace coli::conformance
