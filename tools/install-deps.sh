#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages colibri-gpu builds and tests with (only the missing ones).
#   tools/install-deps.sh            everything: CPU, CUDA and HIP builds, tests, docs tools
#   tools/install-deps.sh --no-hip   without ROCm/HIP (about 630 MiB less)
# The CUDA Toolkit itself is NVIDIA's (set CUDA_HOME, default /usr/local/cuda); it is not installed.
set -euo pipefail

packages=(meson ninja-build g++ pkg-config cmake python3 catch2 nlohmann-json3-dev libbenchmark-dev
          python3-jsonschema python3-jinja2 python3-matplotlib
          g++-mingw-w64-x86-64-posix wine64) # the Windows loader's contract tests (cross-built, run under wine)
if [[ "${1:-}" != "--no-hip" ]]; then
    packages+=(hipcc libamdhip64-dev rocm-device-libs)
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
