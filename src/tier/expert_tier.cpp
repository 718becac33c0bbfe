#include "tier/expert_tier.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "api/env.h"
#include "gpu/gpu_backend.h"
#include "ref/expert_ref.h"

namespace coli::tier {

namespace {

constexpr int kFallbackLinesShown = 5; // the first diagnostics; the final line counts them all

// A size in GB: a non-negative decimal number ("40", "0.5").
bool env_gb(const char *name, bool allow_auto, bool *is_set, bool *is_auto, uint64_t *bytes, std::string *why) {
    const char *text = std::getenv(name);
    *is_set = text && *text;
    *is_auto = false;
    if (!*is_set) return true;
    if (allow_auto && std::strcmp(text, "auto") == 0) {
        *is_auto = true;
        return true;
    }
    char *end = nullptr;
    errno = 0;
    const double gb = std::strtod(text, &end);
    const bool digits_only = std::strspn(text, "0123456789.") == std::strlen(text);
    if (!digits_only || *end || errno || !(gb >= 0) || gb > 1e6) {
        *why = std::string(name) + "='" + text + "' is not a number of GB" + (allow_auto ? " or 'auto'" : "");
        return false;
    }
    *bytes = static_cast<uint64_t>(std::llround(gb * 1e9));
    return true;
}

void free_expert(coli_expert &e) {
    for (coli_tensor *t : {&e.gate, &e.up, &e.down}) {
        if (*t) coli_tensor_free(*t);
        *t = nullptr;
    }
}

std::string bytes_text(uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

} // namespace

bool settings_from_environment(int gpus, TierSettings *s, std::string *why) {
    bool reserve_set = false, reserve_auto = false;
    uint64_t reserve = 0;
    if (!env_gb("CUDA_EXPERT_GB", true, &s->budget_set, &s->budget.automatic, &s->budget.requested, why) ||
        !env_gb("CUDA_RESERVE_GB", false, &reserve_set, &reserve_auto, &reserve, why)) {
        return false;
    }
    if (reserve_set) s->budget.reserve = reserve;
    long fill = 0, release = 0, dense = 0;
    const long multi = gpus > 1 ? 1 : 0; // multi-GPU runs fill and release by default
    if (!env_int("PIN_FILL", 0, 1, multi, &fill, why) || !env_int("CUDA_RELEASE_HOST", 0, 1, multi, &release, why) ||
        !env_int("CUDA_DENSE", 0, 1, 0, &dense, why)) {
        return false;
    }
    s->fill = fill == 1;
    s->release_host = release == 1;
    s->dense = dense == 1;
    const char *pin = std::getenv("PIN");
    s->pin_path = pin ? pin : "";
    return true;
}

ExpertTier::~ExpertTier() {
    for (Slot &s : slots_) {
        free_expert(s.gpu);
        free_expert(s.cpu);
    }
    for (coli_expert &e : shared_cpu_) free_expert(e);
    for (coli_expert &e : shared_gpu_) free_expert(e);
    if (fallbacks_ > 0) std::fprintf(stderr, "[GPU] expert tier: %llu fallbacks to the CPU\n", (unsigned long long)fallbacks_);
}

coli_status ExpertTier::load_to(int layer, int expert, int device, coli_expert *out, std::string *why) {
    coli_tensor *slots[3] = {&out->gate, &out->up, &out->down};
    const store::Matrix which[3] = {store::Matrix::gate, store::Matrix::up, store::Matrix::down};
    for (int k = 0; k < 3; ++k) {
        store::HostMatrix m;
        if (!store_.load(layer, expert, which[k], &m, why)) {
            free_expert(*out);
            return COLI_ERR_IO;
        }
        const coli_status st = coli_tensor_upload(slots[k], m.L.fmt, m.L.O, m.L.I, m.L.gs, m.weights.data(),
                                                  m.scales.empty() ? nullptr : m.scales.data(), device);
        if (st != COLI_OK) {
            *why = coli_last_error();
            free_expert(*out);
            return st;
        }
    }
    return COLI_OK;
}

void ExpertTier::note_fallback(const std::string &line) {
    ++fallbacks_;
    if (fallbacks_ <= kFallbackLinesShown) std::fprintf(stderr, "[GPU] fallback: %s\n", line.c_str());
    if (fallbacks_ == kFallbackLinesShown + 1) std::fprintf(stderr, "[GPU] fallback: further fallbacks are counted only\n");
}

coli_status ExpertTier::open(const std::string &path, const std::vector<int> &gpus, const TierSettings &s, std::string *why) {
    if (!store_.open(path, why)) return COLI_ERR_IO;
    const store::StoreConfig &c = store_.config();
    gpus_ = gpus;
    release_host_ = s.release_host && !gpus.empty();
    slots_.assign(static_cast<size_t>(c.layers) * c.experts, Slot{});
    shared_cpu_.assign(c.layers, coli_expert{nullptr, nullptr, nullptr});
    shared_gpu_.assign(c.layers, coli_expert{nullptr, nullptr, nullptr});

    // Pin source and order.
    Profile profile;
    const bool have_pin = !s.pin_path.empty();
    if (have_pin && !read_profile(s.pin_path, c.layers, c.experts, &profile, why)) return COLI_ERR_IO;
    const uint64_t expert_bytes = store::matrix_layout(c, store::Matrix::gate).total_bytes() +
                                  store::matrix_layout(c, store::Matrix::up).total_bytes() +
                                  store::matrix_layout(c, store::Matrix::down).total_bytes();
    std::vector<ExpertKey> order;
    if (gpus.empty()) {
        if (s.budget_set) std::fprintf(stderr, "[GPU] expert tier: CUDA_EXPERT_GB is set but no GPU was started: every expert runs on the CPU\n");
    } else if (!s.budget_set) {
        std::fprintf(stderr, "[GPU] expert tier: CUDA_EXPERT_GB is not set: no routed expert is placed on the GPUs\n");
    } else if (!have_pin && !s.fill) {
        std::fprintf(stderr, "[GPU] expert tier: CUDA_EXPERT_GB is set but there is no pin source (PIN=<profile>) and "
                             "PIN_FILL is 0: no routed expert is placed on the GPUs\n");
    } else {
        if (!have_pin) {
            std::fprintf(stderr, "[GPU] expert tier: no pin source (PIN unset): PIN_FILL=1 fills the budget in store order\n");
        }
        order = placement_order(profile, c.layers, c.experts, s.fill);
    }

    // Dense tensors (the shared experts) on GPU 0 with CUDA_DENSE=1: counted before the budget.
    std::vector<DeviceCapacity> caps;
    for (int g : gpus) {
        uint64_t free_bytes = 0, total = 0;
        if (const coli_status st = gpu::memory_info(g, &free_bytes, &total, why); st != COLI_OK) return st;
        caps.push_back({g, free_bytes, 0});
    }
    const bool dense_on_gpu = s.dense && !gpus.empty() && c.shared_expert;
    if (dense_on_gpu) caps[0].dense_bytes = expert_bytes * static_cast<uint64_t>(c.layers);
    Plan plan;
    if (!gpus.empty() && s.budget_set) {
        plan = plan_placement(caps, s.budget, order, expert_bytes);
        budget_requested_ = plan.requested;
        budget_effective_ = plan.effective;
        for (const std::string &line : plan.log) std::fprintf(stderr, "[GPU] expert budget: %s\n", line.c_str());
    }

    // Uploads, all at start-up: capacity failures happen here, not during inference.
    if (c.shared_expert) {
        for (int l = 0; l < c.layers; ++l) {
            if (dense_on_gpu) {
                const coli_status st = load_to(l, -1, gpus[0], &shared_gpu_[l], why);
                if (st == COLI_ERR_IO) return st;
                if (st != COLI_OK) note_fallback("shared expert of layer " + std::to_string(l) + ": " + *why);
            }
            if (const coli_status st = load_to(l, -1, COLI_DEVICE_CPU, &shared_cpu_[l], why); st != COLI_OK) return st;
        }
    }
    for (int l = 0; l < c.layers; ++l) {
        for (int e = 0; e < c.experts; ++e) {
            Slot &sl = slot(l, e);
            auto placed = plan.device_of.find({l, e});
            if (placed != plan.device_of.end()) {
                const coli_status st = load_to(l, e, placed->second, &sl.gpu, why);
                if (st == COLI_ERR_IO) return st;
                if (st == COLI_OK) {
                    sl.device = placed->second;
                    if (release_host_) continue; // no host copy: rematerialised from the store if needed
                } else {
                    note_fallback("layer " + std::to_string(l) + " expert " + std::to_string(e) + ": " + *why);
                }
            }
            if (const coli_status st = load_to(l, e, COLI_DEVICE_CPU, &sl.cpu, why); st != COLI_OK) return st;
        }
    }
    const coli_tier_info in = info_unlocked();
    std::fprintf(stderr, "[GPU] resident set: %llu tensors (%llu bytes) on %d devices%s\n",
                 (unsigned long long)in.gpu_tensors, (unsigned long long)in.gpu_bytes, static_cast<int>(gpus.size()),
                 in.gpu_tensors == 0 ? " -- nothing is resident on a GPU: every expert runs on the CPU" : "");
    std::fprintf(stderr, "[GPU] expert tier: %llu of %llu routed experts on GPUs (%s each), %llu fallbacks, host copies %s\n",
                 (unsigned long long)in.gpu_experts, (unsigned long long)slots_.size(), bytes_text(expert_bytes).c_str(),
                 (unsigned long long)fallbacks_, release_host_ ? "released" : "kept");
    return COLI_OK;
}

coli_status ExpertTier::ensure_cpu_copy(Slot &s, int layer, int expert, std::string *why) {
    if (s.cpu.gate) return COLI_OK;
    const coli_status st = load_to(layer, expert, COLI_DEVICE_CPU, &s.cpu, why);
    if (st == COLI_OK) ++rematerialised_;
    return st;
}

void ExpertTier::fail_over_to_cpu(const std::string &reason) {
    gpu_failed_ = true;
    std::fprintf(stderr, "[GPU] failure: %s; every expert moves to the CPU\n", reason.c_str());
    for (Slot &s : slots_) {
        if (s.device != COLI_DEVICE_CPU) {
            s.device = COLI_DEVICE_CPU;
            note_fallback("expert moved to the CPU after the GPU failure");
        }
    }
}

coli_status ExpertTier::forward(int layer, const int *experts, int n_experts, const int64_t *rows, const float *x,
                                const int64_t *row_token, const float *row_weight, float *y, int64_t n_tokens,
                                int numerics, std::string *why) {
    std::lock_guard<std::mutex> lock(mutex_);
    const store::StoreConfig &c = store_.config();
    if (layer < 0 || layer >= c.layers) {
        *why = "layer " + std::to_string(layer) + " is outside [0, " + std::to_string(c.layers) + ")";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    if (n_experts <= 0 || !experts || !rows || !x || !y || n_tokens <= 0) {
        *why = "experts, rows, x and y must be given, n_experts and n_tokens positive";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    int64_t total = 0;
    for (int k = 0; k < n_experts; ++k) {
        if (experts[k] < 0 || experts[k] >= c.experts || rows[k] < 0) {
            *why = "experts[" + std::to_string(k) + "] = " + std::to_string(experts[k]) + " or its rows are out of range";
            return COLI_ERR_INVALID_ARGUMENT;
        }
        total += rows[k];
    }
    if (!row_token && n_tokens != total) {
        *why = "without row_token, n_tokens must equal the sum of rows";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    for (int64_t r = 0; row_token && r < total; ++r) {
        if (row_token[r] < 0 || row_token[r] >= n_tokens) {
            *why = "row_token[" + std::to_string(r) + "] is outside [0, n_tokens)";
            return COLI_ERR_INVALID_ARGUMENT;
        }
    }
    // Each expert where it runs now, then the group's combination in call order.
    std::vector<float> out, acc(static_cast<size_t>(n_tokens * c.hidden), 0.0f);
    int64_t row0 = 0;
    for (int k = 0; k < n_experts; ++k) {
        const int64_t n = rows[k];
        if (n == 0) continue;
        Slot &s = slot(layer, experts[k]);
        out.assign(static_cast<size_t>(n * c.hidden), 0.0f);
        const float *xk = x + row0 * c.hidden;
        coli_status st = COLI_ERR_DEVICE;
        if (s.device != COLI_DEVICE_CPU && !gpu_failed_) {
            st = coli_expert_mlp(&s.gpu, out.data(), xk, n, numerics);
            if (st != COLI_OK && st != COLI_ERR_INVALID_ARGUMENT && st != COLI_ERR_UNSUPPORTED) {
                fail_over_to_cpu("layer " + std::to_string(layer) + " expert " + std::to_string(experts[k]) + ": " +
                                 coli_last_error());
            } else if (st != COLI_OK) {
                *why = coli_last_error();
                return st;
            }
        }
        if (st != COLI_OK) {
            if ((st = ensure_cpu_copy(s, layer, experts[k], why)) != COLI_OK) return st;
            if ((st = coli_expert_mlp(&s.cpu, out.data(), xk, n, numerics)) != COLI_OK) {
                *why = coli_last_error();
                return st;
            }
        }
        ref::combine_rows(out.data(), n, c.hidden, row_token ? row_token + row0 : nullptr,
                          row_weight ? row_weight + row0 : nullptr, row_token ? acc.data() : acc.data() + row0 * c.hidden);
        recorded_.counts[{layer, experts[k]}] += static_cast<uint64_t>(n);
        row0 += n;
    }
    std::memcpy(y, acc.data(), acc.size() * sizeof(float));
    return COLI_OK;
}

coli_status ExpertTier::shared_expert(int layer, float *y, const float *x, int64_t S, int numerics, std::string *why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (layer < 0 || layer >= store_.config().layers || !store_.config().shared_expert) {
        *why = "layer " + std::to_string(layer) + " has no shared expert in this store";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    coli_status st = COLI_ERR_DEVICE;
    if (shared_gpu_[layer].gate && !gpu_failed_) {
        st = coli_expert_mlp(&shared_gpu_[layer], y, x, S, numerics);
        if (st != COLI_OK && st != COLI_ERR_INVALID_ARGUMENT && st != COLI_ERR_UNSUPPORTED) {
            fail_over_to_cpu(std::string("shared expert of layer ") + std::to_string(layer) + ": " + coli_last_error());
        }
    }
    if (st != COLI_OK) st = coli_expert_mlp(&shared_cpu_[layer], y, x, S, numerics);
    if (st != COLI_OK) *why = coli_last_error();
    return st;
}

coli_status ExpertTier::expert_device(int layer, int expert, int *device, std::string *why) {
    std::lock_guard<std::mutex> lock(mutex_);
    const store::StoreConfig &c = store_.config();
    if (layer < 0 || layer >= c.layers || expert < 0 || expert >= c.experts) {
        *why = "layer " + std::to_string(layer) + " expert " + std::to_string(expert) + " is not in the store";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    *device = gpu_failed_ ? COLI_DEVICE_CPU : slot(layer, expert).device;
    return COLI_OK;
}

coli_tier_info ExpertTier::info() {
    std::lock_guard<std::mutex> lock(mutex_);
    return info_unlocked();
}

coli_tier_info ExpertTier::info_unlocked() {
    coli_tier_info in;
    std::memset(&in, 0, sizeof in);
    const store::StoreConfig &c = store_.config();
    in.layers = c.layers;
    in.experts = c.experts;
    in.hidden = c.hidden;
    in.intermediate = c.intermediate;
    in.format = c.format;
    in.gpu_devices = static_cast<int>(gpus_.size());
    for (const Slot &s : slots_) in.gpu_experts += s.device != COLI_DEVICE_CPU && !gpu_failed_;
    for (int g : gpus_) {
        coli_stats st{0, 0};
        coli_stats_get(g, &st);
        in.gpu_tensors += st.tensors;
        in.gpu_bytes += st.bytes;
    }
    in.fallbacks = fallbacks_;
    in.rematerialised = rematerialised_;
    in.gpu_failed = gpu_failed_ ? 1 : 0;
    in.budget_requested = budget_requested_;
    in.budget_effective = budget_effective_;
    return in;
}

Profile ExpertTier::recorded() {
    std::lock_guard<std::mutex> lock(mutex_);
    return recorded_;
}

} // namespace coli::tier
