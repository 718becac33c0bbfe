#!/usr/bin/env bash
# The loader's contract tests on Windows: cross-builds the Windows loader
# (src/loader/module_platform_win.cpp), its contract driver and the fixture DLLs with mingw-w64,
# then runs every case under wine. Exit 77 (SKIP) when mingw-w64 or wine64 is missing.
#   tools/windows-loader-tests.sh OUT_DIR
# Debian: apt-get install g++-mingw-w64-x86-64-posix wine64 (tools/install-deps.sh does).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
cc=${MINGW_CC:-x86_64-w64-mingw32-gcc-posix}
cxx=${MINGW_CXX:-x86_64-w64-mingw32-g++-posix}
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
if ! command -v "$cxx" >/dev/null || ! command -v "$cc" >/dev/null || [[ ! -x $wine ]]; then
    echo "windows-loader-tests: SKIP (needs $cxx, $cc and wine64)"
    exit 77
fi
inc=(-I"$src/src" -I"$src/src/include")
fixture=$src/src/loader/fixtures/fixture_module.c
rm -rf "$out/scratch"
mkdir -p "$out"/{good,other,missing,badabi,hipruntime}
"$cc" -shared -O1 "${inc[@]}" "$fixture" -o "$out/good/coli_cuda.dll"
"$cc" -shared -O1 "${inc[@]}" "$fixture" -o "$out/good/coli_hip.dll"
"$cc" -shared -O1 "${inc[@]}" "$fixture" -o "$out/other/coli_cuda.dll"
"$cc" -shared -O1 "${inc[@]}" -DFIXTURE_MISSING "$fixture" -o "$out/missing/coli_cuda.dll"
"$cc" -shared -O1 "${inc[@]}" -DFIXTURE_ABI=2 "$fixture" -o "$out/badabi/coli_cuda.dll"
"$cc" -shared -O1 "$src/src/loader/fixtures/fixture_runtime.c" -o "$out/hipruntime/amdhip64_5.dll"
"$cxx" -std=c++17 -O1 -static "${inc[@]}" "$src/src/loader/loader_contract.cpp" "$src/src/loader/module_loader.cpp" \
    "$src/src/loader/module_platform_win.cpp" -o "$out/coli-loader-contract.exe"

export WINEPREFIX="$out/wineprefix" WINEDEBUG=-all
winpath() { local p=${1//\//\\}; echo "Z:$p"; } # wine maps Z: to /
failed=0
for c in right-module wrong-path relative-dir duplicate-basename missing-symbol abi-mismatch unreadable-file \
         hip-runtime bad-backend; do
    if "$wine" "$out/coli-loader-contract.exe" "$c" "$(winpath "$out/good")" "$(winpath "$out/other")" \
        "$(winpath "$out/missing")" "$(winpath "$out/badabi")" "$(winpath "$out/hipruntime")" \
        "$(winpath "$out/scratch")" 2>&1 | tr -d '\r'; then
        :
    fi
    rc=${PIPESTATUS[0]}
    if ((rc != 0)); then
        echo "windows-loader-tests: $c FAILED (exit $rc)"
        failed=$((failed + 1))
    fi
done
"$wine"server -k 2>/dev/null || true
echo "windows-loader-tests: $((9 - failed)) of 9 cases as required"
((failed == 0))
