#!/usr/bin/env python3
"""Keeps the documentation in step with the code.

  check_docs.py SOURCE_ROOT

- every option of meson_options.txt has a "### <option>" section in README.md;
- every environment variable the code reads is in docs/configuration.md;
- every weight format of coli.h is in docs/formats.md;
- README.md's Quick start holds exactly two commands;
- every relative link of README.md points to a file that exists.
"""
import os
import re
import sys


def read(root, rel):
    with open(os.path.join(root, rel), encoding='utf-8') as f:
        return f.read()


def main(root):
    problems = []
    readme = read(root, 'README.md')
    options = re.findall(r"option\('(\w+)'", read(root, 'meson_options.txt'))
    for opt in options:
        if not re.search(r'^### %s$' % re.escape(opt), readme, re.M):
            problems.append('README.md has no "### %s" section for the Meson option' % opt)

    config = read(root, 'docs/configuration.md')
    env_vars = set()
    for d in ('src', 'conformance', 'bench', 'compat'):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for name in files:
                if name.endswith(('.cpp', '.h', '.cu', '.cuh', '.py')):
                    text = read(root, os.path.relpath(os.path.join(dirpath, name), root))
                    env_vars.update(re.findall(r'(?:env_int|env_int_list|env_gb|env_is_set|env_or_empty|getenv|environ\.get)\(\s*[\'"]([A-Z][A-Z0-9_]+)[\'"]', text))
    for var in sorted(env_vars):
        if '`%s`' % var not in config:
            problems.append('docs/configuration.md does not document %s' % var)

    formats = re.findall(r'COLI_FORMAT_(\w+) = (\d+)', read(root, 'src/include/coli/coli.h'))
    table = read(root, 'docs/formats.md')
    for name, code in formats:
        if not re.search(r'^\| %s \| `%s` \|' % (code, name), table, re.M):
            problems.append('docs/formats.md has no table row "| %s | `%s` |"' % (code, name))

    quick = re.search(r'^## Quick start$(.*?)^## ', readme, re.M | re.S)
    if not quick:
        problems.append('README.md has no "## Quick start" section')
    else:
        blocks = re.findall(r'```sh\n(.*?)```', quick.group(1), re.S)
        commands = [l for b in blocks for l in b.splitlines() if l.strip() and not l.strip().startswith('#')]
        if len(commands) != 2:
            problems.append('README.md Quick start has %d commands, not 2' % len(commands))

    for link in re.findall(r'\]\(([^)#:]+)\)', readme):
        if not os.path.exists(os.path.join(root, link)):
            problems.append('README.md links to missing %s' % link)

    for p in problems:
        print('FAIL: ' + p)
    print('%d options, %d environment variables, %d formats checked; %d problems'
          % (len(options), len(env_vars), len(formats), len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
