#!/usr/bin/env python3
"""Configure-time failures give clear messages (README "Build options").

  test_configure_errors.py MESON SOURCE_ROOT

Runs `meson setup` in throw-away directories with bad GPU settings and checks that each fails
with the documented message. Cases that need a toolchain this machine lacks are skipped with a
note; exit 77 only if none could run.
"""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def setup(meson, src, args, env_changes):
    env = dict(os.environ)
    env.update(env_changes)
    with tempfile.TemporaryDirectory() as build:
        p = subprocess.run([meson, 'setup', build, src, '--wrap-mode=nodownload', '-Dtests=disabled',
                            '-Dconformance=disabled', '-Dbench=disabled'] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           timeout=300)
    return p.returncode, p.stdout


def main(meson, src):
    nvcc = shutil.which('nvcc') or ('/usr/local/cuda/bin/nvcc'
                                    if os.path.exists('/usr/local/cuda/bin/nvcc') else None)
    hipcc = shutil.which('hipcc')
    have_nvidia_gpu = subprocess.run(['sh', '-c', 'nvidia-smi -L 2>/dev/null | grep -q GPU']).returncode == 0
    cuda_path = os.path.dirname(nvcc) + os.pathsep + os.environ['PATH'] if nvcc else None
    plain_path = os.pathsep.join(d for d in os.environ['PATH'].split(os.pathsep)
                                 if not os.path.exists(os.path.join(d, 'nvcc')))
    cases = []  # (name, args, env, expected substrings, runnable, why not)
    cases.append(('cuda: nvcc not on PATH', ['-Dgpu=cuda', '-Dgpu_arch=sm_90'],
                  {'PATH': plain_path}, ['is not on PATH', 'PATH='], nvcc is not None, 'no nvcc here'))
    cases.append(('cuda: AMD target', ['-Dgpu=cuda', '-Dgpu_arch=gfx90a'], {'PATH': cuda_path or ''},
                  ['"gfx90a" is not an NVIDIA target', '-Dgpu=hip'], nvcc is not None, 'no nvcc here'))
    cases.append(('cuda: target nvcc cannot build', ['-Dgpu=cuda', '-Dgpu_arch=sm_70'],
                  {'PATH': cuda_path or ''}, ['sm_70 is not supported by'], nvcc is not None, 'no nvcc here'))
    cases.append(('cuda: arch-specific target nvcc cannot build', ['-Dgpu=cuda', '-Dgpu_arch=sm_80,sm_91a'],
                  {'PATH': cuda_path or ''}, ['sm_91a is not supported by'], nvcc is not None, 'no nvcc here'))
    cases.append(('cuda: native without a GPU', ['-Dgpu=cuda', '-Dgpu_arch=native'],
                  {'PATH': cuda_path or ''}, ['no NVIDIA GPU is visible', '-Dgpu_arch=sm_80,sm_90'],
                  nvcc is not None and not have_nvidia_gpu, 'an NVIDIA GPU is visible or no nvcc'))
    cases.append(('hip: compiler missing', ['-Dgpu=hip', '-Dgpu_arch=gfx90a',
                                            '-Dhip_compiler=no-such-hipcc'],
                  {}, ['"no-such-hipcc" not found', 'ROCM_HOME', 'libamdhip64-dev'], True, ''))
    cases.append(('hip: NVIDIA target', ['-Dgpu=hip', '-Dgpu_arch=sm_90'], {},
                  ['"sm_90" is not an AMD target', '-Dgpu=cuda'], hipcc is not None, 'no hipcc here'))
    cases.append(('hip: native on Windows', ['-Dgpu=hip', '-Dgpu_arch=native'], {'COLI_TOOLCHAIN_OS': 'windows'},
                  ['native is refused on Windows', '-Dgpu_arch=gfx1100'], hipcc is not None, 'no hipcc here'))
    cases.append(('empty arch list', ['-Dgpu=hip', '-Dgpu_arch='], {}, ['gpu_arch is empty'],
                  hipcc is not None, 'no hipcc here'))
    ran = failed = 0
    for name, args, env, expected, runnable, why_not in cases:
        if not runnable:
            print('SKIP %s: %s' % (name, why_not))
            continue
        ran += 1
        rc, out = setup(meson, src, args, env)
        missing = [e for e in expected if e not in out]
        if rc == 0 or missing:
            failed += 1
            print('FAIL %s: exit %d, missing %s\n%s' % (name, rc, missing, out[-1500:]))
        else:
            print('ok   %s' % name)
    print('%d configure cases run, %d failed' % (ran, failed))
    if ran == 0:
        return SKIP
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2]))
