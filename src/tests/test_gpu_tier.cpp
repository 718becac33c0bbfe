// The expert tier on real GPUs (part of coli-gpu-tests): placement from a pin profile and budget,
// resident set, dense tensors, host release and rematerialisation, per-tensor upload fallback
// and a total GPU failure mid-run, with exact results identical to an all-CPU tier throughout.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "catch_compat.h"
#include "coli/coli.h"
#include "gpu/gpu_backend.h"
#include "testing/test_data.h"

using namespace coli;
using namespace coli::testing;

namespace {

const int kLayers = 2, kExperts = 8;
const int64_t kHidden = 128, kInter = 64;

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct TierEnv {
    EnvList vars;
    explicit TierEnv(EnvList v) : vars(std::move(v)) {
        for (const char *name : {"CUDA_EXPERT_GB", "PIN", "PIN_FILL", "CUDA_RELEASE_HOST", "CUDA_DENSE", "CUDA_RESERVE_GB",
                                 "COLI_GPU_FAIL_AFTER", "COLI_CUDA", "COLI_GPUS", "COLI_GPU"}) {
            unsetenv(name);
        }
        for (const auto &kv : vars) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    }
    ~TierEnv() {
        for (const auto &kv : vars) unsetenv(kv.first.c_str());
    }
};

// One forward of every layer: 6 tokens routed top-3 over the layer's experts.
std::vector<float> run_all_layers(coli_tier tier, int numerics) {
    std::vector<float> all;
    const std::vector<float> x = random_normal(18 * kHidden, 99);
    for (int l = 0; l < kLayers; ++l) {
        std::vector<int> experts;
        std::vector<int64_t> rows, token;
        std::vector<float> weight;
        for (int e = 0; e < kExperts; ++e) {
            int64_t n = 0;
            for (int64_t t = 0; t < 6; ++t) {
                for (int j = 0; j < 3; ++j) {
                    if ((t * 3 + j + l) % kExperts == e) {
                        ++n;
                        token.push_back(t);
                        weight.push_back(1.0f / static_cast<float>(j + 2));
                    }
                }
            }
            if (n) {
                experts.push_back(e);
                rows.push_back(n);
            }
        }
        std::vector<float> y(6 * kHidden, std::nanf(""));
        const coli_status st = coli_tier_forward(tier, l, experts.data(), static_cast<int>(experts.size()), rows.data(),
                                                 x.data(), token.data(), weight.data(), y.data(), 6, numerics);
        INFO(coli_last_error());
        REQUIRE(st == COLI_OK);
        all.insert(all.end(), y.begin(), y.end());
        std::vector<float> shared(6 * kHidden);
        REQUIRE(coli_tier_shared_expert(tier, l, shared.data(), x.data(), 6, numerics) == COLI_OK);
        all.insert(all.end(), shared.begin(), shared.end());
    }
    return all;
}

struct Fixture {
    std::string store, pin;
    int gpu = 0;
    std::vector<float> cpu_exact;
    Fixture() {
        store = "/tmp/coli_gpu_tier_" + std::to_string(::getpid()) + ".safetensors";
        pin = store + ".pin";
        REQUIRE(coli_store_write_random(store.c_str(), kLayers, kExperts, kHidden, kInter, COLI_FORMAT_G4, 32, 5) == COLI_OK);
        std::ofstream(pin) << "# colibri pin profile v1\n0 5 900\n1 2 800\n0 1 700\n1 7 600\n";
        // The all-CPU result every placement must reproduce.
        TierEnv env(EnvList{});
        coli_shutdown();
        REQUIRE(coli_init(nullptr, 0) == COLI_OK);
        coli_tier t = nullptr;
        REQUIRE(coli_tier_open(store.c_str(), &t) == COLI_OK);
        cpu_exact = run_all_layers(t, COLI_NUMERICS_EXACT);
        coli_tier_close(t);
        coli_shutdown();
    }
    ~Fixture() {
        std::remove(store.c_str());
        std::remove(pin.c_str());
    }
    coli_tier open_on_gpu() {
        coli_shutdown();
        const int devices[2] = {COLI_DEVICE_CPU, gpu};
        REQUIRE(coli_init(devices, 2) == COLI_OK);
        coli_tier t = nullptr;
        const coli_status st = coli_tier_open(store.c_str(), &t);
        INFO(coli_last_error());
        REQUIRE(st == COLI_OK);
        return t;
    }
};

uint64_t expert_bytes() { // gate + up + down of one G4 expert with gs 32
    const uint64_t gu = kInter * (kHidden / 2) + kInter * (kHidden / 32) * 4;
    const uint64_t d = kHidden * (kInter / 2) + kHidden * (kInter / 32) * 4;
    return 2 * gu + d;
}

} // namespace

TEST_CASE("GPU tier: hottest experts resident, results identical to the CPU tier", "[gpu][tier]") {
    Fixture f;
    // Budget for exactly 3 experts: the three hottest of the profile go to the GPU.
    char budget[64];
    std::snprintf(budget, sizeof budget, "%.9f", 3.5 * static_cast<double>(expert_bytes()) / 1e9);
    TierEnv env(EnvList{{"CUDA_EXPERT_GB", budget}, {"PIN", f.pin}, {"CUDA_RESERVE_GB", "0"}});
    coli_tier t = f.open_on_gpu();
    int dev = -5;
    REQUIRE(coli_tier_expert_device(t, 0, 5, &dev) == COLI_OK);
    CHECK(dev == f.gpu);
    REQUIRE(coli_tier_expert_device(t, 1, 2, &dev) == COLI_OK);
    CHECK(dev == f.gpu);
    REQUIRE(coli_tier_expert_device(t, 0, 1, &dev) == COLI_OK);
    CHECK(dev == f.gpu);
    REQUIRE(coli_tier_expert_device(t, 1, 7, &dev) == COLI_OK);
    CHECK(dev == COLI_DEVICE_CPU); // the fourth does not fit
    coli_tier_info info;
    REQUIRE(coli_tier_info_get(t, &info) == COLI_OK);
    CHECK(info.gpu_experts == 3);
    CHECK(info.gpu_tensors == 9);
    CHECK(info.gpu_bytes == 3 * expert_bytes());
    coli_stats s;
    REQUIRE(coli_stats_get(f.gpu, &s) == COLI_OK);
    CHECK((s.tensors == 9 && s.bytes == 3 * expert_bytes()));
    const std::vector<float> got = run_all_layers(t, COLI_NUMERICS_EXACT);
    CHECK(count_bit_differences(f.cpu_exact.data(), got.data(), got.size()) == 0);
    REQUIRE(coli_tier_close(t) == COLI_OK);
    REQUIRE(coli_stats_get(f.gpu, &s) == COLI_OK);
    CHECK(s.tensors == 0);
    coli_shutdown();
}

TEST_CASE("GPU tier: no pin source, fill, dense tensors, auto budget", "[gpu][tier]") {
    Fixture f;
    {
        TierEnv env(EnvList{{"CUDA_EXPERT_GB", "1"}}); // a budget but no pin source and no fill: nothing placed
        coli_tier t = f.open_on_gpu();
        coli_tier_info info;
        REQUIRE(coli_tier_info_get(t, &info) == COLI_OK);
        CHECK(info.gpu_experts == 0);
        CHECK(info.gpu_tensors == 0);
        coli_tier_close(t);
    }
    {
        TierEnv env(EnvList{{"CUDA_EXPERT_GB", "auto"}, {"PIN_FILL", "1"}, {"CUDA_DENSE", "1"}});
        coli_tier t = f.open_on_gpu();
        coli_tier_info info;
        REQUIRE(coli_tier_info_get(t, &info) == COLI_OK);
        CHECK(info.gpu_experts == static_cast<uint64_t>(kLayers * kExperts)); // everything fits on an H200
        CHECK(info.gpu_tensors == static_cast<uint64_t>(3 * kLayers * (kExperts + 1))); // + the shared experts
        const std::vector<float> got = run_all_layers(t, COLI_NUMERICS_EXACT);
        CHECK(count_bit_differences(f.cpu_exact.data(), got.data(), got.size()) == 0);
        coli_tier_close(t);
    }
    coli_shutdown();
}

TEST_CASE("GPU tier: an upload failure falls back to the CPU; a GPU failure mid-run moves everything and "
          "rematerialises released experts with identical results",
          "[gpu][tier][failure]") {
    Fixture f;
    {
        // The smallest COLI_GPU_FAIL_AFTER that start-up survives counts start-up's operations; one
        // more makes the second device operation after start-up fail: the first expert's upload.
        int n = 0;
        for (; n < 64; ++n) {
            TierEnv probe(EnvList{{"COLI_GPU_FAIL_AFTER", std::to_string(n)}});
            coli_shutdown();
            const int devices[2] = {COLI_DEVICE_CPU, f.gpu};
            if (coli_init(devices, 2) == COLI_OK) break;
        }
        coli_shutdown();
        REQUIRE(n < 64);
        TierEnv env(EnvList{{"CUDA_EXPERT_GB", "auto"}, {"PIN", f.pin}, {"COLI_GPU_FAIL_AFTER", std::to_string(n + 1)}});
        coli_tier t = f.open_on_gpu();
        coli_tier_info info;
        REQUIRE(coli_tier_info_get(t, &info) == COLI_OK);
        CHECK(info.fallbacks == 1);
        CHECK(info.gpu_experts == 3); // 4 in the profile, one fell back
        const std::vector<float> got = run_all_layers(t, COLI_NUMERICS_EXACT);
        CHECK(count_bit_differences(f.cpu_exact.data(), got.data(), got.size()) == 0);
        coli_tier_close(t);
    }
    {
        TierEnv env(EnvList{{"CUDA_EXPERT_GB", "auto"}, {"PIN_FILL", "1"}, {"CUDA_RELEASE_HOST", "1"}});
        coli_tier t = f.open_on_gpu();
        coli_tier_info info;
        REQUIRE(coli_tier_info_get(t, &info) == COLI_OK);
        CHECK(info.gpu_experts == static_cast<uint64_t>(kLayers * kExperts));
        CHECK(info.rematerialised == 0);
        coli_stats cpu;
        REQUIRE(coli_stats_get(COLI_DEVICE_CPU, &cpu) == COLI_OK);
        CHECK(cpu.tensors == 3 * kLayers); // host copies released: only the shared experts remain
        gpu::inject_fault_after(3);         // a device operation in the middle of the next run fails
        const std::vector<float> got = run_all_layers(t, COLI_NUMERICS_EXACT);
        CHECK(count_bit_differences(f.cpu_exact.data(), got.data(), got.size()) == 0);
        REQUIRE(coli_tier_info_get(t, &info) == COLI_OK);
        CHECK(info.gpu_failed == 1);
        CHECK(info.gpu_experts == 0);
        CHECK(info.rematerialised > 0);
        CHECK(info.fallbacks == static_cast<uint64_t>(kLayers * kExperts));
        int dev = 0;
        REQUIRE(coli_tier_expert_device(t, 0, 0, &dev) == COLI_OK);
        CHECK(dev == COLI_DEVICE_CPU);
        // and again, now entirely on the CPU
        const std::vector<float> again = run_all_layers(t, COLI_NUMERICS_EXACT);
        CHECK(count_bit_differences(f.cpu_exact.data(), again.data(), again.size()) == 0);
        coli_tier_close(t);
    }
    coli_shutdown();
}
