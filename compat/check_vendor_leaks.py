#!/usr/bin/env python3
"""Enforces the vendor rule: vendor checks, vendor headers and vendor intrinsics live in compat/ only.

  check_vendor_leaks.py SOURCE_ROOT     scan src/, conformance/ and bench/ (exit 1 on any leak)
  check_vendor_leaks.py --self-test     prove the scanner catches planted leaks and ignores comments

Comments and string literals are stripped before matching, so prose may name the intrinsics.
The CUDA runtime names the backend uses (cudaMalloc, ...) are allowed: compat/coli_compat.h is a
pass-through for them under nvcc and maps them onto HIP under hipcc. HIP names are not allowed.
"""
import os
import re
import sys
import tempfile

SCANNED_DIRS = ('src', 'conformance', 'bench')
SOURCE_EXT = ('.c', '.cc', '.cpp', '.cxx', '.h', '.hh', '.hpp', '.cu', '.cuh', '.inl')

FORBIDDEN = [
    (r'\b__HIP_PLATFORM_\w*', 'HIP platform macro'),
    (r'\b__HIP(CC)?__\b', 'HIP compiler macro'),
    (r'\b__HIP_DEVICE_COMPILE__\b', 'HIP device-pass macro'),
    (r'\b__CUDA_ARCH(_LIST)?__\b', 'CUDA arch macro'),
    (r'\b__CUDACC\w*\b|\b__NVCC__\b', 'CUDA compiler macro'),
    (r'\bCUDART_VERSION\b|\bHIP_VERSION\w*', 'runtime version macro'),
    (r'\b__AMDGCN\w*|\b__gfx\w+__', 'AMDGPU target macro'),
    (r'#\s*include\s*[<"](cuda[\w.]*|hip/[\w./]*|cuda_\w+\.h|mma\.h|cublas\w*\.h|rocblas\w*)[>"]',
     'vendor header'),
    (r'\b__dp[24]a\b', 'NVIDIA dot-product intrinsic'),
    (r'\b__builtin_amdgcn_\w+', 'AMDGPU builtin'),
    (r'\bamdgcn\b', 'AMDGPU target name'),
    (r'\b__shfl\w*|\b__ballot\w*|\b__activemask\b|\b__syncwarp\b|\b__any_sync\b|\b__all_sync\b',
     'warp intrinsic (use the compat wrappers)'),
    (r'\b__f(add|sub|mul|div|fma|rcp|sqrt)_r[nzud]\b', 'rounding intrinsic (use coli_f*_rn)'),
    (r'\b__(expf|logf|sinf|cosf|powf|fdividef|saturatef)\b', 'fast-math intrinsic'),
    (r'\b__ldg\b|\bwmma::|\bmma\.sync\b|\bwgmma\b', 'NVIDIA-only device feature'),
    (r'\b__(nv|ocml|ockl)_\w+', 'vendor device library call'),
    (r'\bwarpSize\b', 'run-time warpSize (use COLI_WARP_SIZE from compat)'),
    (r'\basm\s*(volatile\s*)?\(', 'inline assembly'),
    (r'\bhip[A-Z]\w*', 'HIP runtime name (src/ uses the CUDA names that compat maps)'),
]
PATTERNS = [(re.compile(p), why) for p, why in FORBIDDEN]

_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip_comments_and_strings(text):
    """Blank out comments and literals, keeping line numbers and #include "..." targets."""
    def repl(m):
        s = m.group(0)
        if s.startswith('"'):
            line_start = text.rfind('\n', 0, m.start()) + 1
            if re.match(r'\s*#\s*include\s*$', text[line_start:m.start()]):
                return s
        return re.sub(r'[^\n]', ' ', s)
    return _TOKEN.sub(repl, text)


def scan_file(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        code = strip_comments_and_strings(f.read())
    hits = []
    for lineno, line in enumerate(code.split('\n'), 1):
        for pat, why in PATTERNS:
            m = pat.search(line)
            if m:
                hits.append((path, lineno, m.group(0), why))
    return hits


def scan_tree(root):
    hits = []
    for d in SCANNED_DIRS:
        base = os.path.join(root, d)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SOURCE_EXT):
                    hits += scan_file(os.path.join(dirpath, name))
    return hits


def self_test():
    planted = {
        'src/gpu/a.cu': '#ifdef __HIP_PLATFORM_AMD__\nint x;\n#endif\n',
        'src/gpu/b.cu': 'int f(int a, int b) { return __dp4a(a, b, 0); }\n',
        'src/c.h': '#include <cuda_runtime.h>\n',
        'conformance/d.cpp': 'void g() { hipMalloc(0, 0); }\n',
        'bench/e.cu': 'float h(float a) { return __expf(a); }\n',
        'src/gpu/f.cu': 'int w = warpSize;\n',
    }
    clean = {
        'src/ok.cpp': '// uses compat instead of __dp4a or hipMalloc\n'
                      'const char *s = "__CUDA_ARCH__ in a string";\n'
                      'void k() { cudaMalloc(0, 0); }\n/* __shfl_xor_sync */\n',
        'compat/coli_compat.h': '#include <hip/hip_runtime.h>\n#define X __dp4a\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in list(planted.items()) + list(clean.items()):
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, 'w') as f:
                f.write(text)
        hits = scan_tree(root)
        flagged = {os.path.relpath(h[0], root) for h in hits}
    ok = True
    for rel in planted:
        if rel not in flagged:
            print('self-test FAILED: planted leak in %s not detected' % rel)
            ok = False
    for rel in clean:
        if rel in flagged:
            print('self-test FAILED: false positive in %s' % rel)
            ok = False
    print('self-test %s: %d planted leaks, %d flagged files' % ('passed' if ok else 'FAILED',
                                                              len(planted), len(flagged)))
    return 0 if ok else 1


def main(argv):
    if argv == ['--self-test']:
        return self_test()
    if len(argv) != 1:
        print(__doc__)
        return 2
    hits = scan_tree(argv[0])
    for path, lineno, token, why in hits:
        print('%s:%d: %s: %s (move it behind compat/)' % (os.path.relpath(path, argv[0]), lineno,
                                                          token, why))
    scanned = sum(len(fs) for d in SCANNED_DIRS for _, _, fs in os.walk(os.path.join(argv[0], d)))
    print('%d vendor leaks in %d files under %s' % (len(hits), scanned, ', '.join(SCANNED_DIRS)))
    return 1 if hits else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
