#!/usr/bin/env python3
"""Configure-time helper for compat/meson.build: finds the GPU compilers and resolves gpu_arch.

Meson cannot read environment variables or run a GPU query by itself, so this script does it.
Every failure prints one clear message on stderr and exits 1; Meson turns it into error().

  gpu_toolchain.py locate-nvcc
      -> nvcc path. Looks in $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda/bin.
  gpu_toolchain.py locate-hip COMPILER
      -> two lines: compiler path, the directory of libamdhip64 (may be empty). Looks in
         $ROCM_HOME/bin, $ROCM_PATH/bin, /opt/rocm/bin, then PATH (Debian's system hipcc is
         /usr/bin/hipcc); the library in those roots' lib dirs, then the system's. On Windows
         (the HIP SDK): $HIP_CLANG_PATH, then $HIP_PATH/bin, for COMPILER(.exe|.bat), and
         amdhip64.lib in $HIP_PATH/lib.
  gpu_toolchain.py arch cuda|hip COMPILER ARCH [ARCH ...]
      -> the resolved, validated targets, one per line ('native' replaced by the visible GPUs;
         refused for HIP on Windows, docs/windows.md).
COLI_TOOLCHAIN_OS=windows|linux overrides the detected system (for tests).
"""
import os
import platform
import re
import shutil
import subprocess
import sys

CUDA_ARCH = re.compile(r'^sm_(\d+)([af]?)$')
HIP_ARCH = re.compile(r'^gfx[0-9a-f]{3,4}(:(sramecc|xnack)[+-])*$')


def fail(msg):
    sys.stderr.write(msg.rstrip() + '\n')
    sys.exit(1)


def run(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return (p.stdout if p.returncode == 0 else None), p.stderr.strip()


def first_existing(candidates):
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def locate_nvcc():
    cands = []
    for var in ('CUDA_HOME', 'CUDA_PATH'):
        if os.environ.get(var):
            cands.append(os.path.join(os.environ[var], 'bin', 'nvcc'))
    cands += [shutil.which('nvcc'), '/usr/local/cuda/bin/nvcc']
    found = first_existing(cands)
    if not found:
        fail('gpu=cuda: nvcc not found. Install the CUDA Toolkit (NVIDIA\'s cuda-toolkit package, '
             'or Debian\'s nvidia-cuda-toolkit) and set CUDA_HOME to its root (looked in '
             '$CUDA_HOME/bin, $CUDA_PATH/bin, PATH and /usr/local/cuda/bin).')
    print(found)


def host_os():
    return (os.environ.get('COLI_TOOLCHAIN_OS') or platform.system()).lower()


def rocm_roots():
    if host_os() == 'windows':  # the HIP SDK sets HIP_PATH (e.g. C:\Program Files\AMD\ROCm\6.1\)
        return [r for r in (os.environ.get('HIP_PATH'), os.environ.get('ROCM_PATH')) if r]
    roots = [os.environ.get(v) for v in ('ROCM_HOME', 'ROCM_PATH')]
    return [r for r in roots if r] + ['/opt/rocm']


def locate_hip(compiler):
    cands = []
    windows = host_os() == 'windows'
    names = [compiler] + ([compiler + '.exe', compiler + '.bat'] if windows else [])
    if os.path.isabs(compiler):
        cands.append(compiler)
    else:
        dirs = [os.environ.get('HIP_CLANG_PATH')] if windows else []
        for root in rocm_roots():
            dirs += [os.path.join(root, 'bin'), os.path.join(root, 'llvm', 'bin')]
        cands += [os.path.join(d, n) for d in dirs if d for n in names]
        cands.append(shutil.which(compiler))
    found = first_existing(cands)
    if not found:
        fail('gpu=hip: HIP compiler "%s" not found. Install ROCm/HIP (Debian: apt-get install hipcc '
             'libamdhip64-dev rocm-device-libs) or set ROCM_HOME to the ROCm root (looked in '
             '$ROCM_HOME/bin, $ROCM_PATH/bin, /opt/rocm/bin and PATH); -Dhip_compiler picks another '
             'driver such as amdclang++.' % compiler)
    libdir = ''
    candidates = [os.path.join(root, sub) for root in rocm_roots() for sub in ('lib', 'lib64')]
    if not windows:
        candidates += ['/usr/lib/x86_64-linux-gnu', '/usr/lib64', '/usr/lib']  # a distribution's HIP
    library = 'amdhip64.lib' if windows else 'libamdhip64.so'
    for d in candidates:
        if os.path.isdir(d) and any(f.startswith(library) for f in os.listdir(d)):
            libdir = d
            break
    print(found)
    print(libdir)


def native_cuda():
    out, err = run(['nvidia-smi', '--query-gpu=compute_cap', '--format=csv,noheader'])
    caps = []
    if out:
        for line in out.split():
            m = re.match(r'^(\d+)\.(\d+)$', line.strip())
            if m:
                # Compute capability 9.0 gets sm_90a: its code runs only there, and it holds the
                # wgmma kernel (docs/gpu-backends.md); sm_90 code would lack it.
                suffix = 'a' if (m.group(1), m.group(2)) == ('9', '0') else ''
                caps.append('sm_%s%s%s' % (m.group(1), m.group(2), suffix))
    if not caps:
        fail('gpu_arch=native: no NVIDIA GPU is visible at configure time (nvidia-smi: %s). nvcc '
             'would silently build sm_75 instead. Name the targets, e.g. -Dgpu_arch=sm_80,sm_90.'
             % (err or 'no GPU listed'))
    return caps


def native_hip(compiler):
    tools = []
    for root in rocm_roots():
        tools += [os.path.join(root, 'llvm', 'bin', 'amdgpu-arch'),
                  os.path.join(root, 'bin', 'rocm_agent_enumerator')]
    tools += [shutil.which('amdgpu-arch'), shutil.which('rocm_agent_enumerator'),
              os.path.join(os.path.dirname(compiler), 'amdgpu-arch')]
    archs, errors = [], []
    for tool in tools:
        if not tool or not os.path.isfile(tool):
            continue
        out, err = run([tool])
        if out:
            archs = [a for a in out.split() if HIP_ARCH.match(a) and a != 'gfx000']
            if archs:
                break
        errors.append('%s: %s' % (os.path.basename(tool), err or 'no GPU listed'))
    if not archs:
        fail('gpu_arch=native: no AMD GPU is visible at configure time (%s). hipcc would silently '
             'build gfx803 instead. Name the targets, e.g. -Dgpu_arch=gfx1030,gfx90a.'
             % ('; '.join(errors) or 'neither amdgpu-arch nor rocm_agent_enumerator found'))
    return archs


def supported_cuda_codes(nvcc):
    out, _ = run([nvcc, '--list-gpu-code'])
    return set(out.split()) if out else None


def resolve(backend, compiler, requested):
    if not requested:
        fail('gpu_arch is empty: give native or a list of targets (e.g. %s).'
             % ('sm_80,sm_90' if backend == 'cuda' else 'gfx1030,gfx90a'))
    resolved = []
    for a in requested:
        a = a.strip()
        if a == 'native' and backend == 'hip' and host_os() == 'windows':
            fail('gpu_arch=native is refused on Windows: the HIP SDK has no reliable query of the '
                 'visible GPU at configure time, and a guess would build the wrong code objects. '
                 'Name the targets, e.g. -Dgpu_arch=gfx1100 (RDNA3) or -Dgpu_arch=gfx1030,gfx1100.')
        elif a == 'native':
            resolved += native_cuda() if backend == 'cuda' else native_hip(compiler)
        else:
            resolved.append(a)
    for a in resolved:
        if backend == 'cuda' and not CUDA_ARCH.match(a):
            hint = ' (an AMD target: use it with -Dgpu=hip)' if HIP_ARCH.match(a) else ''
            fail('gpu_arch: "%s" is not an NVIDIA target of the form sm_XY%s.' % (a, hint))
        if backend == 'hip' and not HIP_ARCH.match(a):
            hint = ' (an NVIDIA target: use it with -Dgpu=cuda)' if CUDA_ARCH.match(a) else ''
            fail('gpu_arch: "%s" is not an AMD target of the form gfxNNNN%s.' % (a, hint))
    if backend == 'cuda':
        codes = supported_cuda_codes(compiler)
        if codes is not None:
            for a in resolved:
                # --list-gpu-code names plain targets only: sm_90a is supported where sm_90 is.
                if CUDA_ARCH.match(a).expand(r'sm_\1') not in codes:
                    fail('gpu_arch: %s is not supported by %s (it supports: %s).'
                         % (a, compiler, ' '.join(sorted(codes))))
    seen = []
    for a in resolved:
        if a not in seen:
            seen.append(a)
    print('\n'.join(seen))


def main(argv):
    if len(argv) >= 1 and argv[0] == 'locate-nvcc':
        locate_nvcc()
    elif len(argv) == 2 and argv[0] == 'locate-hip':
        locate_hip(argv[1])
    elif len(argv) >= 3 and argv[0] == 'arch' and argv[1] in ('cuda', 'hip'):
        resolve(argv[1], argv[2], [a for a in argv[3:] if a])
    else:
        fail(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])
