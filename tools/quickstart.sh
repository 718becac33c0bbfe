#!/usr/bin/env bash
# Quick start: installs what is missing, builds for the best local device and runs the project's
# main job there: the conformance suite (coli-conformance), which writes a report into
# hardware-matrix/ and regenerates docs/hardware-matrix.md, printing a summary table.
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
# The main job: the conformance suite on the best local device (GPU 0, else the CPU), one report
# into hardware-matrix/, then the generated docs.
"$dir/conformance/coli-conformance" --devices best --report-dir hardware-matrix | tee "$dir/conformance.log"
/usr/bin/env python3 docs/gen_hardware_matrix.py . docs
echo "quickstart: $(grep '^report:' "$dir/conformance.log"); docs/hardware-matrix.md regenerated"
