#!/usr/bin/env python3
"""Generates docs/hardware-matrix.md and one detail page per report from hardware-matrix/*.json.

  gen_hardware_matrix.py SOURCE_ROOT OUT_DIR        writes OUT_DIR/hardware-matrix.md and
                                                    OUT_DIR/hardware-matrix/<report>.md
  gen_hardware_matrix.py SOURCE_ROOT --check        fails when docs/ differs from what it generates

Only reports that pass conformance/validate_report.py (schema, checksum, consistency) are used;
an invalid one stops the generator with its problems.
"""
import filecmp
import glob
import json
import os
import sys
import tempfile

try:
    import jinja2
    import jsonschema  # noqa: F401 (the validator needs it)
except ImportError as e:
    print('gen_hardware_matrix: %s (Debian: python3-jinja2 python3-jsonschema); skipped' % e)
    sys.exit(77)

FORMATS = ['F32', 'Q8', 'Q4', 'Q2', 'G4']
FAMILIES = ['matmul', 'invariance', 'expert', 'placement', 'fallback', 'mtp']


def load_validator(root):
    sys.path.insert(0, os.path.join(root, 'conformance'))
    import validate_report  # noqa: E402
    with open(os.path.join(root, 'conformance', 'schema', 'report-v1.schema.json'), encoding='utf-8') as f:
        return validate_report, json.load(f)


def cell(cases):
    """The matrix cell for a set of cases: (symbol text, detail)."""
    if not cases:
        return '—'
    failed = [c for c in cases if c['status'] == 'fail']
    skipped = [c for c in cases if c['status'] == 'skipped']
    if failed:
        return '❌ %d failed' % len(failed)
    if len(skipped) == len(cases):
        return '— %s' % skipped[0].get('reason', 'skipped')
    exact = [c for c in cases if 'bit_identical' in c['metrics'] and c['status'] == 'ok' and
             c['params'].get('numerics') != 'float']
    floats = [c for c in cases if c['params'].get('numerics') == 'float']
    parts = []
    if exact:
        parts.append('✅ bit-exact')
    if floats:
        parts.append('✅ within tolerance')
    text = ' · '.join(parts) or '✅ passed'

    if skipped:
        text = '🟡 partial: %s (%d skipped: %s)' % (text, len(skipped), skipped[0].get('reason', ''))
    return text


def fmt_of(c):
    return c['params'].get('format', 'all')


def describe(report, stem):
    devices = {d['id']: d for d in report['devices']}
    gpu = next((d for d in report['devices'] if d['vendor'] != 'CPU'), report['devices'][0])
    cases = report['cases']
    mtp = report['summary']['mtp_acceptance']
    rows = []
    for dev in report['devices']:
        dcases = [c for c in cases if c['device'] == dev['id']]
        cells = {}
        for fam in FAMILIES:
            fcases = [c for c in dcases if c['family'] == fam]
            fmts = sorted({fmt_of(c) for c in fcases}, key=lambda f: (FORMATS + ['all']).index(f) if f in FORMATS + ['all'] else 99)
            cells[fam] = [(f, cell([c for c in fcases if fmt_of(c) == f])) for f in fmts] or [('all', '—')]
        rows.append({'device': dev, 'cells': cells})
    by_family = []
    for fam in FAMILIES:
        fc = [c for c in cases if c['family'] == fam]
        if fc:
            by_family.append({'name': fam, 'cases': fc})
    return {
        'stem': stem, 'report': report, 'devices': devices, 'primary': gpu, 'rows': rows, 'by_family': by_family,
        'mtp_cpu': mtp.get('cpu_draft_cpu_verify_exact'), 'mtp_gpu': mtp.get('gpu_draft_gpu_verify_exact'),
    }


def metric_text(m):
    keys = ['bit_identical', 'differing_outputs', 'nmse', 'nmse_vs_cpu_float', 'max_abs_error', 'acceptance',
            'token_agreement_with_cpu', 'fallbacks', 'gpu_experts', 'resident_tensors', 'faults_injected']
    out = []
    for k in keys:
        if k in m:
            v = m[k]
            out.append('%s %s' % (k, ('%.2e' % v) if isinstance(v, float) and k.startswith(('nmse', 'max')) else
                                  ('%.3f' % v) if isinstance(v, float) else json.dumps(v)))
    return ', '.join(out)


def generate(root, out_dir):
    validator, schema = load_validator(root)
    reports = []
    for path in sorted(glob.glob(os.path.join(root, 'hardware-matrix', '*.json'))):
        problems = validator.validate(schema, path)
        if problems:
            raise SystemExit('%s is not a valid report: %s' % (path, '; '.join(problems)))
        with open(path, encoding='utf-8') as f:
            reports.append(describe(json.load(f), os.path.splitext(os.path.basename(path))[0]))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(root, 'docs', 'templates')),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters['metrics'] = metric_text
    env.filters['gib'] = lambda b: '%.1f GiB' % (b / 2 ** 30)
    os.makedirs(os.path.join(out_dir, 'hardware-matrix'), exist_ok=True)
    with open(os.path.join(out_dir, 'hardware-matrix.md'), 'w', encoding='utf-8') as f:
        f.write(env.get_template('hardware-matrix.md.j2').render(reports=reports, families=FAMILIES))
    for r in reports:
        with open(os.path.join(out_dir, 'hardware-matrix', r['stem'] + '.md'), 'w', encoding='utf-8') as f:
            f.write(env.get_template('report.md.j2').render(r=r))
    return len(reports)


def check(root):
    with tempfile.TemporaryDirectory() as tmp:
        n = generate(root, tmp)
        stale = []
        want = ['hardware-matrix.md'] + ['hardware-matrix/' + os.path.basename(p)
                                         for p in glob.glob(os.path.join(tmp, 'hardware-matrix', '*.md'))]
        have = ['hardware-matrix/' + os.path.basename(p) for p in glob.glob(os.path.join(root, 'docs', 'hardware-matrix', '*.md'))]
        for rel in sorted(set(want) | set(have)):
            a, b = os.path.join(tmp, rel), os.path.join(root, 'docs', rel)
            if not (os.path.exists(a) and os.path.exists(b) and filecmp.cmp(a, b, shallow=False)):
                stale.append(rel)
        for rel in stale:
            print('docs/%s differs from the generator output: run docs/gen_hardware_matrix.py . docs' % rel)
        print('%d reports; %d stale pages' % (n, len(stale)))
        return 1 if stale else 0


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[2] == '--check':
        sys.exit(check(sys.argv[1]))
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    print('%d reports rendered' % generate(sys.argv[1], sys.argv[2]))
