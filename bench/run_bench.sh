#!/usr/bin/env bash
# Runs the benchmarks and writes their JSON into bench/results/, named after the device and the
# commit: <device>-<commit>-gpu.json (coli-bench-gpu), <cpu>-<commit>-cpu.json (CPU backend matmul, both exact paths) and
# <cpu>-<commit>-cpu-expert.json (CPU expert MLP and group, every host variant).
#   bench/run_bench.sh [BUILD_DIR] [OUT_DIR] [extra Google Benchmark flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/cuda}
out=${2:-bench/results}
shift $(($# > 2 ? 2 : $#))
mkdir -p "$out"
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo "${COLI_BUILD_COMMIT:-unknown}" | cut -c1-12)
slug() { tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//'; }
if [[ -x $build/bench/coli-bench-gpu ]] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | slug)
    "$build/bench/coli-bench-gpu" --benchmark_format=console --benchmark_out_format=json \
        --benchmark_out="$out/$gpu-$commit-gpu.json" "$@"
fi
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | slug)
"$build/bench/coli-bench-matmul" --benchmark_filter='cpu_' --benchmark_format=console --benchmark_out_format=json \
    --benchmark_out="$out/$cpu-$commit-cpu.json" "$@"
"$build/bench/coli-bench-expert" --benchmark_format=console --benchmark_out_format=json \
    --benchmark_out="$out/$cpu-$commit-cpu-expert.json" "$@"
echo "run_bench: results in $out"
