// The expert tier on the CPU (and, where coli_init started GPUs, the same calls on them in
// test_gpu.cpp): results equal the reference expert group whatever the placement.
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "catch_compat.h"
#include "coli/coli.h"
#include "ref/expert_ref.h"
#include "ref/matmul_ref.h"
#include "store/expert_store.h"
#include "testing/test_data.h"
#include "tier/expert_tier.h"

using namespace coli;
using namespace coli::testing;

TEST_CASE("a CPU tier runs routed experts and the shared expert exactly like the reference", "[tier]") {
    const std::string path = "/tmp/coli_tier_" + std::to_string(::getpid()) + ".safetensors";
    REQUIRE(coli_store_write_random(path.c_str(), 2, 4, 64, 32, COLI_FORMAT_Q4, 0, 11) == COLI_OK);
    coli_shutdown();
    for (const char *v : {"CUDA_EXPERT_GB", "PIN", "PIN_FILL", "CUDA_RELEASE_HOST", "CUDA_DENSE", "CUDA_RESERVE_GB"}) unsetenv(v);
    REQUIRE(coli_init(nullptr, 0) == COLI_OK);
    coli_tier tier = nullptr;
    REQUIRE(coli_tier_open(path.c_str(), &tier) == COLI_OK);
    coli_tier_info info;
    REQUIRE(coli_tier_info_get(tier, &info) == COLI_OK);
    CHECK((info.layers == 2 && info.experts == 4 && info.gpu_experts == 0 && info.gpu_tensors == 0));
    int dev = 0;
    REQUIRE(coli_tier_expert_device(tier, 1, 3, &dev) == COLI_OK);
    CHECK(dev == COLI_DEVICE_CPU);

    store::ExpertStore st;
    std::string why;
    REQUIRE(st.open(path, &why));
    auto view_of = [&](int layer, int expert, std::vector<store::HostMatrix> &keep) {
        keep.resize(3);
        const store::Matrix ms[3] = {store::Matrix::gate, store::Matrix::up, store::Matrix::down};
        for (int k = 0; k < 3; ++k) REQUIRE(st.load(layer, expert, ms[k], &keep[k], &why));
        return ExpertView{{keep[0].L, keep[0].weights.data(), keep[0].scales.data()},
                          {keep[1].L, keep[1].weights.data(), keep[1].scales.data()},
                          {keep[2].L, keep[2].weights.data(), keep[2].scales.data()}};
    };
    const int experts[2] = {3, 1};
    const int64_t rows[2] = {2, 1}, token[3] = {0, 1, 1};
    const float weight[3] = {0.5f, 0.25f, 0.75f};
    const std::vector<float> x = random_normal(3 * 64, 5);
    std::vector<store::HostMatrix> k0, k1, ks;
    const ExpertView views[2] = {view_of(1, 3, k0), view_of(1, 1, k1)};
    for (int mode : {COLI_NUMERICS_EXACT, COLI_NUMERICS_FLOAT}) {
        std::vector<float> want(2 * 64), got(2 * 64, std::nanf(""));
        ref::expert_group(ref::matmul, views, 2, rows, x.data(), token, weight, want.data(), 2, mode);
        REQUIRE(coli_tier_forward(tier, 1, experts, 2, rows, x.data(), token, weight, got.data(), 2, mode) == COLI_OK);
        CHECK(count_bit_differences(want.data(), got.data(), want.size()) == 0);
        const ExpertView shared = view_of(0, -1, ks);
        std::vector<float> sw(3 * 64), sg(3 * 64);
        ref::expert_mlp(ref::matmul, shared, x.data(), sw.data(), 3, mode);
        REQUIRE(coli_tier_shared_expert(tier, 0, sg.data(), x.data(), 3, mode) == COLI_OK);
        CHECK(count_bit_differences(sw.data(), sg.data(), sw.size()) == 0);
    }
    // Rejected calls.
    std::vector<float> y(2 * 64);
    const int bad[1] = {4};
    CHECK(coli_tier_forward(tier, 1, bad, 1, rows, x.data(), nullptr, nullptr, y.data(), 2, 1) == COLI_ERR_INVALID_ARGUMENT);
    CHECK(coli_tier_forward(tier, 2, experts, 2, rows, x.data(), token, weight, y.data(), 2, 1) == COLI_ERR_INVALID_ARGUMENT);
    CHECK(std::string(coli_last_error()).find("layer 2") != std::string::npos);
    // The recorded routing becomes a pin profile: expert 3 saw 2 rows per forward, expert 1 one.
    const std::string prof = path + ".pin";
    REQUIRE(coli_tier_profile_write(tier, prof.c_str()) == COLI_OK);
    std::ifstream pf(prof);
    const std::string text((std::istreambuf_iterator<char>(pf)), {});
    CHECK(text.find("1 3 4\n") != std::string::npos);
    CHECK(text.find("1 1 2\n") != std::string::npos);
    REQUIRE(coli_tier_close(tier) == COLI_OK);
    coli_stats s;
    REQUIRE(coli_stats_get(COLI_DEVICE_ALL, &s) == COLI_OK);
    CHECK(s.tensors == 0);
    coli_shutdown();
    std::remove(prof.c_str());
    std::remove(path.c_str());
}

TEST_CASE("tier environment variables are parsed strictly", "[tier][env]") {
    const std::string path = "/tmp/coli_tier_env_" + std::to_string(::getpid()) + ".safetensors";
    REQUIRE(coli_store_write_random(path.c_str(), 1, 2, 32, 16, COLI_FORMAT_Q8, 0, 3) == COLI_OK);
    coli_shutdown();
    REQUIRE(coli_init(nullptr, 0) == COLI_OK);
    struct Case { const char *var, *value; };
    for (const Case &c : {Case{"CUDA_EXPERT_GB", "lots"}, Case{"CUDA_EXPERT_GB", "-1"}, Case{"CUDA_EXPERT_GB", "1e3"},
                          Case{"CUDA_RESERVE_GB", "auto"}, Case{"PIN_FILL", "yes"}, Case{"CUDA_RELEASE_HOST", "2"},
                          Case{"CUDA_DENSE", "1x"}}) {
        INFO(c.var << "=" << c.value);
        setenv(c.var, c.value, 1);
        coli_tier t = nullptr;
        CHECK(coli_tier_open(path.c_str(), &t) == COLI_ERR_INVALID_ARGUMENT);
        CHECK(std::string(coli_last_error()).find(c.var) != std::string::npos);
        unsetenv(c.var);
    }
    setenv("PIN", "/nonexistent/profile.txt", 1);
    setenv("CUDA_EXPERT_GB", "1", 1);
    coli_tier t = nullptr;
    CHECK(coli_tier_open(path.c_str(), &t) == COLI_ERR_IO);
    CHECK(std::string(coli_last_error()).find("/nonexistent/profile.txt") != std::string::npos);
    unsetenv("PIN");
    unsetenv("CUDA_EXPERT_GB");
    CHECK(coli_tier_open("/nonexistent/store.safetensors", &t) == COLI_ERR_IO);
    coli_shutdown();
    std::remove(path.c_str());
}

TEST_CASE("tier settings: defaults, multi-GPU defaults, GB units", "[tier][env]") {
    for (const char *v : {"CUDA_EXPERT_GB", "PIN", "PIN_FILL", "CUDA_RELEASE_HOST", "CUDA_DENSE", "CUDA_RESERVE_GB"}) unsetenv(v);
    tier::TierSettings one, two;
    std::string why;
    REQUIRE(tier::settings_from_environment(1, &one, &why));
    CHECK_FALSE(one.budget_set);
    CHECK_FALSE(one.fill);
    CHECK_FALSE(one.release_host);
    CHECK(one.budget.reserve == 2000000000ull);
    REQUIRE(tier::settings_from_environment(2, &two, &why)); // several GPUs: fill and release by default
    CHECK(two.fill);
    CHECK(two.release_host);
    setenv("PIN_FILL", "0", 1);
    setenv("CUDA_EXPERT_GB", "1.5", 1);
    setenv("CUDA_RESERVE_GB", "0.5", 1);
    REQUIRE(tier::settings_from_environment(2, &two, &why));
    CHECK_FALSE(two.fill); // an explicit value wins
    CHECK(two.budget_set);
    CHECK(two.budget.requested == 1500000000ull);
    CHECK(two.budget.reserve == 500000000ull);
    setenv("CUDA_EXPERT_GB", "auto", 1);
    REQUIRE(tier::settings_from_environment(1, &one, &why));
    CHECK(one.budget.automatic);
    for (const char *v : {"PIN_FILL", "CUDA_EXPERT_GB", "CUDA_RESERVE_GB"}) unsetenv(v);
}
