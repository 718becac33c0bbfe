// coli-tier-demo: an expert-tier forward pass over a generated store on the best local device.
// Writes a store with the engine's bench-fixture shapes (hidden 1024, expert intermediate 512,
// 8 layers, 32 routed experts, top-8, 1 shared expert) and a pin profile with skewed heat, opens
// the tier (GPU 0 when there is one), runs every layer for a few tokens, compares the result with
// an all-CPU tier bit for bit (exact mode), and prints the placement table, the resident set and
// the fallback count.
//
//   coli-tier-demo [--dir DIR] [--tokens N] [--budget-gb G|auto]
// Without --budget-gb the budget holds about half of the experts (CUDA_EXPERT_GB, if set, wins).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "coli/coli.h"

namespace {

constexpr int kLayers = 8, kExperts = 32, kTopK = 8;
constexpr int64_t kHidden = 1024, kInter = 512;

uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Skewed routing: expert popularity falls off like 1/(rank+1), with a per-layer permutation.
int expert_of_rank(int layer, int rank) { return (rank * 7 + layer * 5) % kExperts; }

struct Routing {
    std::vector<int> experts;
    std::vector<int64_t> rows, token;
    std::vector<float> weight;
};

Routing route(int layer, int tokens) {
    std::vector<std::vector<std::pair<int64_t, float>>> per_expert(kExperts);
    for (int t = 0; t < tokens; ++t) {
        std::vector<int> chosen;
        for (uint64_t k = 0; (int)chosen.size() < kTopK; ++k) {
            const uint64_t r = mix(static_cast<uint64_t>(layer) * 1000003 + static_cast<uint64_t>(t) * 7919 + k);
            const int rank = static_cast<int>((r % 1000) * (r % 1000) / 1000 * kExperts / 1000); // skewed
            const int e = expert_of_rank(layer, rank);
            bool dup = false;
            for (int c : chosen) dup = dup || c == e;
            if (!dup) chosen.push_back(e);
        }
        for (int j = 0; j < kTopK; ++j) per_expert[chosen[j]].push_back({t, 1.0f / static_cast<float>(kTopK + j)});
    }
    Routing r;
    for (int e = 0; e < kExperts; ++e) {
        if (per_expert[e].empty()) continue;
        r.experts.push_back(e);
        r.rows.push_back(static_cast<int64_t>(per_expert[e].size()));
        for (const auto &p : per_expert[e]) {
            r.token.push_back(p.first);
            r.weight.push_back(p.second);
        }
    }
    return r;
}

bool check(coli_status st, const char *what) {
    if (st == COLI_OK) return true;
    std::fprintf(stderr, "coli-tier-demo: %s: %s (%s)\n", what, coli_last_error(), coli_status_name(st));
    return false;
}

// Every layer's routed experts plus its shared expert for `tokens` tokens; returns elapsed ms.
double forward_all(coli_tier tier, int tokens, std::vector<float> *out) {
    std::vector<float> x(static_cast<size_t>(tokens) * kTopK * kHidden);
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(static_cast<int64_t>(mix(k) % 2001) - 1000) / 1000.0f;
    out->clear();
    const auto t0 = std::chrono::steady_clock::now();
    for (int l = 0; l < kLayers; ++l) {
        const Routing r = route(l, tokens);
        std::vector<float> y(static_cast<size_t>(tokens) * kHidden), shared(y.size());
        if (!check(coli_tier_forward(tier, l, r.experts.data(), static_cast<int>(r.experts.size()), r.rows.data(), x.data(),
                                     r.token.data(), r.weight.data(), y.data(), tokens, COLI_NUMERICS_EXACT),
                   "coli_tier_forward") ||
            !check(coli_tier_shared_expert(tier, l, shared.data(), x.data(), tokens, COLI_NUMERICS_EXACT),
                   "coli_tier_shared_expert")) {
            return -1;
        }
        out->insert(out->end(), y.begin(), y.end());
        out->insert(out->end(), shared.begin(), shared.end());
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char **argv) {
    std::string dir = "/tmp", budget;
    int tokens = 16;
    for (int k = 1; k < argc; ++k) {
        const std::string a = argv[k];
        if (a == "--dir" && k + 1 < argc) {
            dir = argv[++k];
        } else if (a == "--tokens" && k + 1 < argc) {
            char *end = nullptr;
            const char *text = argv[++k];
            tokens = static_cast<int>(std::strtol(text, &end, 10));
            if (!*text || *end) tokens = 0; // not a whole number: refused below
        } else if (a == "--budget-gb" && k + 1 < argc) {
            budget = argv[++k];
        } else {
            std::fprintf(stderr, "usage: %s [--dir DIR] [--tokens N] [--budget-gb G|auto]\n", argv[0]);
            return 2;
        }
    }
    if (tokens < 1 || tokens > 4096) {
        std::fprintf(stderr, "coli-tier-demo: --tokens must be in [1, 4096]\n");
        return 2;
    }
    const std::string store = dir + "/coli-tier-demo.safetensors", pin = dir + "/coli-tier-demo.pin";
    if (!check(coli_store_write_random(store.c_str(), kLayers, kExperts, kHidden, kInter, COLI_FORMAT_Q4, 0, 2026),
               "writing the store")) {
        return 1;
    }
    {
        std::ofstream p(pin);
        p << "# colibri pin profile v1\n# layer expert count (skewed heat, as a routing run would record)\n";
        for (int l = 0; l < kLayers; ++l)
            for (int rank = 0; rank < kExperts; ++rank) p << l << " " << expert_of_rank(l, rank) << " " << 100000 / (rank + 1) << "\n";
    }
    int gpus = 0;
    const bool have_gpu = coli_gpu_count(&gpus) == COLI_OK && gpus > 0;
    const int devices[2] = {COLI_DEVICE_CPU, 0};
    if (!check(coli_init(devices, have_gpu ? 2 : 1), "coli_init")) return 1;
    // All-CPU reference first (no budget), then the tier on the best device.
    unsetenv("CUDA_EXPERT_GB");
    coli_tier cpu_tier = nullptr;
    std::vector<float> want, got;
    if (!check(coli_tier_open(store.c_str(), &cpu_tier), "opening the CPU tier")) return 1;
    const double cpu_ms = forward_all(cpu_tier, tokens, &want);
    coli_tier_close(cpu_tier);
    if (cpu_ms < 0) return 1;

    const double expert_gb = 3.0 * (kInter * (kHidden / 2) + kInter * 4) / 1e9;
    char half[32];
    std::snprintf(half, sizeof half, "%.6f", expert_gb * kLayers * kExperts / 2);
    setenv("CUDA_EXPERT_GB", budget.empty() ? (std::getenv("COLI_DEMO_BUDGET") ? std::getenv("COLI_DEMO_BUDGET") : half)
                                            : budget.c_str(), 1);
    setenv("PIN", pin.c_str(), 1);
    std::printf("colibri-gpu %s expert-tier demo: %d layers x %d experts (Q4, D=%lld, F=%lld), top-%d, %d tokens, "
                "CUDA_EXPERT_GB=%s, device: %s\n",
                coli_version(), kLayers, kExperts, (long long)kHidden, (long long)kInter, kTopK, tokens,
                std::getenv("CUDA_EXPERT_GB"), have_gpu ? "GPU 0" : "CPU only");
    coli_tier tier = nullptr;
    if (!check(coli_tier_open(store.c_str(), &tier), "opening the tier")) return 1;
    std::printf("\nplacement (G = on GPU %d, c = CPU), experts 0..%d:\n", 0, kExperts - 1);
    for (int l = 0; l < kLayers; ++l) {
        std::string row;
        int on_gpu = 0;
        for (int e = 0; e < kExperts; ++e) {
            int d = COLI_DEVICE_CPU;
            coli_tier_expert_device(tier, l, e, &d);
            row += d == COLI_DEVICE_CPU ? 'c' : 'G';
            on_gpu += d != COLI_DEVICE_CPU;
        }
        std::printf("  layer %d  %s  %2d on GPU\n", l, row.c_str(), on_gpu);
    }
    const double ms = forward_all(tier, tokens, &got);
    if (ms < 0) return 1;
    coli_tier_info info;
    coli_tier_info_get(tier, &info);
    const bool same = got.size() == want.size() && std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
    std::printf("\nresident set: %llu tensors (%llu bytes) on %d device(s); %llu of %d routed experts on GPUs\n",
                (unsigned long long)info.gpu_tensors, (unsigned long long)info.gpu_bytes, info.gpu_devices,
                (unsigned long long)info.gpu_experts, kLayers * kExperts);
    std::printf("fallbacks: %llu, rematerialised: %llu\n", (unsigned long long)info.fallbacks,
                (unsigned long long)info.rematerialised);
    std::printf("forward of %d layers: %.1f ms with the tier, %.1f ms all on the CPU; exact results identical: %s\n",
                kLayers, ms, cpu_ms, same ? "yes" : "NO");
    coli_tier_close(tier);
    coli_shutdown();
    std::remove(store.c_str());
    std::remove(pin.c_str());
    return same ? 0 : 1;
}
