#!/usr/bin/env bash
# Quick start: installs what is missing, builds for the best local device and runs the project's
# main job there: the self-check (coli-selfcheck) on the CPU and, with a GPU, on GPU 0, plus the
# device numerics probe.
#   tools/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cuda_home=${CUDA_HOME:-/usr/local/cuda}
export PATH="$cuda_home/bin:$PATH"
gpu=none
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU && command -v nvcc >/dev/null; then
    gpu=cuda
elif command -v rocm_agent_enumerator >/dev/null && rocm_agent_enumerator 2>/dev/null | grep -qv gfx000; then
    gpu=hip
fi

if [[ $gpu == hip ]]; then tools/install-deps.sh; else tools/install-deps.sh --no-hip; fi
dir=build/quickstart-$gpu
opts=(-Dgpu=$gpu -Dconformance=enabled -Dtests=auto --wrap-mode=nodownload)
[[ $gpu == none ]] || opts+=(-Dgpu_arch=native)
if [[ -d $dir/meson-private ]]; then meson setup --reconfigure "$dir" "${opts[@]}"; else meson setup "$dir" "${opts[@]}"; fi
meson compile -C "$dir"
"$dir/conformance/coli-selfcheck" --json "$dir/selfcheck.json"
if [[ $gpu != none ]]; then
    "$dir/src/tests/coli-gpu-device-test"
    "$dir/conformance/coli-selfcheck" --device 0 --json "$dir/selfcheck-gpu0.json"
fi
echo "quickstart: report written to $dir/selfcheck.json"
