// Family "placement": the expert tier's placement. On every device: the host policy on a known
// two-device setup (the same code the tier runs). On a GPU: a real tier over a generated store
// with a known budget and profile, recording the resident set per device and the budget clamp.
// Multi-device assignment needs two selected GPUs; with fewer it is recorded as skipped.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "runner.h"
#include "tier/placement.h"

namespace coli::conformance {

namespace {

const int kLayers = 2, kExperts = 8;
const int64_t kHidden = 128, kInter = 64;

struct TierFiles {
    std::string store, pin;
    bool ok = false;
    TierFiles(const Context &ctx, const char *tag) {
        store = ctx.work_dir + "/coli-conformance-" + tag + ".safetensors";
        pin = store + ".pin";
        ok = coli_store_write_random(store.c_str(), kLayers, kExperts, kHidden, kInter, COLI_FORMAT_Q4, 0, ctx.seed) == COLI_OK;
        std::ofstream(pin) << "# colibri pin profile v1\n0 5 900\n1 2 800\n0 1 700\n1 7 600\n";
    }
    ~TierFiles() {
        std::remove(store.c_str());
        std::remove(pin.c_str());
    }
};

void set_tier_env(const char *budget, const char *pin) {
    for (const char *v : {"CUDA_EXPERT_GB", "PIN", "PIN_FILL", "CUDA_RELEASE_HOST", "CUDA_DENSE", "CUDA_RESERVE_GB"}) unsetenv(v);
    if (budget) setenv("CUDA_EXPERT_GB", budget, 1);
    if (pin) setenv("PIN", pin, 1);
    setenv("CUDA_RESERVE_GB", "0", 1);
}

} // namespace

void run_placement(const Context &ctx, Recorder &r) {
    {   // The host policy on a known setup: two devices with unequal free memory.
        using namespace coli::tier;
        const uint64_t GB = 1000000000ull;
        Budget b;
        b.reserve = 2 * GB;
        b.requested = 100 * GB;
        std::vector<ExpertKey> order;
        for (int e = 0; e < 10; ++e) order.push_back({0, e});
        Timer tm;
        const Plan p = plan_placement({{0, 10 * GB, 1 * GB}, {1, 6 * GB, 0}}, b, order, 1500000000ull);
        const json m = {{"effective_budget_bytes", p.effective}, {"device0_experts", p.devices[0].experts},
                        {"device1_experts", p.devices[1].experts}, {"placed", p.device_of.size()}};
        const bool ok = p.effective == 11 * GB && p.devices[0].experts == 4 && p.devices[1].experts == 2;
        r.record(ctx, "placement", "host policy: 2 unequal devices, 10 experts of 1.5 GB",
                 {{"free_gb", {10, 6}}, {"dense_gb", {1, 0}}, {"reserve_gb", 2}, {"budget_gb", 100}}, m, ok ? "ok" : "fail", tm.ms());
    }
    if (!ctx.is_gpu()) {
        r.skip(ctx, "placement", "GPU tier: resident set and budget clamp", "needs a GPU");
        r.skip(ctx, "placement", "multi-device assignment", "needs two GPUs");
        return;
    }
    TierFiles files(ctx, "placement");
    const uint64_t expert_bytes = 2 * (kInter * (kHidden / 2) + kInter * 4) + kHidden * (kInter / 2) + kHidden * 4;
    char budget[64];
    std::snprintf(budget, sizeof budget, "%.9f", 3.5 * static_cast<double>(expert_bytes) / 1e9);
    set_tier_env(budget, files.pin.c_str());
    coli_tier tier = nullptr;
    Timer tm;
    const coli_status st = files.ok ? coli_tier_open(files.store.c_str(), &tier) : COLI_ERR_IO;
    if (st == COLI_ERR_UNSUPPORTED) {
        r.skip(ctx, "placement", "GPU tier: resident set and budget clamp", coli_last_error());
    } else if (st != COLI_OK) {
        r.record(ctx, "placement", "GPU tier: resident set and budget clamp", {{"budget_gb", budget}}, json::object(), "fail",
                 tm.ms(), coli_last_error());
    } else {
        coli_tier_info in;
        coli_tier_info_get(tier, &in);
        json per_device = json::array();
        bool counts_ok = true;
        uint64_t tensors = 0, bytes = 0;
        for (int g : ctx.gpus) {
            coli_stats s{0, 0};
            coli_stats_get(g, &s);
            per_device.push_back({{"device", g}, {"tensors", s.tensors}, {"bytes", s.bytes}});
            tensors += s.tensors;
            bytes += s.bytes;
        }
        counts_ok = in.gpu_experts == 3 && tensors == 9 && bytes == 3 * expert_bytes;
        const json m = {{"gpu_experts", in.gpu_experts}, {"resident_tensors", in.gpu_tensors}, {"resident_bytes", in.gpu_bytes},
                        {"per_device", per_device}, {"budget_requested_bytes", in.budget_requested},
                        {"budget_effective_bytes", in.budget_effective}, {"expert_bytes", expert_bytes}};
        r.record(ctx, "placement", "GPU tier: resident set and budget clamp",
                 {{"layers", kLayers}, {"experts", kExperts}, {"budget", "3.5 experts"}, {"profile", "4 hot experts"}}, m,
                 counts_ok ? "ok" : "fail", tm.ms());
        coli_tier_close(tier);
    }
    if (ctx.gpus.size() < 2) {
        r.skip(ctx, "placement", "multi-device assignment",
               "needs two GPUs; " + std::to_string(ctx.gpus.size()) + " selected (the host policy case covers the rule)");
    } else {
        set_tier_env("auto", nullptr);
        setenv("PIN_FILL", "1", 1);
        Timer t2;
        coli_tier all = nullptr;
        if (coli_tier_open(files.store.c_str(), &all) != COLI_OK) {
            r.record(ctx, "placement", "multi-device assignment", json::object(), json::object(), "fail", t2.ms(), coli_last_error());
        } else {
            json per_device = json::array();
            uint64_t min_experts = UINT64_MAX, max_experts = 0;
            for (int g : ctx.gpus) {
                coli_stats s{0, 0};
                coli_stats_get(g, &s);
                per_device.push_back({{"device", g}, {"tensors", s.tensors}});
                min_experts = std::min<uint64_t>(min_experts, s.tensors / 3);
                max_experts = std::max<uint64_t>(max_experts, s.tensors / 3);
            }
            r.record(ctx, "placement", "multi-device assignment", {{"devices", ctx.gpus.size()}, {"budget", "auto"}},
                     {{"per_device", per_device}}, max_experts - min_experts <= 1 ? "ok" : "fail", t2.ms());
            coli_tier_close(all);
        }
    }
    set_tier_env(nullptr, nullptr);
    unsetenv("CUDA_RESERVE_GB");
    unsetenv("PIN_FILL");
}

} // namespace coli::conformance
