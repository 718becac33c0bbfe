// GPU benchmarks against the hardware limits and the vendor BLAS, measured side by side in one
// run (issue: performance). Device times come from events on the library's stream
// (src/gpu/measure.cuh); the API benchmarks time whole calls, transfers and synchronisation
// included.
//
//   coli-bench-gpu --benchmark_format=json --benchmark_out=bench/results/<name>.json
//   bench/run_bench.sh writes that file with the device and commit in its name.
//
// Counters: weight_bytes_per_second, flop_per_second, and fraction_of_read_bw against the read
// bandwidth measured at start-up on 151 MB (the size of a top-8 Q4 expert group).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "api/runtime.h"
#include "blas_baseline.h"
#include "coli/coli.h"
#include "gpu/gpu_backend.h"
#include "registry.h"
#include "testing/test_data.h"
#include "top8_group.h"

using namespace coli;

namespace {

constexpr int kDevice = 0;
constexpr int kIterations = 10;
double g_read_bw = 0; // bytes per second at 151 MB, measured once

void report_error(benchmark::State &state, const std::string &why) { state.SkipWithError(why.c_str()); }

struct DeviceBuffer {
    void *ptr = nullptr;
    explicit DeviceBuffer(size_t bytes) {
        std::string why;
        gpu::buffer_alloc(kDevice, bytes, &ptr, &why);
    }
    ~DeviceBuffer() { gpu::buffer_free(kDevice, ptr); }
};

// One uploaded matrix per (format, O, I), shared by the benchmarks.
struct Matrix {
    testing::Quantized q;
    coli_tensor t = nullptr;
};

Matrix &matrix(int fmt, int64_t O, int64_t I) {
    static std::map<std::tuple<int, int64_t, int64_t>, std::unique_ptr<Matrix>> cache;
    auto &slot = cache[{fmt, O, I}];
    if (!slot) {
        slot = std::make_unique<Matrix>();
        slot->q = testing::random_quantized(fmt, O, I, fmt == COLI_FORMAT_G4 ? 128 : 0, 1000 + fmt + O);
        coli_tensor_upload(&slot->t, fmt, O, I, slot->q.L.gs, slot->q.weights.data(),
                           slot->q.scales.empty() ? nullptr : slot->q.scales.data(), kDevice);
    }
    return *slot;
}

void counters(benchmark::State &state, double bytes, double flops) {
    state.counters["weight_bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["flop_per_second"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    // bytes / time / read_bw: kIsIterationInvariantRate divides by the total time.
    state.counters["fraction_of_read_bw"] =
        benchmark::Counter(g_read_bw > 0 ? bytes / g_read_bw : 0, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_read_bandwidth(benchmark::State &state) {
    const size_t bytes = static_cast<size_t>(state.range(0));
    for (auto _ : state) {
        double s = 0;
        std::string why;
        if (gpu::probe_read_bandwidth(kDevice, bytes, kIterations, &s, &why) != COLI_OK) return report_error(state, why);
        state.SetIterationTime(s);
    }
    state.counters["bytes_per_second"] = benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_copy(benchmark::State &state) {
    const size_t bytes = static_cast<size_t>(state.range(0));
    for (auto _ : state) {
        double s = 0;
        std::string why;
        if (gpu::probe_copy(kDevice, bytes, kIterations, &s, &why) != COLI_OK) return report_error(state, why);
        state.SetIterationTime(s);
    }
    // bytes read plus bytes written
    state.counters["bytes_per_second"] = benchmark::Counter(2.0 * bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_matmul(benchmark::State &state, int fmt, int mode, int64_t O, int64_t I, gpu::MatmulPath path) {
    const int64_t S = state.range(0);
    Matrix &m = matrix(fmt, O, I);
    const std::vector<float> x = testing::random_normal(static_cast<size_t>(S * I), 7);
    DeviceBuffer xd(x.size() * 4), yd(static_cast<size_t>(S * O) * 4);
    std::string why;
    gpu::buffer_write(kDevice, xd.ptr, x.data(), x.size() * 4, &why);
    for (auto _ : state) {
        double s = 0;
        if (gpu::time_matmul_device(m.t->device_tensor, static_cast<float *>(xd.ptr), static_cast<float *>(yd.ptr), S, mode,
                                    path, kIterations, &s, &why) != COLI_OK) {
            return report_error(state, why);
        }
        state.SetIterationTime(s);
    }
    counters(state, static_cast<double>(m.q.L.total_bytes()), 2.0 * O * I * S);
}

// The expert group of 8 GLM-5 experts (gate/up 2048x6144, down 6144x2048), `rows` rows each.
struct Group {
    std::vector<Matrix *> mats;
    std::vector<coli_expert> experts;
    double bytes = 0;
};

Group &group(int fmt) {
    static std::map<int, Group> cache;
    Group &g = cache[fmt];
    if (g.experts.empty()) {
        for (auto &weights : top8_weights(fmt)) {
            Matrix *gate = new Matrix, *up = new Matrix, *down = new Matrix; // kept for the whole run
            gate->q = std::move(weights[0]);
            up->q = std::move(weights[1]);
            down->q = std::move(weights[2]);
            for (Matrix *m : {gate, up, down}) {
                coli_tensor_upload(&m->t, fmt, m->q.L.O, m->q.L.I, m->q.L.gs, m->q.weights.data(), m->q.scales.data(), kDevice);
                g.bytes += static_cast<double>(m->q.L.total_bytes());
            }
            g.experts.push_back({gate->t, up->t, down->t});
        }
    }
    return g;
}

// The top-8 group (top8_group.h): device time of the group, or the whole API call.
void bm_group(benchmark::State &state, int fmt, int mode, bool api, gpu::MatmulPath path) {
    Group &g = group(fmt);
    Top8Group w = top8_group(state.range(0));
    gpu::GroupCall call;
    for (const coli_expert &e : g.experts) call.experts.push_back({e.gate->device_tensor, e.up->device_tensor, e.down->device_tensor});
    call.rows = w.row_counts;
    call.row_token = w.row_token;
    call.row_weight = w.row_weight;
    call.n_tokens = w.rows;
    call.D = kGlm5Hidden;
    call.numerics = mode;
    call.path = path;
    for (auto _ : state) {
        if (api) {
            if (coli_expert_group(g.experts.data(), kGlm5TopK, w.row_counts.data(), w.x.data(), w.row_token.data(),
                                  w.row_weight.data(), w.y.data(), w.rows, mode) != COLI_OK) {
                return report_error(state, coli_last_error());
            }
        } else {
            double s = 0;
            std::string why;
            if (gpu::time_expert_group(call, w.x.data(), w.y.data(), kIterations, &s, &why) != COLI_OK) {
                return report_error(state, why);
            }
            state.SetIterationTime(s);
        }
    }
    counters(state, g.bytes, 2.0 * 3 * kGlm5Hidden * kGlm5ExpertIntermediate * w.total);
}

// One fused expert MLP (the group's first expert) through the API: activations to the device,
// the three projections and the hidden step, the result back, one synchronisation.
void bm_api_expert_mlp(benchmark::State &state, int fmt, int mode) {
    const int64_t S = state.range(0);
    Group &g = group(fmt);
    const std::vector<float> x = testing::random_normal(static_cast<size_t>(S * kGlm5Hidden), 11);
    std::vector<float> y(x.size());
    for (auto _ : state) {
        if (coli_expert_mlp(&g.experts.front(), y.data(), x.data(), S, mode) != COLI_OK) {
            return report_error(state, coli_last_error());
        }
    }
    counters(state, g.bytes / kGlm5TopK, 2.0 * 3 * kGlm5Hidden * kGlm5ExpertIntermediate * S);
}

void bm_blas(benchmark::State &state, int64_t N, int64_t K) {
    const int64_t M = state.range(0);
    for (auto _ : state) {
        double s = 0;
        std::string why;
        if (!coli_blas_bf16_gemm_seconds(kDevice, (int)M, (int)N, (int)K, kIterations, &s, &why)) return report_error(state, why);
        state.SetIterationTime(s);
    }
    counters(state, 2.0 * N * K, 2.0 * M * N * K); // bf16 weights: 2 bytes each
}

const char *fmt_name(int fmt) { return format_name(fmt); }

void register_all() {
    benchmark::RegisterBenchmark("BM_limit/read_bandwidth", bm_read_bandwidth)->Arg(151000000)->Arg(1000000000)->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_limit/copy_d2d", bm_copy)->Arg(1000000000)->UseManualTime()->Unit(benchmark::kMicrosecond);
    const int64_t shapes[][2] = {{kGlm5ExpertIntermediate, kGlm5Hidden}, {kGlm5Hidden, kGlm5ExpertIntermediate}};
    const int64_t rows[] = {1, 2, 4, 8, 16, 32, 128, 512, 2048};
    for (int fmt : {COLI_FORMAT_F32, COLI_FORMAT_Q8, COLI_FORMAT_Q4, COLI_FORMAT_Q2, COLI_FORMAT_G4}) {
        for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
            if (mode == COLI_NUMERICS_EXACT && fmt == COLI_FORMAT_F32) continue;
            for (const auto &sh : shapes) {
                const std::string name = std::string("BM_gpu_matmul/") + fmt_name(fmt) + (mode ? "/exact" : "/float") +
                                         "/O:" + std::to_string(sh[0]) + "/I:" + std::to_string(sh[1]);
                auto *b = benchmark::RegisterBenchmark(name.c_str(), bm_matmul, fmt, mode, sh[0], sh[1], gpu::MatmulPath::automatic);
                b->ArgName("S")->UseManualTime()->Unit(benchmark::kMicrosecond);
                for (int64_t s : rows) b->Arg(s);
            }
        }
    }
    // Every kernel path the device registry offers for the shape (matmul_paths), side by side.
    for (int fmt : {COLI_FORMAT_Q4, COLI_FORMAT_G4}) {
        for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
            for (const auto &sh : shapes) {
                Layout L;
                std::string why;
                if (!make_layout(fmt, sh[0], sh[1], fmt == COLI_FORMAT_G4 ? 128 : 0, &L, &why)) continue;
                for (gpu::MatmulPath path : gpu::matmul_paths(kDevice, L, mode)) {
                    const std::string name = std::string("BM_gpu_path/") + gpu::matmul_path_name(path) + "/" + fmt_name(fmt) +
                                             (mode ? "/exact" : "/float") + "/O:" + std::to_string(sh[0]) +
                                             "/I:" + std::to_string(sh[1]);
                    auto *b = benchmark::RegisterBenchmark(name.c_str(), bm_matmul, fmt, mode, sh[0], sh[1], path);
                    b->ArgName("S")->UseManualTime()->Unit(benchmark::kMicrosecond);
                    // 2 .. 8: exact G4 on vector against split (automatic takes split from 2
                    // rows); 24: between the 16 and the 32 rows where it leaves split, by shape
                    // (kernels_matvec_split.cuh).
                    // The prefill kernels side by side at 64 rows (between skinny's 32 and a
                    // full 128-row tile) and the target's 2048 too.
                    const bool prefill = path == gpu::MatmulPath::tensor_core || path == gpu::MatmulPath::warpgroup;
                    for (int64_t s : {1, 2, 4, 8, 16, 24, 32, 64, 128, 512, 2048})
                        if (prefill || (s != 64 && s != 2048)) b->Arg(s);
                }
            }
        }
    }
    for (int fmt : {COLI_FORMAT_Q4, COLI_FORMAT_G4}) {
        for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
            for (bool api : {false, true}) {
                const std::string name = std::string(api ? "BM_api_group8/" : "BM_gpu_group8/") + fmt_name(fmt) +
                                         (mode ? "/exact" : "/float");
                auto *b = benchmark::RegisterBenchmark(name.c_str(), bm_group, fmt, mode, api, gpu::MatmulPath::automatic);
                b->ArgName("rows_per_expert")->Arg(1)->Arg(4)->Arg(256)->Unit(benchmark::kMicrosecond);
                api ? b->UseRealTime() : b->UseManualTime();
            }
            auto *mlp = benchmark::RegisterBenchmark((std::string("BM_api_expert_mlp/") + fmt_name(fmt) +
                                                      (mode ? "/exact" : "/float")).c_str(),
                                                     bm_api_expert_mlp, fmt, mode);
            mlp->ArgName("S")->Arg(1)->Arg(8)->Arg(32)->Arg(256)->UseRealTime()->Unit(benchmark::kMicrosecond);
            // The decode group on each kernel path the projections can take, side by side.
            Layout L;
            std::string why;
            if (!make_layout(fmt, kGlm5ExpertIntermediate, kGlm5Hidden, fmt == COLI_FORMAT_G4 ? 128 : 0, &L, &why)) continue;
            for (gpu::MatmulPath path : gpu::matmul_paths(kDevice, L, mode)) {
                const std::string name = std::string("BM_gpu_group8_path/") + gpu::matmul_path_name(path) + "/" +
                                         fmt_name(fmt) + (mode ? "/exact" : "/float");
                auto *b = benchmark::RegisterBenchmark(name.c_str(), bm_group, fmt, mode, false, path);
                b->ArgName("rows_per_expert")->Arg(1)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);
            }
        }
    }
    for (const auto &sh : shapes) {
        const std::string name = "BM_blas_bf16/N:" + std::to_string(sh[0]) + "/K:" + std::to_string(sh[1]);
        auto *b = benchmark::RegisterBenchmark(name.c_str(), bm_blas, sh[0], sh[1]);
        b->ArgName("M")->UseManualTime()->Unit(benchmark::kMicrosecond);
        for (int64_t s : rows) b->Arg(s);
    }
}

} // namespace

int main(int argc, char **argv) {
    const int devices[2] = {COLI_DEVICE_CPU, kDevice};
    int n = 0;
    if (coli_gpu_count(&n) != COLI_OK || n == 0 || coli_init(devices, 2) != COLI_OK) {
        std::printf("coli-bench-gpu: no GPU (%s); nothing to measure\n", coli_last_error());
        return 0;
    }
    std::string why;
    double s = 0;
    if (gpu::probe_read_bandwidth(kDevice, 151000000, 20, &s, &why) == COLI_OK) g_read_bw = 151000000 / s;
    benchmark::AddCustomContext("read_bandwidth_151MB_bytes_per_second", std::to_string(g_read_bw));
    coli_device_info info;
    coli_device_info_get(kDevice, &info);
    benchmark::AddCustomContext("device", std::string(info.name) + " " + info.arch);
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    coli_shutdown();
    return 0;
}
