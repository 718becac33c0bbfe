// The C API on the CPU device: lifecycle, tensors, statistics, compute and every rejected input.
// A rejected call must return its status, say why, and leave tensors, counters and outputs as
// they were.
#include <cstdlib>
#include <string>
#include <thread>

#include "catch_compat.h"
#include "api/runtime.h"
#include "coli/coli.h"
#include "cpu/matmul_cpu.h"
#include "ref/expert_ref.h"
#include "ref/matmul_ref.h"
#include "testing/test_data.h"

using namespace coli;
using namespace coli::testing;

namespace {

struct Session {
    Session() { REQUIRE(coli_init(nullptr, 0) == COLI_OK); }
    ~Session() { coli_shutdown(); }
};

coli_stats stats(int device = COLI_DEVICE_ALL) {
    coli_stats s{99, 99};
    REQUIRE(coli_stats_get(device, &s) == COLI_OK);
    return s;
}

bool same(const coli_stats &a, const coli_stats &b) { return a.tensors == b.tensors && a.bytes == b.bytes; }

// Expects a failure with the given status whose message names the function and contains text.
void expect_error(coli_status got, coli_status want, const char *function, const std::string &text) {
    CHECK(got == want);
    const std::string msg = coli_last_error();
    INFO("message: " << msg);
    CHECK(msg.rfind(function, 0) == 0);
    CHECK(msg.find(text) != std::string::npos);
}

coli_tensor upload(const Quantized &q) {
    coli_tensor t = nullptr;
    REQUIRE(coli_tensor_upload(&t, q.L.fmt, q.L.O, q.L.I, q.L.gs, q.weights.data(),
                               q.scales.empty() ? nullptr : q.scales.data(), COLI_DEVICE_CPU) == COLI_OK);
    return t;
}

} // namespace

TEST_CASE("status names, version and backend", "[api]") {
    CHECK(std::string(coli_status_name(COLI_OK)) == "COLI_OK");
    CHECK(std::string(coli_status_name(COLI_ERR_NO_DEVICE)) == "COLI_ERR_NO_DEVICE");
    CHECK(std::string(coli_status_name(static_cast<coli_status>(-99))) == "COLI_ERR_UNKNOWN_STATUS");
    CHECK(coli_abi_version() == COLI_ABI_VERSION);
    CHECK(std::string(coli_version()).size() > 0);
    const std::string backend = coli_gpu_backend();
    CHECK((backend == "none" || backend == "cuda" || backend == "hip"));
}

TEST_CASE("init and shutdown: state machine and rejected device lists", "[api][lifecycle]") {
    coli_shutdown();
    coli_tensor t = nullptr;
    const float w[4] = {1, 2, 3, 4};
    expect_error(coli_tensor_upload(&t, COLI_FORMAT_F32, 2, 2, 0, w, nullptr, COLI_DEVICE_CPU),
                 COLI_ERR_INVALID_ARGUMENT, "coli_tensor_upload", "coli_init");
    const int dup[2] = {COLI_DEVICE_CPU, COLI_DEVICE_CPU};
    expect_error(coli_init(dup, 2), COLI_ERR_INVALID_ARGUMENT, "coli_init", "listed twice");
    const int bad[1] = {-7};
    expect_error(coli_init(bad, 1), COLI_ERR_INVALID_ARGUMENT, "coli_init", "-7");
    expect_error(coli_init(nullptr, 2), COLI_ERR_INVALID_ARGUMENT, "coli_init", "count");
    expect_error(coli_init(dup, -1), COLI_ERR_INVALID_ARGUMENT, "coli_init", "count");
    // A GPU ordinal never falls back to the CPU: without a GPU backend or device it is refused.
    const int gpu[1] = {0};
    int n_gpus = 0;
    const bool have_gpu = coli_gpu_count(&n_gpus) == COLI_OK && n_gpus > 0;
    const coli_status st = coli_init(gpu, 1);
    if (have_gpu) {
        CHECK(st == COLI_OK);
        coli_shutdown();
    } else {
        CHECK(st == COLI_ERR_NO_DEVICE);
    }
    const int far_gpu[1] = {4096};
    expect_error(coli_init(far_gpu, 1), COLI_ERR_NO_DEVICE, "coli_init", "4096");
    const int cpu[1] = {COLI_DEVICE_CPU};
    REQUIRE(coli_init(cpu, 1) == COLI_OK);
    expect_error(coli_init(cpu, 1), COLI_ERR_INVALID_ARGUMENT, "coli_init", "already initialized");
    CHECK(coli_shutdown() == COLI_OK);
    CHECK(coli_shutdown() == COLI_OK); // harmless twice
}

TEST_CASE("a CPU-only build reports no GPU and describes the CPU", "[api][devices]") {
    int n = -1;
    const coli_status st = coli_gpu_count(&n);
    if (std::string(coli_gpu_backend()) == "none") {
        CHECK(st == COLI_OK);
        CHECK(n == 0);
        coli_device_info info;
        expect_error(coli_device_info_get(0, &info), COLI_ERR_NO_DEVICE, "coli_device_info_get", "without a GPU backend");
    } else {
        CHECK(((st == COLI_OK && n > 0) || (st == COLI_ERR_NO_DEVICE && n == 0)));
    }
    coli_device_info cpu;
    REQUIRE(coli_device_info_get(COLI_DEVICE_CPU, &cpu) == COLI_OK);
    CHECK(std::string(cpu.vendor) == "CPU");
    CHECK(cpu.memory_bytes > 0);
    CHECK(std::string(cpu.name).size() > 0);
    expect_error(coli_device_info_get(COLI_DEVICE_CPU, nullptr), COLI_ERR_INVALID_ARGUMENT, "coli_device_info_get", "NULL");
    expect_error(coli_gpu_count(nullptr), COLI_ERR_INVALID_ARGUMENT, "coli_gpu_count", "NULL");
}

TEST_CASE("COLI_CPU_THREADS is parsed strictly at init", "[api][env]") {
    coli_shutdown();
    for (const char *bad : {"lots", "4x", "0", "-2", " 3", "99999999999999999999"}) {
        INFO("COLI_CPU_THREADS=" << bad);
        setenv("COLI_CPU_THREADS", bad, 1);
        expect_error(coli_init(nullptr, 0), COLI_ERR_INVALID_ARGUMENT, "coli_init", "COLI_CPU_THREADS");
        coli_stats s{9, 9};
        CHECK(coli_stats_get(COLI_DEVICE_ALL, &s) == COLI_OK);
        CHECK(s.tensors == 0);
    }
    setenv("COLI_CPU_THREADS", "3", 1);
    REQUIRE(coli_init(nullptr, 0) == COLI_OK);
    CHECK(cpu::threads() == 3);
    coli_shutdown();
    unsetenv("COLI_CPU_THREADS");
}

TEST_CASE("uploads are accounted per device and return to zero when freed", "[api][tensors]") {
    Session session;
    const Quantized a = random_quantized(COLI_FORMAT_Q4, 16, 33, 0, 1);
    const Quantized b = random_quantized(COLI_FORMAT_G4, 8, 100, 32, 2);
    coli_tensor ta = upload(a), tb = upload(b);
    const uint64_t bytes = a.L.total_bytes() + b.L.total_bytes();
    CHECK(stats().tensors == 2);
    CHECK(stats().bytes == bytes);
    CHECK(stats(COLI_DEVICE_CPU).bytes == bytes);
    CHECK(a.L.total_bytes() == 16 * 17 + 16 * 4);
    coli_tensor_desc d;
    REQUIRE(coli_tensor_describe(tb, &d) == COLI_OK);
    CHECK((d.format == COLI_FORMAT_G4 && d.O == 8 && d.I == 100 && d.gs == 32 && d.device == COLI_DEVICE_CPU));
    CHECK(d.bytes == b.L.total_bytes());
    REQUIRE(coli_tensor_free(ta) == COLI_OK);
    CHECK(stats().tensors == 1);
    CHECK(stats().bytes == b.L.total_bytes());
    REQUIRE(coli_tensor_free(tb) == COLI_OK);
    CHECK(same(stats(), coli_stats{0, 0}));
    expect_error(coli_stats_get(3, nullptr), COLI_ERR_INVALID_ARGUMENT, "coli_stats_get", "NULL");
    coli_stats s;
    expect_error(coli_stats_get(3, &s), COLI_ERR_INVALID_ARGUMENT, "coli_stats_get", "not started");
}

TEST_CASE("rejected uploads leave every counter unchanged", "[api][tensors]") {
    Session session;
    const Quantized keep = random_quantized(COLI_FORMAT_Q8, 4, 8, 0, 3);
    coli_tensor kept = upload(keep);
    const coli_stats before = stats();
    const Quantized q = random_quantized(COLI_FORMAT_Q8, 4, 8, 0, 4);
    coli_tensor t = nullptr;
    const char *fn = "coli_tensor_upload";
    expect_error(coli_tensor_upload(nullptr, 1, 4, 8, 0, q.weights.data(), q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "out");
    expect_error(coli_tensor_upload(&t, 7, 4, 8, 0, q.weights.data(), q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "unknown format code 7");
    expect_error(coli_tensor_upload(&t, -1, 4, 8, 0, q.weights.data(), q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "unknown format");
    expect_error(coli_tensor_upload(&t, 1, 0, 8, 0, q.weights.data(), q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "positive");
    expect_error(coli_tensor_upload(&t, 1, 4, -8, 0, q.weights.data(), q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "positive");
    expect_error(coli_tensor_upload(&t, 1, 4, 8, 8, q.weights.data(), q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "gs");
    expect_error(coli_tensor_upload(&t, 4, 4, 8, 12, q.weights.data(), q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "multiple of 8");
    expect_error(coli_tensor_upload(&t, 1, 4, 8, 0, nullptr, q.scales.data(), -1), COLI_ERR_INVALID_ARGUMENT, fn, "weights");
    expect_error(coli_tensor_upload(&t, 1, 4, 8, 0, q.weights.data(), nullptr, -1), COLI_ERR_INVALID_ARGUMENT, fn, "scales");
    expect_error(coli_tensor_upload(&t, 1, 4, 8, 0, q.weights.data(), q.scales.data(), 0), COLI_ERR_NO_DEVICE, fn, "device 0");
    expect_error(coli_tensor_upload(&t, 0, int64_t(1) << 40, 8, 0, q.weights.data(), nullptr, -1), COLI_ERR_INVALID_ARGUMENT, fn, "must not exceed");
    // About 1.15e18 bytes: a valid size that no machine can hold.
    expect_error(coli_tensor_upload(&t, 3, INT32_MAX, INT32_MAX, 0, q.weights.data(), q.scales.data(), -1),
                 COLI_ERR_OUT_OF_MEMORY, fn, "cannot allocate");
    CHECK(t == nullptr);
    CHECK(same(stats(), before));
    REQUIRE(coli_tensor_free(kept) == COLI_OK);
}

TEST_CASE("freeing twice or freeing a foreign handle is an error that changes nothing", "[api][tensors]") {
    Session session;
    coli_tensor a = upload(random_quantized(COLI_FORMAT_Q2, 3, 9, 0, 5));
    coli_tensor b = upload(random_quantized(COLI_FORMAT_Q2, 3, 9, 0, 6));
    REQUIRE(coli_tensor_free(a) == COLI_OK);
    const coli_stats before = stats();
    expect_error(coli_tensor_free(a), COLI_ERR_INVALID_ARGUMENT, "coli_tensor_free", "freed twice");
    expect_error(coli_tensor_free(nullptr), COLI_ERR_INVALID_ARGUMENT, "coli_tensor_free", "not a live tensor");
    int not_a_tensor = 0;
    expect_error(coli_tensor_free(reinterpret_cast<coli_tensor>(&not_a_tensor)), COLI_ERR_INVALID_ARGUMENT,
                 "coli_tensor_free", "not a live tensor");
    CHECK(same(stats(), before));
    REQUIRE(coli_tensor_free(b) == COLI_OK);
}

TEST_CASE("the library keeps its own copy: host buffers may be freed right after upload", "[api][tensors]") {
    Session session;
    std::vector<float> x = random_normal(2 * 40, 8);
    coli_tensor t;
    std::vector<float> want(2 * 12);
    {
        Quantized q = random_quantized(COLI_FORMAT_Q4, 12, 40, 0, 7);
        ref::matmul(q.view(), x.data(), want.data(), 2, COLI_NUMERICS_EXACT);
        t = upload(q);
        std::fill(q.weights.begin(), q.weights.end(), 0x5A);
        std::fill(q.scales.begin(), q.scales.end(), 1e9f);
    } // q's buffers are gone
    std::vector<float> y(2 * 12);
    REQUIRE(coli_matmul(t, y.data(), x.data(), 2, COLI_NUMERICS_EXACT) == COLI_OK);
    CHECK(count_bit_differences(want.data(), y.data(), y.size()) == 0);
    coli_tensor_free(t);
}

TEST_CASE("tensor_update replaces contents in place; a rejected update keeps them", "[api][tensors]") {
    Session session;
    const Quantized q1 = random_quantized(COLI_FORMAT_G4, 10, 64, 16, 1), q2 = random_quantized(COLI_FORMAT_G4, 10, 64, 16, 2);
    const std::vector<float> x = random_normal(64, 3);
    std::vector<float> want1(10), want2(10), y(10);
    ref::matmul(q1.view(), x.data(), want1.data(), 1, COLI_NUMERICS_EXACT);
    ref::matmul(q2.view(), x.data(), want2.data(), 1, COLI_NUMERICS_EXACT);
    coli_tensor t = upload(q1);
    const coli_stats before = stats();
    REQUIRE(coli_tensor_update(t, q2.weights.data(), q2.scales.data()) == COLI_OK);
    CHECK(same(stats(), before));
    REQUIRE(coli_matmul(t, y.data(), x.data(), 1, COLI_NUMERICS_EXACT) == COLI_OK);
    CHECK(count_bit_differences(want2.data(), y.data(), 10) == 0);
    expect_error(coli_tensor_update(t, nullptr, q1.scales.data()), COLI_ERR_INVALID_ARGUMENT, "coli_tensor_update", "weights");
    expect_error(coli_tensor_update(t, q1.weights.data(), nullptr), COLI_ERR_INVALID_ARGUMENT, "coli_tensor_update", "scales");
    REQUIRE(coli_matmul(t, y.data(), x.data(), 1, COLI_NUMERICS_EXACT) == COLI_OK);
    CHECK(count_bit_differences(want2.data(), y.data(), 10) == 0);
    coli_tensor_free(t);
    expect_error(coli_tensor_update(t, q1.weights.data(), q1.scales.data()), COLI_ERR_INVALID_ARGUMENT,
                 "coli_tensor_update", "not a live tensor");
}

TEST_CASE("coli_matmul computes the reference and rejects bad calls without writing y", "[api][compute]") {
    Session session;
    const Quantized q = random_quantized(COLI_FORMAT_Q8, 6, 20, 0, 11);
    const Quantized f = random_quantized(COLI_FORMAT_F32, 6, 20, 0, 12);
    coli_tensor t = upload(q), tf = upload(f);
    const std::vector<float> x = random_normal(3 * 20, 13);
    for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
        std::vector<float> want(18), y(18, -1.0f);
        ref::matmul(q.view(), x.data(), want.data(), 3, mode);
        REQUIRE(coli_matmul(t, y.data(), x.data(), 3, mode) == COLI_OK);
        CHECK(count_bit_differences(want.data(), y.data(), 18) == 0);
    }
    std::vector<float> y(18, -1.0f);
    const char *fn = "coli_matmul";
    expect_error(coli_matmul(t, nullptr, x.data(), 3, 0), COLI_ERR_INVALID_ARGUMENT, fn, "NULL");
    expect_error(coli_matmul(t, y.data(), nullptr, 3, 0), COLI_ERR_INVALID_ARGUMENT, fn, "NULL");
    expect_error(coli_matmul(t, y.data(), x.data(), 0, 0), COLI_ERR_INVALID_ARGUMENT, fn, "S must be positive");
    expect_error(coli_matmul(t, y.data(), x.data(), -4, 0), COLI_ERR_INVALID_ARGUMENT, fn, "S must be positive");
    expect_error(coli_matmul(t, y.data(), x.data(), INT64_MAX / 4, 0), COLI_ERR_INVALID_ARGUMENT, fn, "overflow");
    expect_error(coli_matmul(t, y.data(), x.data(), 3, 2), COLI_ERR_INVALID_ARGUMENT, fn, "numerics");
    expect_error(coli_matmul(tf, y.data(), x.data(), 3, COLI_NUMERICS_EXACT), COLI_ERR_UNSUPPORTED, fn, "F32");
    expect_error(coli_matmul(nullptr, y.data(), x.data(), 3, 0), COLI_ERR_INVALID_ARGUMENT, fn, "live tensor");
    for (float v : y) CHECK(v == -1.0f);
    coli_tensor_free(t);
    coli_tensor_free(tf);
    expect_error(coli_matmul(t, y.data(), x.data(), 3, 0), COLI_ERR_INVALID_ARGUMENT, fn, "live tensor");
}

TEST_CASE("exact mode refuses shapes whose int32 accumulator could overflow", "[api][compute]") {
    Session session;
    // Q8: 127 * 128 * I must stay below 2^31, so I = 140000 is refused.
    const int64_t I = 140000;
    std::vector<uint8_t> w(I, 1);
    const float scale = 1.0f;
    coli_tensor t;
    REQUIRE(coli_tensor_upload(&t, COLI_FORMAT_Q8, 1, I, 0, w.data(), &scale, COLI_DEVICE_CPU) == COLI_OK);
    std::vector<float> x(I, 1.0f);
    float y = 0;
    expect_error(coli_matmul(t, &y, x.data(), 1, COLI_NUMERICS_EXACT), COLI_ERR_UNSUPPORTED, "coli_matmul", "overflow");
    CHECK(coli_matmul(t, &y, x.data(), 1, COLI_NUMERICS_FLOAT) == COLI_OK);
    CHECK(y == static_cast<float>(I));
    coli_tensor_free(t);
}

TEST_CASE("expert MLP and expert group through the API equal the reference", "[api][compute][expert]") {
    Session session;
    const int64_t D = 40, F = 24;
    auto make = [&](uint64_t seed) {
        return coli_expert{upload(random_quantized(COLI_FORMAT_Q4, F, D, 0, seed)),
                           upload(random_quantized(COLI_FORMAT_Q4, F, D, 0, seed + 1)),
                           upload(random_quantized(COLI_FORMAT_Q4, D, F, 0, seed + 2))};
    };
    const coli_expert e0 = make(10), e1 = make(20);
    auto view = [](const coli_expert &e) { return ExpertView{e.gate->view(), e.up->view(), e.down->view()}; };
    const std::vector<float> x = random_normal(4 * D, 5);
    std::vector<float> want(4 * D), y(4 * D);
    ref::expert_mlp(ref::matmul, view(e0), x.data(), want.data(), 4, COLI_NUMERICS_EXACT);
    REQUIRE(coli_expert_mlp(&e0, y.data(), x.data(), 4, COLI_NUMERICS_EXACT) == COLI_OK);
    CHECK(count_bit_differences(want.data(), y.data(), y.size()) == 0);

    const coli_expert group[2] = {e0, e1};
    const ExpertView views[2] = {view(e0), view(e1)};
    const int64_t rows[2] = {1, 3};
    const int64_t token[4] = {1, 0, 1, 2};
    const float weight[4] = {0.25f, 0.5f, 0.75f, 1.0f};
    std::vector<float> gwant(3 * D), gy(3 * D);
    ref::expert_group(ref::matmul, views, 2, rows, x.data(), token, weight, gwant.data(), 3, COLI_NUMERICS_EXACT);
    REQUIRE(coli_expert_group(group, 2, rows, x.data(), token, weight, gy.data(), 3, COLI_NUMERICS_EXACT) == COLI_OK);
    CHECK(count_bit_differences(gwant.data(), gy.data(), gy.size()) == 0);

    // Rejected calls leave y alone.
    std::fill(gy.begin(), gy.end(), 5.0f);
    const char *fn = "coli_expert_group";
    const int64_t bad_token[4] = {1, 0, 3, 2};
    expect_error(coli_expert_group(group, 2, rows, x.data(), bad_token, weight, gy.data(), 3, 1), COLI_ERR_INVALID_ARGUMENT, fn, "row_token[2]");
    expect_error(coli_expert_group(group, 2, rows, x.data(), nullptr, weight, gy.data(), 3, 1), COLI_ERR_INVALID_ARGUMENT, fn, "n_tokens");
    const int64_t neg_rows[2] = {1, -1};
    expect_error(coli_expert_group(group, 2, neg_rows, x.data(), token, weight, gy.data(), 3, 1), COLI_ERR_INVALID_ARGUMENT, fn, "negative");
    expect_error(coli_expert_group(group, 0, rows, x.data(), token, weight, gy.data(), 3, 1), COLI_ERR_INVALID_ARGUMENT, fn, "n_experts");
    expect_error(coli_expert_group(nullptr, 2, rows, x.data(), token, weight, gy.data(), 3, 1), COLI_ERR_INVALID_ARGUMENT, fn, "NULL");
    for (float v : gy) CHECK(v == 5.0f);

    const coli_expert mismatched{e0.gate, e0.up, e0.gate};
    expect_error(coli_expert_mlp(&mismatched, y.data(), x.data(), 1, 1), COLI_ERR_INVALID_ARGUMENT, "coli_expert_mlp", "mismatched expert shapes");
    for (const coli_expert &e : group) {
        coli_tensor_free(e.gate);
        coli_tensor_free(e.up);
        coli_tensor_free(e.down);
    }
    expect_error(coli_expert_mlp(&e0, y.data(), x.data(), 1, 1), COLI_ERR_INVALID_ARGUMENT, "coli_expert_mlp", "live tensor");
}

TEST_CASE("shutdown frees every tensor and zeroes the counters", "[api][lifecycle]") {
    coli_tensor t;
    {
        REQUIRE(coli_init(nullptr, 0) == COLI_OK);
        t = upload(random_quantized(COLI_FORMAT_Q8, 5, 5, 0, 1));
        upload(random_quantized(COLI_FORMAT_Q8, 5, 5, 0, 2));
        CHECK(stats().tensors == 2);
        REQUIRE(coli_shutdown() == COLI_OK);
    }
    CHECK(same(stats(), coli_stats{0, 0}));
    expect_error(coli_tensor_free(t), COLI_ERR_INVALID_ARGUMENT, "coli_tensor_free", "not a live tensor");
}

TEST_CASE("concurrent compute calls give the single-threaded results", "[api][compute]") {
    Session session;
    const Quantized q = random_quantized(COLI_FORMAT_Q4, 64, 256, 0, 9);
    coli_tensor t = upload(q);
    const std::vector<float> x = random_normal(2 * 256, 10);
    std::vector<float> want(2 * 64);
    ref::matmul(q.view(), x.data(), want.data(), 2, COLI_NUMERICS_EXACT);
    std::vector<size_t> diffs(4, 1);
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) {
        threads.emplace_back([&, k] {
            std::vector<float> y(2 * 64);
            size_t d = 0;
            for (int rep = 0; rep < 20; ++rep) {
                if (coli_matmul(t, y.data(), x.data(), 2, COLI_NUMERICS_EXACT) != COLI_OK) ++d;
                d += count_bit_differences(want.data(), y.data(), y.size());
            }
            diffs[k] = d;
        });
    }
    for (auto &th : threads) th.join();
    for (size_t d : diffs) CHECK(d == 0);
    coli_tensor_free(t);
}

TEST_CASE("format sizes, quantize and dequantize through the API, with their rejected inputs", "[api][formats]") {
    size_t wb = 0, sc = 0;
    REQUIRE(coli_format_sizes(COLI_FORMAT_G4, 3, 20, 8, &wb, &sc) == COLI_OK);
    CHECK((wb == 30 && sc == 9));
    expect_error(coli_format_sizes(9, 3, 20, 0, &wb, &sc), COLI_ERR_INVALID_ARGUMENT, "coli_format_sizes", "unknown format code 9");
    expect_error(coli_format_sizes(COLI_FORMAT_Q8, 3, 20, 0, nullptr, &sc), COLI_ERR_INVALID_ARGUMENT, "coli_format_sizes", "NULL");
    std::vector<float> w = random_normal(3 * 20, 1);
    std::vector<uint8_t> q(wb, 0xEE);
    std::vector<float> s(sc, 7.0f), back(60);
    REQUIRE(coli_quantize(COLI_FORMAT_G4, 3, 20, 8, w.data(), q.data(), s.data()) == COLI_OK);
    REQUIRE(coli_dequantize(COLI_FORMAT_G4, 3, 20, 8, q.data(), s.data(), back.data()) == COLI_OK);
    const Quantized direct = quantized(COLI_FORMAT_G4, 3, 20, 8, w);
    CHECK(q == direct.weights);
    CHECK(s == direct.scales);
    // A non-finite weight is refused by name, and nothing is written.
    const std::vector<uint8_t> q_before = q;
    w[1 * 20 + 2] = std::nanf("");
    expect_error(coli_quantize(COLI_FORMAT_G4, 3, 20, 8, w.data(), q.data(), s.data()), COLI_ERR_INVALID_ARGUMENT,
                 "coli_quantize", "w[1][2] is not finite");
    CHECK(q == q_before);
    expect_error(coli_quantize(COLI_FORMAT_Q4, 3, 20, 0, w.data(), q.data(), nullptr), COLI_ERR_INVALID_ARGUMENT,
                 "coli_quantize", "scales");
    expect_error(coli_dequantize(COLI_FORMAT_Q4, 3, 20, 0, nullptr, s.data(), back.data()), COLI_ERR_INVALID_ARGUMENT,
                 "coli_dequantize", "NULL");
    expect_error(coli_dequantize(COLI_FORMAT_G4, 3, 20, 0, q.data(), s.data(), back.data()), COLI_ERR_INVALID_ARGUMENT,
                 "coli_dequantize", "group size");
}

TEST_CASE("COLI_CUDA=1 without a usable GPU is an error at init, never a CPU fallback", "[api][env]") {
    int n = 0;
    if (coli_gpu_count(&n) == COLI_OK && n > 0) return; // a GPU is there: test_gpu.cpp covers it
    coli_shutdown();
    setenv("COLI_CUDA", "1", 1);
    const coli_status st = coli_init(nullptr, 0);
    CHECK(st == COLI_ERR_NO_DEVICE);
    const std::string msg = coli_last_error();
    INFO(msg);
    CHECK(msg.find("GPU 0") != std::string::npos);
    if (std::string(coli_gpu_backend()) == "none") CHECK(msg.find("without a GPU backend") != std::string::npos);
    // nothing was started: the CPU-only init still works afterwards
    unsetenv("COLI_CUDA");
    REQUIRE(coli_init(nullptr, 0) == COLI_OK);
    coli_shutdown();
}
