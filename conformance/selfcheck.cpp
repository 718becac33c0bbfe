// coli-selfcheck: the project's main job for now. It runs every case of the table below through
// the public C API on a device, and every registered host variant (src/registry.h), and compares
// each against the CPU reference: exact mode must match bit for bit, float mode must stay within
// the documented NMSE of double precision (docs/numerics.md). Prints one line per case, writes a
// JSON summary with --json, exits 1 on any failure.
//
//   coli-selfcheck [--device N] [--quick] [--json FILE] [--seed N] [--list]
//
// --device N runs the API cases on GPU N (the CPU by default); on a GPU, float-mode cases are
// judged by the NMSE bound alone (GPU kernels sum in another order). Exits 77 when the GPU
// cannot be started (no GPU backend, driver or device).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coli/coli.h"
#include "ref/expert_ref.h"
#include "ref/matmul_ref.h"
#include "registry.h"
#include "testing/test_data.h"

using namespace coli;
using namespace coli::testing;
using json = nlohmann::json;

namespace {

// Float mode contract: NMSE against double precision over the same dequantized weights.
constexpr double kFloatMaxNmse = 1e-10;

struct Shape {
    int fmt;
    int64_t O, I, gs, S;
    bool quick; // part of --quick (meson test); the others are the GLM-5 and prefill sizes
};

const Shape kMatmulShapes[] = {
    // decode, odd sizes, partial groups
    {COLI_FORMAT_F32, 37, 101, 0, 1, true},
    {COLI_FORMAT_Q8, 37, 101, 0, 3, true},
    {COLI_FORMAT_Q4, 37, 101, 0, 1, true},
    {COLI_FORMAT_Q2, 37, 101, 0, 4, true},
    {COLI_FORMAT_G4, 31, 100, 32, 3, true},
    {COLI_FORMAT_G4, 17, 1000, 128, 2, true},
    // GLM-5 expert shapes at decode: up/gate [2048 x 6144] and down [6144 x 2048]
    {COLI_FORMAT_Q8, kGlm5ExpertIntermediate, kGlm5Hidden, 0, 1, false},
    {COLI_FORMAT_Q4, kGlm5ExpertIntermediate, kGlm5Hidden, 0, 1, false},
    {COLI_FORMAT_Q2, kGlm5ExpertIntermediate, kGlm5Hidden, 0, 1, false},
    {COLI_FORMAT_G4, kGlm5ExpertIntermediate, kGlm5Hidden, 128, 1, false},
    {COLI_FORMAT_Q4, kGlm5Hidden, kGlm5ExpertIntermediate, 0, 1, false},
    {COLI_FORMAT_G4, kGlm5Hidden, kGlm5ExpertIntermediate, 64, 1, false},
    // prefill-like rows
    {COLI_FORMAT_Q4, 512, 1024, 0, 64, false},
    {COLI_FORMAT_G4, 256, 1024, 32, 128, false},
    {COLI_FORMAT_F32, 256, 512, 0, 64, false},
};

struct Metrics {
    size_t outputs = 0, bit_differences = 0;
    bool has_double = false; // nmse / max_abs / max_rel were measured against double precision
    double nmse = 0, max_abs = 0, max_rel = 0;
};

Metrics compare(const std::vector<float> &want, const std::vector<float> &got, const std::vector<double> *exact) {
    Metrics m;
    m.outputs = want.size();
    m.has_double = exact != nullptr;
    double num = 0, den = 0;
    for (size_t k = 0; k < want.size(); ++k) {
        m.bit_differences += std::memcmp(&want[k], &got[k], sizeof(float)) != 0;
        if (exact) {
            const double d = std::fabs(static_cast<double>(got[k]) - (*exact)[k]);
            num += d * d;
            den += (*exact)[k] * (*exact)[k];
            m.max_abs = std::max(m.max_abs, d);
            if ((*exact)[k] != 0) m.max_rel = std::max(m.max_rel, d / std::fabs((*exact)[k]));
        }
    }
    m.nmse = den > 0 ? num / den : num;
    return m;
}

struct Runner {
    int device = COLI_DEVICE_CPU;
    double gpu_float_bound = kFloatMaxNmse; // looser when the W4A16 tensor-core path may run
    json cases = json::array();
    int passed = 0, failed = 0;

    void record(const std::string &family, const std::string &variant, const std::string &params, int mode,
                const Metrics &m, bool ok, double ms, const std::string &note = "") {
        const char *mode_name = mode == COLI_NUMERICS_EXACT ? "exact" : "float";
        std::printf("%-5s %-10s %-10s %-6s %-44s", ok ? "ok" : "FAIL", family.c_str(), variant.c_str(), mode_name,
                    params.c_str());
        if (mode == COLI_NUMERICS_EXACT || !m.has_double) {
            std::printf(" bit-identical %s (%zu of %zu differ)", m.bit_differences == 0 ? "yes" : "NO",
                        m.bit_differences, m.outputs);
        } else {
            std::printf(" nmse %.2e  max_abs %.2e  bits differ %zu/%zu", m.nmse, m.max_abs, m.bit_differences,
                        m.outputs);
        }
        std::printf("  %.1f ms%s%s\n", ms, note.empty() ? "" : "  ", note.c_str());
        cases.push_back({{"family", family},
                         {"variant", variant},
                         {"params", params},
                         {"numerics", mode_name},
                         {"status", ok ? "ok" : "fail"},
                         {"outputs", m.outputs},
                         {"bit_differences", m.bit_differences},
                         {"bit_identical", m.bit_differences == 0},
                         {"time_ms", ms}});
        if (m.has_double) {
            cases.back()["nmse_vs_double"] = m.nmse;
            cases.back()["max_abs_vs_double"] = m.max_abs;
            cases.back()["max_rel_vs_double"] = m.max_rel;
        }
        ok ? ++passed : ++failed;
    }
};

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string shape_params(const Shape &c) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s O=%lld I=%lld gs=%lld S=%lld", format_name(c.fmt), (long long)c.O,
                  (long long)c.I, (long long)c.gs, (long long)c.S);
    return buf;
}

// A case passes when exact mode is bit-identical to the reference and float mode is within the
// NMSE contract; CPU variants must also match the reference's float bits (they keep its order).
bool passes(int mode, const Metrics &vs_ref, const Metrics &vs_double, bool same_order, double float_bound) {
    if (mode == COLI_NUMERICS_EXACT) return vs_ref.bit_differences == 0;
    return vs_double.nmse < float_bound && (!same_order || vs_ref.bit_differences == 0);
}

void run_matmul(Runner &r, const Shape &c, uint64_t seed) {
    const Quantized m = random_quantized(c.fmt, c.O, c.I, c.gs, seed);
    const std::vector<float> x = random_normal(static_cast<size_t>(c.S * c.I), seed + 1);
    const std::vector<double> exact = matmul_double(m, x, c.S);
    coli_tensor t = nullptr;
    if (coli_tensor_upload(&t, c.fmt, c.O, c.I, c.gs, m.weights.data(), m.scales.empty() ? nullptr : m.scales.data(),
                           r.device) != COLI_OK) {
        r.record("matmul", "api", shape_params(c), COLI_NUMERICS_FLOAT, {}, false, 0, coli_last_error());
        return;
    }
    for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
        if (mode == COLI_NUMERICS_EXACT && c.fmt == COLI_FORMAT_F32) continue;
        std::vector<float> want(static_cast<size_t>(c.S * c.O));
        auto t0 = std::chrono::steady_clock::now();
        ref::matmul(m.view(), x.data(), want.data(), c.S, mode);
        const double ref_ms = elapsed_ms(t0);
        // Every registered host variant, then the public API on the selected device.
        for (const MatmulVariant &v : matmul_variants()) {
            if (v.is_reference) {
                const Metrics vs_double = compare(want, want, &exact);
                const bool ok = mode == COLI_NUMERICS_EXACT || vs_double.nmse < kFloatMaxNmse;
                r.record("matmul", v.name, shape_params(c), mode, vs_double, ok, ref_ms);
                continue;
            }
            std::vector<float> got(want.size(), std::nanf(""));
            t0 = std::chrono::steady_clock::now();
            v.fn(m.view(), x.data(), got.data(), c.S, mode);
            const double ms = elapsed_ms(t0);
            const Metrics vs_ref = compare(want, got, nullptr), vs_double = compare(want, got, &exact);
            Metrics shown = vs_double;
            shown.bit_differences = vs_ref.bit_differences;
            r.record("matmul", v.name, shape_params(c), mode, shown, passes(mode, vs_ref, vs_double, true, kFloatMaxNmse), ms);
        }
        std::vector<float> got(want.size(), std::nanf(""));
        t0 = std::chrono::steady_clock::now();
        const coli_status st = coli_matmul(t, got.data(), x.data(), c.S, mode);
        const double ms = elapsed_ms(t0);
        const Metrics vs_ref = compare(want, got, nullptr), vs_double = compare(want, got, &exact);
        Metrics shown = vs_double;
        shown.bit_differences = vs_ref.bit_differences;
        const bool cpu = r.device == COLI_DEVICE_CPU;
        r.record("matmul", "api", shape_params(c), mode, shown,
                 st == COLI_OK && passes(mode, vs_ref, vs_double, cpu, cpu ? kFloatMaxNmse : r.gpu_float_bound), ms,
                 st == COLI_OK ? "" : coli_last_error());
    }
    coli_tensor_free(t);
}

// Exact: identical bits everywhere. Float: identical bits on the CPU; on a GPU within 1e-6 NMSE
// of the CPU reference's float result (the sums run in another order through three matmuls).
bool expert_ok(const Runner &r, int mode, const std::vector<float> &want, const std::vector<float> &got, const Metrics &m) {
    if (mode == COLI_NUMERICS_EXACT || r.device == COLI_DEVICE_CPU) return m.bit_differences == 0;
    return nmse(std::vector<double>(want.begin(), want.end()), got.data()) < std::max(1e-6, r.gpu_float_bound);
}

// Fused expert MLP and an expert group (top-k routing of a few tokens) through the API.
void run_expert(Runner &r, int fmt, int64_t D, int64_t F, int n_experts, int64_t tokens, int top_k, uint64_t seed) {
    const int64_t gs = fmt == COLI_FORMAT_G4 ? 64 : 0;
    std::vector<Quantized> mats;
    std::vector<coli_expert> experts;
    std::vector<ExpertView> views;
    for (int e = 0; e < n_experts; ++e) {
        mats.push_back(random_quantized(fmt, F, D, gs, seed + 3 * e));
        mats.push_back(random_quantized(fmt, F, D, gs, seed + 3 * e + 1));
        mats.push_back(random_quantized(fmt, D, F, gs, seed + 3 * e + 2));
    }
    for (int e = 0; e < n_experts; ++e) {
        coli_tensor t[3];
        for (int k = 0; k < 3; ++k) {
            const Quantized &m = mats[3 * e + k];
            coli_tensor_upload(&t[k], fmt, m.L.O, m.L.I, gs, m.weights.data(), m.scales.data(), r.device);
        }
        experts.push_back({t[0], t[1], t[2]});
        views.push_back({mats[3 * e].view(), mats[3 * e + 1].view(), mats[3 * e + 2].view()});
    }
    // Routing: token t goes to experts (t + j * 3) % n_experts for j < top_k, weights 1/(j+2).
    std::vector<int64_t> rows(n_experts, 0), row_token;
    std::vector<float> row_weight;
    for (int e = 0; e < n_experts; ++e) {
        for (int64_t t = 0; t < tokens; ++t) {
            for (int j = 0; j < top_k; ++j) {
                if ((t + j * 3) % n_experts == e) {
                    ++rows[e];
                    row_token.push_back(t);
                    row_weight.push_back(1.0f / static_cast<float>(j + 2));
                }
            }
        }
    }
    const int64_t total = static_cast<int64_t>(row_token.size());
    const std::vector<float> x = random_normal(static_cast<size_t>(total * D), seed + 1000);
    char params[96];
    std::snprintf(params, sizeof params, "%s D=%lld F=%lld experts=%d tokens=%lld top%d", format_name(fmt),
                  (long long)D, (long long)F, n_experts, (long long)tokens, top_k);
    for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
        std::vector<float> want(static_cast<size_t>(tokens * D)), got(want.size(), std::nanf(""));
        ref::expert_group(ref::matmul, views.data(), n_experts, rows.data(), x.data(), row_token.data(),
                          row_weight.data(), want.data(), tokens, mode);
        auto t0 = std::chrono::steady_clock::now();
        coli_status st = coli_expert_group(experts.data(), n_experts, rows.data(), x.data(), row_token.data(),
                                           row_weight.data(), got.data(), tokens, mode);
        Metrics m = compare(want, got, nullptr);
        r.record("expert", "api_group", params, mode, m, st == COLI_OK && expert_ok(r, mode, want, got, m), elapsed_ms(t0),
                 st == COLI_OK ? "" : coli_last_error());
        std::vector<float> mlp_want(static_cast<size_t>(rows[0] * D)), mlp_got(mlp_want.size(), std::nanf(""));
        ref::expert_mlp(ref::matmul, views[0], x.data(), mlp_want.data(), rows[0], mode);
        t0 = std::chrono::steady_clock::now();
        st = coli_expert_mlp(&experts[0], mlp_got.data(), x.data(), rows[0], mode);
        m = compare(mlp_want, mlp_got, nullptr);
        r.record("expert", "api_mlp", params, mode, m, st == COLI_OK && expert_ok(r, mode, mlp_want, mlp_got, m),
                 elapsed_ms(t0), st == COLI_OK ? "" : coli_last_error());
    }
    for (const coli_expert &e : experts) {
        coli_tensor_free(e.gate);
        coli_tensor_free(e.up);
        coli_tensor_free(e.down);
    }
}

// Batch invariance: every row of an S-row exact call equals the same row computed alone.
void run_invariance(Runner &r, int fmt, uint64_t seed) {
    const int64_t O = 96, I = 320, S = 8, gs = fmt == COLI_FORMAT_G4 ? 32 : 0;
    const Quantized m = random_quantized(fmt, O, I, gs, seed);
    const std::vector<float> x = random_normal(static_cast<size_t>(S * I), seed + 1);
    coli_tensor t = nullptr;
    coli_tensor_upload(&t, fmt, O, I, gs, m.weights.data(), m.scales.data(), r.device);
    std::vector<float> batch(static_cast<size_t>(S * O)), single(batch.size());
    auto t0 = std::chrono::steady_clock::now();
    coli_status st = coli_matmul(t, batch.data(), x.data(), S, COLI_NUMERICS_EXACT);
    for (int64_t s = 0; s < S && st == COLI_OK; ++s) {
        st = coli_matmul(t, single.data() + s * O, x.data() + s * I, 1, COLI_NUMERICS_EXACT);
    }
    const Metrics mt = compare(batch, single, nullptr);
    char params[64];
    std::snprintf(params, sizeof params, "%s O=%lld I=%lld S=%lld vs 1-row", format_name(fmt), (long long)O,
                  (long long)I, (long long)S);
    r.record("invariance", "api", params, COLI_NUMERICS_EXACT, mt, st == COLI_OK && mt.bit_differences == 0,
             elapsed_ms(t0));
    coli_tensor_free(t);
}

} // namespace

int main(int argc, char **argv) {
    bool quick = false, list = false;
    int device = COLI_DEVICE_CPU;
    const char *json_path = nullptr;
    uint64_t seed = 20261202;
    for (int k = 1; k < argc; ++k) {
        const std::string a = argv[k];
        if (a == "--quick") {
            quick = true;
        } else if (a == "--list") {
            list = true;
        } else if (a == "--json" && k + 1 < argc) {
            json_path = argv[++k];
        } else if (a == "--device" && k + 1 < argc) {
            device = std::atoi(argv[++k]);
        } else if (a == "--seed" && k + 1 < argc) {
            seed = std::strtoull(argv[++k], nullptr, 10);
        } else {
            std::fprintf(stderr, "usage: %s [--device N] [--quick] [--json FILE] [--seed N] [--list]\n", argv[0]);
            return 2;
        }
    }
    if (list) {
        for (const Shape &c : kMatmulShapes) std::printf("matmul %s%s\n", shape_params(c).c_str(), c.quick ? " (quick)" : "");
        for (const MatmulVariant &v : matmul_variants()) std::printf("variant %s: %s\n", v.name, v.description);
        return 0;
    }
    Runner r;
    r.device = device;
    coli_device_info info;
    const int devices[2] = {COLI_DEVICE_CPU, device};
    if (coli_init(devices, device == COLI_DEVICE_CPU ? 1 : 2) != COLI_OK) {
        std::fprintf(stderr, "coli-selfcheck: %s\n", coli_last_error());
        return device == COLI_DEVICE_CPU ? 1 : 77;
    }
    if (coli_device_info_get(r.device, &info) != COLI_OK) {
        std::fprintf(stderr, "coli-selfcheck: %s\n", coli_last_error());
        return 1;
    }
    const char *tc = std::getenv("COLI_CUDA_TC_W4A16");
    if (device != COLI_DEVICE_CPU && tc && std::string(tc) == "1") r.gpu_float_bound = 1e-4; // bfloat16 operands
    std::printf("colibri-gpu %s self-check on %s (%s, %s), GPU backend: %s, seed %llu%s\n", coli_version(),
                info.name, info.vendor, info.arch, coli_gpu_backend(), (unsigned long long)seed,
                quick ? ", quick" : "");
    for (size_t k = 0; k < sizeof kMatmulShapes / sizeof kMatmulShapes[0]; ++k) {
        if (!quick || kMatmulShapes[k].quick) run_matmul(r, kMatmulShapes[k], seed + k);
    }
    for (int fmt : {COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4}) {
        if (quick) {
            run_expert(r, fmt, 256, 128, 8, 3, 4, seed + 100 + fmt);
        } else {
            run_expert(r, fmt, 1024, 512, 32, 4, kGlm5TopK, seed + 100 + fmt); // the engine's bench fixture
        }
        run_invariance(r, fmt, seed + 200 + fmt);
    }
    coli_stats left{0, 0};
    coli_stats_get(COLI_DEVICE_ALL, &left);
    if (left.tensors != 0 || left.bytes != 0) {
        std::printf("FAIL  resident set not empty after freeing everything: %llu tensors, %llu bytes\n",
                    (unsigned long long)left.tensors, (unsigned long long)left.bytes);
        ++r.failed;
    }
    coli_shutdown();
    std::printf("%d passed, %d failed\n", r.passed, r.failed);
    if (json_path) {
        const json report = {{"tool", "coli-selfcheck"},
                             {"version", coli_version()},
                             {"gpu_backend", coli_gpu_backend()},
                             {"device", {{"id", info.device}, {"vendor", info.vendor}, {"name", info.name},
                                         {"arch", info.arch}, {"memory_bytes", info.memory_bytes}}},
                             {"seed", seed},
                             {"quick", quick},
                             {"float_max_nmse", kFloatMaxNmse},
                             {"passed", r.passed},
                             {"failed", r.failed},
                             {"cases", r.cases}};
        std::ofstream out(json_path);
        out << report.dump(2) << "\n";
        if (!out) {
            std::fprintf(stderr, "coli-selfcheck: cannot write %s\n", json_path);
            return 1;
        }
    }
    return r.failed == 0 ? 0 : 1;
}
