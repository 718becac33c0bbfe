#!/usr/bin/env python3
"""The built library depends on the GPU runtime the way the README says.

  check_runtime_deps.py none|cuda|hip LIBRARY

cuda: static cudart, so neither libcudart nor libcuda is NEEDED (the driver is loaded lazily at
the first call, and a binary still starts on a machine without it). hip: libamdhip64 is NEEDED.
none: no GPU runtime at all.
"""
import re
import subprocess
import sys


def main(backend, library):
    out = subprocess.run(['readelf', '-d', library], stdout=subprocess.PIPE, text=True, check=True).stdout
    needed = re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', out)
    print('%s NEEDS: %s' % (library, ' '.join(needed)))
    cuda = [n for n in needed if n.startswith(('libcuda.', 'libcudart.'))]
    hip = [n for n in needed if n.startswith('libamdhip64')]
    problems = []
    if backend in ('none', 'cuda') and cuda:
        problems.append('must not need %s' % ' '.join(cuda))
    if backend in ('none', 'cuda') and hip:
        problems.append('must not need %s' % ' '.join(hip))
    if backend == 'hip' and not hip:
        problems.append('should need libamdhip64')
    for p in problems:
        print('FAIL: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2]))
