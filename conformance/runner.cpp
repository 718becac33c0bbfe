#include "runner.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace coli::conformance {

void Recorder::record(const Context &ctx, const std::string &family, const std::string &name, json params, json metrics,
                      const std::string &status, double ms, const std::string &reason) {
    json c = {{"family", family},
              {"name", name},
              {"device", ctx.device},
              {"params", std::move(params)},
              {"status", status},
              {"metrics", std::move(metrics)},
              {"duration_ms", ms}};
    if (!reason.empty()) c["reason"] = reason;
    std::printf("%-7s %-10s %-3s %-46s %s%s\n", status.c_str(), family.c_str(),
                ctx.device == COLI_DEVICE_CPU ? "cpu" : ("g" + std::to_string(ctx.device)).c_str(), name.c_str(),
                c["metrics"].dump().substr(0, 110).c_str(), reason.empty() ? "" : ("  (" + reason + ")").c_str());
    cases_.push_back(std::move(c));
    if (status == "ok") ++passed_;
    else if (status == "skipped") ++skipped_;
    else ++failed_;
}

const std::vector<Family> &families() {
    static const std::vector<Family> list = {
        {"matmul", "every format x numerics mode x shape against the CPU reference", run_matmul},
        {"invariance", "rows of an S-row exact call equal the same rows computed alone", run_invariance},
        {"expert", "fused expert MLP, expert group, async issue/take, tensor_update", run_expert},
        {"placement", "expert-tier resident set, budget clamp, multi-device assignment", run_placement},
        {"fallback", "rejected uploads, injected faults, fallback results", run_fallback},
        {"mtp", "speculative decoding on a synthetic MoE decoder: acceptance and token agreement", run_mtp},
    };
    return list;
}

json exact_metrics(const std::vector<float> &want, const std::vector<float> &got) {
    size_t diff = 0;
    for (size_t k = 0; k < want.size(); ++k) diff += std::memcmp(&want[k], &got[k], sizeof(float)) != 0;
    return {{"outputs", want.size()}, {"bit_identical", diff == 0}, {"differing_outputs", diff}};
}

json float_metrics(const std::vector<double> &exact, const std::vector<float> &got, const std::vector<float> &ref) {
    double num = 0, den = 0, max_abs = 0, max_rel = 0;
    size_t diff = 0;
    for (size_t k = 0; k < exact.size(); ++k) {
        const double d = std::fabs(static_cast<double>(got[k]) - exact[k]);
        num += d * d;
        den += exact[k] * exact[k];
        max_abs = std::max(max_abs, d);
        if (exact[k] != 0) max_rel = std::max(max_rel, d / std::fabs(exact[k]));
        diff += std::memcmp(&ref[k], &got[k], sizeof(float)) != 0;
    }
    return {{"outputs", exact.size()}, {"nmse", den > 0 ? num / den : num}, {"max_abs_error", max_abs},
            {"max_rel_error", max_rel}, {"differing_from_cpu_reference", diff}};
}

} // namespace coli::conformance
