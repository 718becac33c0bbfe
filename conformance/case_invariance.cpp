// Family "invariance": the rows of an S-row exact call are bit-identical to the same rows
// computed in 1-row calls, so a speculative verify batch and single-token decode agree.
#include "runner.h"
#include "testing/test_data.h"

namespace coli::conformance {

void run_invariance(const Context &ctx, Recorder &r) {
    using namespace coli::testing;
    for (int fmt : {COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4}) {
        for (int64_t S : {int64_t(8), int64_t(40)}) {
            const int64_t O = 96, I = 320, gs = fmt == COLI_FORMAT_G4 ? 32 : 0;
            const Quantized q = random_quantized(fmt, O, I, gs, ctx.seed + fmt);
            const std::vector<float> x = random_normal(static_cast<size_t>(S * I), ctx.seed + 10 + fmt);
            coli_tensor t = nullptr;
            const json params = {{"format", format_name(fmt)}, {"O", O}, {"I", I}, {"gs", gs}, {"S", S}, {"numerics", "exact"}};
            const std::string name = std::string(format_name(fmt)) + " S=" + std::to_string(S) + " vs 1-row calls";
            if (coli_tensor_upload(&t, fmt, O, I, gs, q.weights.data(), q.scales.data(), ctx.device) != COLI_OK) {
                r.record(ctx, "invariance", name, params, json::object(), "fail", 0, coli_last_error());
                continue;
            }
            std::vector<float> batch(static_cast<size_t>(S * O)), single(batch.size());
            Timer tm;
            coli_status st = coli_matmul(t, batch.data(), x.data(), S, COLI_NUMERICS_EXACT);
            for (int64_t s = 0; s < S && st == COLI_OK; ++s) {
                st = coli_matmul(t, single.data() + s * O, x.data() + s * I, 1, COLI_NUMERICS_EXACT);
            }
            const json m = exact_metrics(single, batch);
            r.record(ctx, "invariance", name, params, m, st == COLI_OK && m["bit_identical"].get<bool>() ? "ok" : "fail",
                     tm.ms(), st == COLI_OK ? "" : coli_last_error());
            coli_tensor_free(t);
        }
    }
}

} // namespace coli::conformance
