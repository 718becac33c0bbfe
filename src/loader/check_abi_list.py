#!/usr/bin/env python3
"""The loader's symbol list (abi_symbols.h) names exactly the functions of coli.h.

  check_abi_list.py coli.h abi_symbols.h
"""
import re
import sys

header = set(re.findall(r'COLI_API\s+[\w\s\*]*?\b(coli_\w+)\s*\(', open(sys.argv[1]).read()))
listed = set(re.findall(r'X\((coli_\w+)\)', open(sys.argv[2]).read()))
for name in sorted(header - listed):
    print('abi_symbols.h lacks %s' % name)
for name in sorted(listed - header):
    print('abi_symbols.h names %s, which coli.h does not declare' % name)
print('%d functions in coli.h, %d in the loader list' % (len(header), len(listed)))
sys.exit(1 if header != listed else 0)
