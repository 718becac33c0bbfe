// The main() of the CPU benchmark programs: the thread count (one core by default, comparable
// across machines; COLI_BENCH_THREADS overrides), then the registered Google Benchmarks.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "api/env.h"
#include "cpu/matmul_cpu.h"

namespace coli {

inline int run_cpu_benchmarks(const char *program, int argc, char **argv, void (*register_all)()) {
    long threads = 1;
    std::string why;
    if (!env_int("COLI_BENCH_THREADS", 1, 4096, 1, &threads, &why)) {
        std::fprintf(stderr, "%s: %s\n", program, why.c_str());
        return 2;
    }
    cpu::set_threads(static_cast<int>(threads));
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}

} // namespace coli
