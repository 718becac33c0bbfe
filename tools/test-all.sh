#!/usr/bin/env bash
# The whole test suite: configures, builds and tests each GPU backend configuration, then prints
# one summary line "N passed, N failed, N skipped" summed over all of them.
#
#   tools/test-all.sh                 none cuda hip catch2v3 (what CI runs)
#   tools/test-all.sh none cuda       a subset
#
# none: builds and runs every test. cuda/hip: compile and link, then run every test; tests that
# need a device exit 77 (SKIP) where there is none, and run where there is one. catch2v3: the CPU
# build with its unit tests against Catch2 v3 instead of the system's 2.13 (fetched by
# tools/fetch-catch2-v3.sh from Debian bookworm-backports into build/; one SKIP where that
# source does not exist).
# Targets: COLI_CUDA_ARCH (default sm_80,sm_90), COLI_HIP_ARCH (default gfx1030,gfx90a: one wave32
# and one wave64 target). Build directories: build/<config>, reused when present. With none and
# cuda/hip in one run, the none build (the host) also binds the real modules those builds made.
set -uo pipefail
cd "$(dirname "$0")/.."

configs=("$@")
((${#configs[@]})) || configs=(none cuda hip catch2v3)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
export PATH="$cuda_home/bin:$PATH"

passed=0 failed=0 skipped=0
common=(--wrap-mode=nodownload -Dtests=enabled -Dconformance=enabled -Dbench=enabled)

count_results() { # testlog.json -> "passed failed skipped"
    /usr/bin/env python3 - "$1" <<'PY'
import json, sys
r = [json.loads(l)["result"] for l in open(sys.argv[1]) if l.strip()]
ok = sum(x in ("OK", "EXPECTEDFAIL") for x in r)
sk = r.count("SKIP")
print(ok, len(r) - ok - sk, sk)
PY
}

for cfg in "${configs[@]}"; do
    dir=build/$cfg
    case $cfg in
    none) opts=(-Dgpu=none) ;;
    cuda) opts=(-Dgpu=cuda "-Dgpu_arch=${COLI_CUDA_ARCH:-sm_80,sm_90a}") ;;
    hip) opts=(-Dgpu=hip "-Dgpu_arch=${COLI_HIP_ARCH:-gfx1030,gfx90a}") ;;
    catch2v3)
        opts=(-Dgpu=none)
        rc=0
        tools/fetch-catch2-v3.sh build/catch2-v3-pkg || rc=$?
        if ((rc == 77)); then
            skipped=$((skipped + 1))
            continue
        elif ((rc != 0)); then
            echo "=== $cfg: fetching Catch2 v3 FAILED"
            failed=$((failed + 1))
            continue
        fi
        export PKG_CONFIG_PATH="$PWD/build/catch2-v3-pkg/root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        ;;
    *) echo "test-all: unknown configuration '$cfg' (none, cuda, hip)"; exit 2 ;;
    esac
    echo "=== $cfg: configure, build, test"
    if [[ -d $dir/meson-private ]]; then setup=(meson setup --reconfigure); else setup=(meson setup); fi
    if ! "${setup[@]}" "$dir" "${common[@]}" "${opts[@]}" || ! meson compile -C "$dir"; then
        echo "=== $cfg: configure or build FAILED"
        failed=$((failed + 1))
        continue
    fi
    if [[ $cfg == catch2v3 ]] && ! grep -q COLI_CATCH2_V3 "$dir/compile_commands.json"; then
        echo "=== $cfg: the unit tests were not built against Catch2 v3"
        failed=$((failed + 1))
        continue
    fi
    rm -f "$dir/meson-logs/testlog.json"
    meson test -C "$dir" --print-errorlogs --num-processes 2
    if [[ -f $dir/meson-logs/testlog.json ]]; then
        read -r p f s < <(count_results "$dir/meson-logs/testlog.json")
    else
        p=0 f=1 s=0
    fi
    echo "=== $cfg: $p passed, $f failed, $s skipped"
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done

# The host (the none build) binding the real modules the cuda and hip builds made: CPU work through
# the module, exact results against the host's own reference (and on a GPU machine: set
# COLI_HOST_TEST_GPU=0 to run it on GPU 0 through the module).
host_test=build/none/src/loader/coli-host-dispatch-test
for vendor in cuda hip; do
    module=build/$vendor/src/libcoli_$vendor.so
    [[ " ${configs[*]} " == *" none "* && " ${configs[*]} " == *" $vendor "* && -x $host_test && -f $module ]] || continue
    runtime_dir=""
    if [[ $vendor == hip ]]; then
        runtime_dir=$(dirname "$(ldd "$module" | awk '/libamdhip64/ {print $3; exit}')")
    fi
    echo "=== host + $vendor module"
    if "$host_test" real "$vendor" "$PWD/build/$vendor/src" "$runtime_dir" ${COLI_HOST_TEST_GPU:-}; then
        passed=$((passed + 1))
    else
        echo "=== host + $vendor module FAILED"
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0 && passed > 0))
