// Family "fallback": rejected uploads leave the counters alone (every device); on a GPU, a fault
// injected at each device operation of an upload + matmul sequence in turn returns a clean error,
// keeps the counters and leaves no sticky state; and the expert tier falls back to the CPU with
// correct results when an upload fails.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gpu/gpu_backend.h"
#include "ref/matmul_ref.h"
#include "runner.h"
#include "testing/test_data.h"

namespace coli::conformance {

namespace {

bool same(const coli_stats &a, const coli_stats &b) { return a.tensors == b.tensors && a.bytes == b.bytes; }

coli_stats stats(int device) {
    coli_stats s{0, 0};
    coli_stats_get(device, &s);
    return s;
}

} // namespace

void run_fallback(const Context &ctx, Recorder &r) {
    using namespace coli::testing;
    const Quantized q = random_quantized(COLI_FORMAT_Q4, 64, 256, 0, ctx.seed);
    const std::vector<float> x = random_normal(2 * 256, ctx.seed + 1);
    std::vector<float> want(2 * 64);
    ref::matmul(q.view(), x.data(), want.data(), 2, COLI_NUMERICS_EXACT);
    {   // rejected uploads
        Timer tm;
        const coli_stats before = stats(ctx.device);
        coli_tensor t = nullptr;
        int rejected = 0;
        rejected += coli_tensor_upload(&t, 9, 64, 256, 0, q.weights.data(), q.scales.data(), ctx.device) != COLI_OK;
        rejected += coli_tensor_upload(&t, COLI_FORMAT_Q4, 64, 256, 0, nullptr, q.scales.data(), ctx.device) != COLI_OK;
        rejected += coli_tensor_upload(&t, COLI_FORMAT_Q4, 64, 256, 0, q.weights.data(), nullptr, ctx.device) != COLI_OK;
        rejected += coli_tensor_upload(&t, COLI_FORMAT_Q4, 64, 256, 8, q.weights.data(), q.scales.data(), ctx.device) != COLI_OK;
        rejected += coli_tensor_upload(&t, COLI_FORMAT_Q8, INT32_MAX, 1 << 20, 0, q.weights.data(), q.scales.data(),
                                       ctx.device) != COLI_OK; // far beyond any memory
        const bool unchanged = same(before, stats(ctx.device));
        r.record(ctx, "fallback", "rejected uploads keep the counters",
                 {{"cases", {"bad format", "null weights", "null scales", "gs for Q4", "2 PiB"}}},
                 {{"rejected", rejected}, {"stats_unchanged", unchanged}}, rejected == 5 && unchanged ? "ok" : "fail", tm.ms());
    }
    if (!ctx.is_gpu()) {
        r.skip(ctx, "fallback", "injected faults at every device operation", "fault injection needs a GPU");
        r.skip(ctx, "fallback", "expert tier: upload failure falls back to the CPU", "needs a GPU");
        return;
    }
    {   // a fault at each device operation of upload + matmul + free, in turn
        Timer tm;
        int faults = 0, clean = 0, sequences = 0;
        for (int n = 0; n < 200; ++n) {
            ++sequences;
            gpu::inject_fault_after(n);
            bool fault = false, this_clean = true;
            const coli_stats before = stats(ctx.device);
            coli_tensor t = nullptr;
            coli_status st = coli_tensor_upload(&t, COLI_FORMAT_Q4, 64, 256, 0, q.weights.data(), q.scales.data(), ctx.device);
            if (st != COLI_OK) {
                fault = true;
                this_clean = std::string(coli_last_error()).find("injected fault") != std::string::npos &&
                             same(before, stats(ctx.device));
                st = coli_tensor_upload(&t, COLI_FORMAT_Q4, 64, 256, 0, q.weights.data(), q.scales.data(), ctx.device);
            }
            std::vector<float> y(want.size(), std::nanf(""));
            if (st == COLI_OK) {
                st = coli_matmul(t, y.data(), x.data(), 2, COLI_NUMERICS_EXACT);
                if (st != COLI_OK) {
                    fault = true;
                    this_clean = this_clean && std::string(coli_last_error()).find("injected fault") != std::string::npos;
                    st = coli_matmul(t, y.data(), x.data(), 2, COLI_NUMERICS_EXACT); // no sticky error
                }
            }
            this_clean = this_clean && st == COLI_OK && exact_metrics(want, y)["bit_identical"].get<bool>();
            if (t) coli_tensor_free(t);
            faults += fault;
            clean += fault && this_clean;
            if (!fault) break; // the fault fell past the sequence: every operation has been tried
        }
        gpu::inject_fault_after(-1);
        r.record(ctx, "fallback", "injected faults at every device operation",
                 {{"sequence", "upload Q4 64x256, exact matmul S=2"}},
                 {{"faults_injected", faults}, {"clean_errors_and_recovery", clean}, {"sequences", sequences}},
                 faults > 5 && clean == faults ? "ok" : "fail", tm.ms());
    }
    {   // the tier: an upload fails, that expert runs on the CPU, results unchanged
        const std::string store = ctx.work_dir + "/coli-conformance-fallback.safetensors", pin = store + ".pin";
        Timer tm;
        if (coli_store_write_random(store.c_str(), 1, 4, 128, 64, COLI_FORMAT_Q4, 0, ctx.seed) != COLI_OK) {
            r.skip(ctx, "fallback", "expert tier: upload failure falls back to the CPU", coli_last_error());
            return;
        }
        std::ofstream(pin) << "0 1 10\n0 2 5\n";
        for (const char *v : {"PIN_FILL", "CUDA_RELEASE_HOST", "CUDA_DENSE", "CUDA_RESERVE_GB"}) unsetenv(v);
        setenv("CUDA_EXPERT_GB", "auto", 1);
        setenv("PIN", pin.c_str(), 1);
        const int experts[2] = {1, 2};
        const int64_t rows[2] = {2, 1};
        const std::vector<float> tx = random_normal(3 * 128, ctx.seed + 5);
        std::vector<float> cpu_y(3 * 128), tier_y(3 * 128, std::nanf(""));
        // Reference: the same tier with nothing on the GPU.
        unsetenv("CUDA_EXPERT_GB");
        coli_tier cpu_tier = nullptr, tier = nullptr;
        coli_status st = coli_tier_open(store.c_str(), &cpu_tier);
        if (st == COLI_OK) st = coli_tier_forward(cpu_tier, 0, experts, 2, rows, tx.data(), nullptr, nullptr, cpu_y.data(), 3, 1);
        if (cpu_tier) coli_tier_close(cpu_tier);
        setenv("CUDA_EXPERT_GB", "auto", 1);
        gpu::inject_fault_after(1); // the first expert's second upload operation fails
        if (st == COLI_OK) st = coli_tier_open(store.c_str(), &tier);
        coli_tier_info in{};
        if (st == COLI_OK) {
            coli_tier_info_get(tier, &in);
            st = coli_tier_forward(tier, 0, experts, 2, rows, tx.data(), nullptr, nullptr, tier_y.data(), 3, 1);
            coli_tier_close(tier);
        }
        json m = exact_metrics(cpu_y, tier_y);
        m["fallbacks"] = in.fallbacks;
        m["gpu_experts"] = in.gpu_experts;
        const bool ok = st == COLI_OK && in.fallbacks == 1 && in.gpu_experts == 1 && m["bit_identical"].get<bool>();
        if (st == COLI_ERR_UNSUPPORTED) {
            r.skip(ctx, "fallback", "expert tier: upload failure falls back to the CPU", coli_last_error());
        } else {
            r.record(ctx, "fallback", "expert tier: upload failure falls back to the CPU",
                     {{"store", "1 layer x 4 Q4 experts, D 128, F 64"}, {"profile", "2 hot experts"}}, m, ok ? "ok" : "fail",
                     tm.ms(), st == COLI_OK ? "" : coli_last_error());
        }
        for (const char *v : {"CUDA_EXPERT_GB", "PIN"}) unsetenv(v);
        std::remove(store.c_str());
        std::remove(pin.c_str());
    }
}

} // namespace coli::conformance
