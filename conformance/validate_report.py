#!/usr/bin/env python3
"""Validates conformance reports: schema, checksum and internal consistency.

  validate_report.py SCHEMA REPORT [REPORT ...]     exit 1 naming the file and the problem
  validate_report.py SCHEMA --dir DIR               every *.json in DIR (0 files is fine)
  validate_report.py SCHEMA --tamper-test REPORT    proves an edited copy of REPORT is rejected
  validate_report.py SCHEMA --tamper-test-dir DIR   the same with the first report in DIR

The checksum is the SHA-256 of the file's own text with the checksum value replaced by 64
zeros (coli-conformance writes it that way), so any edit of the file is detected.
"""
import copy
import glob
import hashlib
import json
import os
import re
import sys
import tempfile

CHECKSUM = re.compile(r'("checksum"\s*:\s*\{\s*"algorithm"\s*:\s*"sha256"\s*,\s*"value"\s*:\s*")([0-9a-f]{64})(")')


def checksum_problem(text):
    m = list(CHECKSUM.finditer(text))
    if len(m) != 1:
        return 'no single checksum field'
    last = m[-1]
    zeroed = text[:last.start(2)] + '0' * 64 + text[last.end(2):]
    if hashlib.sha256(zeroed.encode('utf-8')).hexdigest() != last.group(2):
        return 'checksum mismatch: the file was edited after coli-conformance wrote it'
    return None


def consistency_problems(r):
    p = []
    cases, s = r['cases'], r['summary']
    ids = {d['id'] for d in r['devices']}
    counts = {k: sum(c['status'] == v for c in cases) for k, v in (('passed', 'ok'), ('failed', 'fail'), ('skipped', 'skipped'))}
    if s['total'] != len(cases):
        p.append('summary.total %d != %d cases' % (s['total'], len(cases)))
    for k, n in counts.items():
        if s[k] != n:
            p.append('summary.%s %d != %d cases with that status' % (k, s[k], n))
    exact = [c for c in cases if 'bit_identical' in c['metrics'] and c['params'].get('numerics') != 'float']
    if s['exact_cases'] != len(exact):
        p.append('summary.exact_cases %d != %d' % (s['exact_cases'], len(exact)))
    if s['exact_bit_identical'] != all(c['metrics']['bit_identical'] for c in exact):
        p.append('summary.exact_bit_identical disagrees with the cases')
    for c in cases:
        if c['device'] not in ids:
            p.append('case "%s" names device %d, which is not in devices' % (c['name'], c['device']))
        m = c['metrics']
        if c['status'] == 'ok' and m.get('bit_identical') is False and c['params'].get('numerics', 'exact') == 'exact':
            p.append('case "%s" is ok but not bit-identical in exact mode' % c['name'])
        if 'differing_outputs' in m and (m['differing_outputs'] == 0) != m.get('bit_identical'):
            p.append('case "%s": differing_outputs and bit_identical disagree' % c['name'])
    nmses = [c['metrics']['nmse'] for c in cases if 'nmse' in c['metrics']]
    if s['worst_float_nmse'] != max(nmses, default=0.0):
        p.append('summary.worst_float_nmse %g != %g' % (s['worst_float_nmse'], max(nmses, default=0.0)))
    return p


def validate(schema, path):
    """Returns a list of problems (empty: valid)."""
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        report = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return ['not readable JSON: %s' % e]
    import jsonschema
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(report), key=lambda e: list(e.path))
    if errors:
        return ['schema: %s at %s' % (e.message, '/'.join(str(x) for x in e.path) or '(top)') for e in errors[:5]]
    problems = []
    c = checksum_problem(text)
    if c:
        problems.append(c)
    return problems + consistency_problems(report)


def tamper_test(schema, path):
    if validate(schema, path):
        print('tamper test: %s is not valid to begin with' % path)
        return 1
    with open(path, encoding='utf-8') as f:
        text = f.read()
    report = json.loads(text)
    edits = {
        'a metric changed': lambda r: r['cases'][0]['metrics'].__setitem__('outputs', r['cases'][0]['metrics'].get('outputs', 0) + 1),
        'a status flipped': lambda r: r['cases'][0].__setitem__('status', 'fail' if r['cases'][0]['status'] == 'ok' else 'ok'),
        'the device renamed': lambda r: r['devices'][0].__setitem__('name', r['devices'][0]['name'] + ' (edited)'),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for what, edit in edits.items():
            r = copy.deepcopy(report)
            edit(r)
            bad = os.path.join(tmp, 'edited.json')
            with open(bad, 'w', encoding='utf-8') as f:
                f.write(json.dumps(r, indent=2) + '\n')
            problems = validate(schema, bad)
            ok = any('checksum' in p for p in problems)
            print('tamper test: %s -> %s' % (what, 'rejected' if ok else 'NOT DETECTED'))
            failures += not ok
        bad = os.path.join(tmp, 'not-json.json')
        with open(bad, 'w') as f:
            f.write(text[: len(text) // 2])
        truncated = validate(schema, bad)
        print('tamper test: truncated file -> %s' % ('rejected' if truncated else 'NOT DETECTED'))
        failures += not truncated
    return 1 if failures else 0


def main(argv):
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        print('validate_report: python3-jsonschema is not installed; skipped')
        return 77
    if len(argv) < 2:
        print(__doc__)
        return 2
    with open(argv[0], encoding='utf-8') as f:
        schema = json.load(f)
    if argv[1] == '--tamper-test':
        return tamper_test(schema, argv[2])
    if argv[1] == '--tamper-test-dir':
        reports = sorted(glob.glob(os.path.join(argv[2], '*.json')))
        if not reports:
            print('tamper test: no report in %s; skipped' % argv[2])
            return 77
        return tamper_test(schema, reports[0])
    paths = sorted(glob.glob(os.path.join(argv[2], '*.json'))) if argv[1] == '--dir' else argv[1:]
    bad = 0
    for path in paths:
        problems = validate(schema, path)
        for p in problems:
            print('%s: %s' % (path, p))
        print('%s: %s' % (path, 'valid' if not problems else 'INVALID'))
        bad += bool(problems)
    print('%d reports, %d invalid' % (len(paths), bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
