// The expert tier: routed experts from a weight store, the hottest resident on the GPUs that
// coli_init started (placement.h decides), the rest on the CPU, with per-expert fallback and a
// whole-tier move to the CPU after a GPU failure. Built on the public C API, so its tensors are
// counted in coli_stats like any other. docs/expert-tier.md.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "coli/coli.h"
#include "store/expert_store.h"
#include "tier/placement.h"

namespace coli::tier {

struct TierSettings {
    bool budget_set = false;
    Budget budget;
    std::string pin_path;       // PIN
    bool fill = false;          // PIN_FILL
    bool release_host = false;  // CUDA_RELEASE_HOST
    bool dense = false;         // CUDA_DENSE
};

// Reads the tier's environment variables strictly; multi-GPU runs default PIN_FILL and
// CUDA_RELEASE_HOST to 1.
bool settings_from_environment(int gpus, TierSettings *s, std::string *why);

class ExpertTier {
public:
    ~ExpertTier();
    // Plans and uploads everything; prints the budget, fallback and resident-set lines.
    coli_status open(const std::string &path, const std::vector<int> &gpus, const TierSettings &s, std::string *why);
    coli_status forward(int layer, const int *experts, int n_experts, const int64_t *rows, const float *x,
                        const int64_t *row_token, const float *row_weight, float *y, int64_t n_tokens, int numerics,
                        std::string *why);
    coli_status shared_expert(int layer, float *y, const float *x, int64_t S, int numerics, std::string *why);
    coli_status expert_device(int layer, int expert, int *device, std::string *why);
    coli_tier_info info();
    Profile recorded();
    const store::StoreConfig &config() const { return store_.config(); }

private:
    struct Slot {
        int device = COLI_DEVICE_CPU; // where it runs now
        coli_expert gpu{nullptr, nullptr, nullptr};
        coli_expert cpu{nullptr, nullptr, nullptr}; // host copy (absent while released)
    };
    Slot &slot(int layer, int expert) { return slots_[static_cast<size_t>(layer) * store_.config().experts + expert]; }
    coli_status load_to(int layer, int expert, int device, coli_expert *out, std::string *why);
    coli_status ensure_cpu_copy(Slot &s, int layer, int expert, std::string *why);
    void fail_over_to_cpu(const std::string &reason);
    void note_fallback(const std::string &line);
    coli_tier_info info_unlocked();

    std::mutex mutex_;
    store::ExpertStore store_;
    std::vector<int> gpus_;
    std::vector<Slot> slots_;
    std::vector<coli_expert> shared_cpu_, shared_gpu_; // per layer
    Profile recorded_;
    bool release_host_ = false, gpu_failed_ = false;
    uint64_t fallbacks_ = 0, rematerialised_ = 0;
    uint64_t budget_requested_ = 0, budget_effective_ = 0;
};

} // namespace coli::tier
