// CPU expert benchmarks: the fused expert MLP and the top-8 expert group at the GLM-5 expert
// shapes (gate/up 2048x6144, down 6144x2048), for every registered host matmul variant
// (src/registry.h), format and numerics mode: the CPU side of coli-bench-gpu's BM_gpu_group8 and
// BM_api_expert_mlp. Counters: weight bytes per second and FLOP per second; every BM_group8 adds
// fraction_of_read_bandwidth, against a probe of the read below made once at first use.
// BM_cpu_limit: the CPU's read bandwidth over a buffer the size of the top-8 group's weights, the
// decode group's roofline, on the same threads. BM_group8_staging: the host staging of a GPU
// group call's activations, which needs no GPU.
//
//   coli-bench-expert --benchmark_filter='cpu_backend/Q4' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include "cpu/clones.h"
#include "cpu/matmul_cpu.h"
#include "gpu/group_inputs.h"
#include "ref/expert_ref.h"
#include "cpu_bench_main.h"
#include "registry.h"
#include "top8_group.h"
#include "testing/test_data.h"

using namespace coli;

namespace {

struct Expert {
    testing::Quantized gate, up, down;
    ExpertView view() const { return {gate.view(), up.view(), down.view()}; }
    double bytes() const {
        return static_cast<double>(gate.L.total_bytes() + up.L.total_bytes() + down.L.total_bytes());
    }
};

// kGlm5TopK experts per format, made once for the whole run.
const std::vector<Expert> &experts(int fmt) {
    static std::map<int, std::vector<Expert>> cache;
    std::vector<Expert> &list = cache[fmt];
    if (list.empty()) {
        for (auto &m : top8_weights(fmt)) list.push_back({std::move(m[0]), std::move(m[1]), std::move(m[2])});
    }
    return list;
}

void counters(benchmark::State &state, double bytes, double flops) {
    state.counters["weight_bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["flop_per_second"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["threads"] = cpu::threads();
}

// Three projections of D x F per row.
double mlp_flops(int64_t rows) { return 3.0 * 2.0 * static_cast<double>(kGlm5Hidden * kGlm5ExpertIntermediate * rows); }

void bench_expert_mlp(benchmark::State &state, MatmulFn fn, int fmt, int mode) {
    const int64_t S = state.range(0);
    const Expert &e = experts(fmt).front();
    const std::vector<float> x = testing::random_normal(static_cast<size_t>(S * kGlm5Hidden), 2);
    std::vector<float> y(x.size());
    ref::expert_mlp(fn, e.view(), x.data(), y.data(), S, mode); // untimed: first touch of weights and scratch
    for (auto _ : state) {
        ref::expert_mlp(fn, e.view(), x.data(), y.data(), S, mode);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    counters(state, e.bytes(), mlp_flops(S));
}

// Sum of words [0, n): four sums, so the loads, not one add chain, set the pace.
COLI_CPU_CLONES uint64_t sum_words(const uint64_t *w, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += w[i];
        b += w[i + 1];
        c += w[i + 2];
        d += w[i + 3];
    }
    for (; i < n; ++i) a += w[i];
    return a + b + c + d;
}

constexpr size_t kGroupBytes = 151000000; // the top-8 Q4 group's weights (bench/top8_group.h)

// One pass over the buffer, split across cpu::threads() threads as the matmuls are.
void read_pass(const std::vector<uint64_t> &buffer, std::vector<uint64_t> &sums) {
    const size_t words = buffer.size(), n = sums.size(), share = (words + n - 1) / n;
    auto part = [&](size_t t) {
        const size_t b = std::min(words, t * share);
        sums[t] = sum_words(buffer.data() + b, std::min(words, b + share) - b);
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < n; ++t) pool.emplace_back(part, t);
    part(0);
    for (auto &th : pool) th.join();
}

void bench_read_bandwidth(benchmark::State &state) {
    const std::vector<uint64_t> buffer(static_cast<size_t>(state.range(0)) / sizeof(uint64_t), 1); // pages resident
    std::vector<uint64_t> sums(static_cast<size_t>(std::max(1, cpu::threads())));
    for (auto _ : state) {
        read_pass(buffer, sums);
        benchmark::DoNotOptimize(sums.data());
    }
    state.counters["bytes_per_second"] = benchmark::Counter(static_cast<double>(buffer.size() * sizeof(uint64_t)),
                                                            benchmark::Counter::kIsIterationInvariantRate);
    state.counters["threads"] = static_cast<double>(sums.size());
}

// Bytes per second at kGroupBytes, the median of 9 passes, measured once: the denominator of
// the group's fraction_of_read_bandwidth (the fastest pass of a VM runs well above the rest).
double group_read_bandwidth() {
    static const double bw = [] {
        const std::vector<uint64_t> buffer(kGroupBytes / sizeof(uint64_t), 1);
        std::vector<uint64_t> sums(static_cast<size_t>(std::max(1, cpu::threads())));
        std::vector<double> seconds;
        for (int pass = 0; pass < 9; ++pass) {
            const auto t0 = std::chrono::steady_clock::now();
            read_pass(buffer, sums);
            benchmark::DoNotOptimize(sums.data());
            seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::nth_element(seconds.begin(), seconds.begin() + 4, seconds.end());
        return static_cast<double>(buffer.size() * sizeof(uint64_t)) / seconds[4];
    }();
    return bw;
}

// The top-8 group of coli-bench-gpu (top8_group.h) on the CPU.
void bench_group8(benchmark::State &state, MatmulFn fn, int fmt, int mode) {
    Top8Group w = top8_group(state.range(0));
    const std::vector<Expert> &list = experts(fmt);
    std::vector<ExpertView> views;
    double bytes = 0;
    for (const Expert &e : list) {
        views.push_back(e.view());
        bytes += e.bytes();
    }
    const auto run = [&]() {
        ref::expert_group(fn, views.data(), kGlm5TopK, w.row_counts.data(), w.x.data(), w.row_token.data(),
                          w.row_weight.data(), w.y.data(), w.rows, mode);
    };
    run(); // untimed: first touch of weights and scratch
    for (auto _ : state) {
        run();
        benchmark::DoNotOptimize(w.y.data());
        benchmark::ClobberMemory();
    }
    counters(state, bytes, mlp_flops(w.total));
    state.counters["fraction_of_read_bandwidth"] =
        benchmark::Counter(bytes / group_read_bandwidth(), benchmark::Counter::kIsIterationInvariantRate);
}

// The host staging of a GPU expert-group call (gpu/group_inputs.h): find the rows that repeat the
// first expert's or the previous expert's, bit for bit, and gather the others. Groups of several
// tokens do it before their first launch; a one-token group compares while the device computes
// (docs/performance.md: 4.6 us of the H200 decode call's 67 before that change). No GPU needed.
void bench_group_staging(benchmark::State &state) {
    const Top8Group w = top8_group(state.range(0));
    std::vector<float> staged(w.x.size());
    for (auto _ : state) {
        const gpu::GroupInputs in = gpu::plan_group_inputs(w.row_counts.data(), w.row_counts.size(), w.x.data(), kGlm5Hidden);
        gpu::gather_group_inputs(in, w.row_counts.data(), w.x.data(), kGlm5Hidden, staged.data());
        benchmark::DoNotOptimize(staged.data());
        benchmark::ClobberMemory();
    }
    state.counters["input_bytes_per_second"] = benchmark::Counter(static_cast<double>(w.x.size() * sizeof(float)),
                                                                  benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
    // As coli-bench-gpu's BM_limit/read_bandwidth/151000000.
    benchmark::RegisterBenchmark("BM_cpu_limit/read_bandwidth", bench_read_bandwidth)->Arg(kGroupBytes)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_group8_staging", bench_group_staging)->ArgName("rows_per_expert")->Arg(1)->Arg(4)->Unit(benchmark::kMicrosecond);
    const int formats[] = {COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4};
    for (const MatmulVariant &v : matmul_variants()) {
        for (int fmt : formats) {
            for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
                const std::string suffix = std::string(v.name) + "/" + format_name(fmt) + "/" +
                                           (mode == COLI_NUMERICS_EXACT ? "exact" : "float");
                auto *mlp = benchmark::RegisterBenchmark(("BM_expert_mlp/" + suffix).c_str(), bench_expert_mlp, v.fn, fmt, mode);
                mlp->ArgName("S")->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
                auto *group = benchmark::RegisterBenchmark(("BM_group8/" + suffix).c_str(), bench_group8, v.fn, fmt, mode);
                group->ArgName("rows_per_expert")->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
                if (!v.is_reference) { // the reference is too slow for prefill rows
                    mlp->Arg(8)->Arg(32);
                    group->Arg(4);
                }
            }
        }
    }
}

} // namespace

int main(int argc, char **argv) { return run_cpu_benchmarks("coli-bench-expert", argc, argv, register_all); }
