// GPU device test: lists the visible devices through the C API and evaluates the shared numerics
// header on each device, comparing every result bit with the host compiler's. Exits 77 (Meson:
// SKIP) when the build has no GPU backend or the runtime sees no device.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "coli/coli.h"
#include "gpu/gpu_backend.h"
#include "numerics/exact_math.h"
#include "testing/test_data.h"

using namespace coli;

namespace {

constexpr int kSkip = 77;

int check_device(int ordinal) {
    coli_device_info info;
    if (coli_device_info_get(ordinal, &info) != COLI_OK) {
        std::printf("device %d: %s\n", ordinal, coli_last_error());
        return 1;
    }
    std::printf("[GPU] device %d: %s %s %.1f GiB (%s, warp %d%s)\n", ordinal, info.name, info.arch,
                static_cast<double>(info.memory_bytes) / (1024.0 * 1024.0 * 1024.0), info.runtime, info.warp_size,
                info.has_tensor_cores ? ", tensor cores" : "");

    // Inputs: a sweep over exp's whole range plus special values; random int8x4 dot operands.
    std::vector<float> x;
    for (int k = 0; k <= 200000; ++k) x.push_back(-90.0f + 180.0f * static_cast<float>(k) / 200000.0f);
    for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72283f, -87.33654f, 0.5f, -0.5f, 126.5f, -126.5f}) x.push_back(v);
    const int n = static_cast<int>(x.size());
    testing::Rng rng(42);
    std::vector<int> a(n), b(n), c(n);
    for (int k = 0; k < n; ++k) {
        a[k] = static_cast<int>(rng.next());
        b[k] = static_cast<int>(rng.next());
        c[k] = static_cast<int>(rng.next() % 2000001) - 1000000;
    }
    a[0] = b[0] = static_cast<int>(0x80808080u); // -128 in every lane: 4 * 16384
    std::vector<float> e(n), s(n);
    std::vector<int8_t> q(n);
    std::vector<int> d(n);
    float sx = 0;
    gpu::NumericsProbe p;
    p.n = n;
    p.x = x.data();
    p.a = a.data();
    p.b = b.data();
    p.c = c.data();
    p.exp_out = e.data();
    p.silu_out = s.data();
    p.codes = q.data();
    p.sx = &sx;
    p.dot_out = d.data();
    std::string why;
    if (gpu::run_numerics_probe(ordinal, p, &why) != COLI_OK) {
        std::printf("device %d: numerics probe failed: %s\n", ordinal, why.c_str());
        return 1;
    }
    size_t exp_diff = 0, silu_diff = 0, dot_diff = 0, code_diff = 0;
    std::vector<int8_t> host_q(n);
    const float host_sx = coli_quantize_row(x.data(), n, host_q.data());
    for (int k = 0; k < n; ++k) {
        const float he = coli_expf(x[k]), hs = coli_silu(x[k]);
        exp_diff += std::memcmp(&he, &e[k], 4) != 0;
        silu_diff += std::memcmp(&hs, &s[k], 4) != 0;
        int hd = c[k];
        for (int lane = 0; lane < 4; ++lane) {
            hd += static_cast<int8_t>(a[k] >> (8 * lane)) * static_cast<int8_t>(b[k] >> (8 * lane));
        }
        dot_diff += hd != d[k];
        code_diff += host_q[k] != q[k];
    }
    const bool sx_same = std::memcmp(&sx, &host_sx, 4) == 0;
    std::printf("device %d: %d inputs, bit differences from the host: exp %zu, silu %zu, activation codes %zu, "
                "scale %s, dot4 %zu\n",
                ordinal, n, exp_diff, silu_diff, code_diff, sx_same ? "same" : "DIFFERENT", dot_diff);
    return exp_diff + silu_diff + dot_diff + code_diff == 0 && sx_same ? 0 : 1;
}

} // namespace

int main() {
    const std::string backend = coli_gpu_backend();
    int count = 0;
    const coli_status st = coli_gpu_count(&count);
    if (backend == "none") {
        std::printf("SKIP: %s build has no GPU backend\n", backend.c_str());
        return kSkip;
    }
    if (st != COLI_OK || count == 0) {
        std::printf("SKIP: %s backend, no device: %s\n", backend.c_str(), coli_last_error());
        return kSkip;
    }
    int failures = 0;
    for (int d = 0; d < count; ++d) failures += check_device(d);
    std::printf("%d device(s), %d failed\n", count, failures);
    return failures == 0 ? 0 : 1;
}
