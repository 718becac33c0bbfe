// Matmul benchmarks of every registered host variant (src/registry.h) at the GLM-5 expert shapes,
// for every format and numerics mode. Counters: weight bytes per second and FLOP per second.
//
//   coli-bench-matmul --benchmark_filter='cpu_backend/Q4' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "cpu/matmul_cpu.h"
#include "cpu_bench_main.h"
#include "registry.h"
#include "testing/test_data.h"

using namespace coli;

namespace {

void bench_matmul(benchmark::State &state, MatmulFn fn, int fmt, int mode, int64_t O, int64_t I) {
    const int64_t S = state.range(0);
    const testing::Quantized q = testing::random_quantized(fmt, O, I, fmt == COLI_FORMAT_G4 ? 128 : 0, 1);
    const std::vector<float> x = testing::random_normal(static_cast<size_t>(S * I), 2);
    std::vector<float> y(static_cast<size_t>(S * O));
    for (auto _ : state) {
        fn(q.view(), x.data(), y.data(), S, mode);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.counters["weight_bytes_per_second"] =
        benchmark::Counter(static_cast<double>(q.L.total_bytes()), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["flop_per_second"] = benchmark::Counter(2.0 * static_cast<double>(O * I * S),
                                                           benchmark::Counter::kIsIterationInvariantRate);
    state.counters["threads"] = cpu::threads();
}

void register_all() {
    const int formats[] = {COLI_FORMAT_F32, COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4};
    const int64_t shapes[][2] = {{kGlm5ExpertIntermediate, kGlm5Hidden}, {kGlm5Hidden, kGlm5ExpertIntermediate}};
    for (const MatmulVariant &v : matmul_variants()) {
        for (int fmt : formats) {
            for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
                if (mode == COLI_NUMERICS_EXACT && fmt == COLI_FORMAT_F32) continue;
                for (const auto &shape : shapes) {
                    const std::string name = std::string("BM_matmul/") + v.name + "/" + format_name(fmt) + "/" +
                                             (mode == COLI_NUMERICS_EXACT ? "exact" : "float") +
                                             "/O:" + std::to_string(shape[0]) + "/I:" + std::to_string(shape[1]);
                    auto *b = benchmark::RegisterBenchmark(name.c_str(), bench_matmul, v.fn, fmt, mode, shape[0], shape[1]);
                    b->ArgName("S")->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
                    if (!v.is_reference) b->Arg(8)->Arg(32); // the reference is too slow for prefill rows
                }
            }
        }
    }
}

} // namespace

int main(int argc, char **argv) { return run_cpu_benchmarks("coli-bench-matmul", argc, argv, register_all); }
