#!/usr/bin/env python3
"""Plots effective weight bandwidth versus S for each format from coli-bench-gpu results, with
the measured read bandwidth as the roofline.

  plot_bench.py RESULTS.json OUT.png        Google Benchmark JSON (--benchmark_out)
  plot_bench.py RESULTS.console.txt OUT.png the console output of the same run
  plot_bench.py RESULTS OUT.png EXCLUDE     leaves out the benchmarks whose names match the regular
                                            expression EXCLUDE (points that do not describe the tree
                                            the plot is shown for; say which in its caption)
"""
import json
import re
import sys

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402


UNITS = {'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12, '': 1.0}


def from_console(path):
    """The benchmarks of a console log as dicts like the JSON's (name and counters)."""
    benches, context = [], {}
    for line in open(path, encoding='utf-8'):
        m = re.match(r'^(device|read_bandwidth_151MB_bytes_per_second): (.+)$', line.strip())
        if m:
            context[m.group(1)] = m.group(2)
        if line.startswith('BM_'):
            b = {'name': line.split()[0].replace('/manual_time', '').replace('/real_time', '')}
            for k, v, unit in re.findall(r'(\w+)=([0-9.]+)([kMGT]?)', line):
                b[k] = float(v) * UNITS[unit]
            benches.append(b)
    context.setdefault('device', 'see the log')
    return {'context': context, 'benchmarks': benches}


def main(path, png, exclude=None):
    data = from_console(path) if path.endswith('.txt') else json.load(open(path))
    if exclude:
        data['benchmarks'] = [b for b in data['benchmarks'] if not re.search(exclude, b['name'])]
    roof = float(data['context'].get('read_bandwidth_151MB_bytes_per_second', 0)) / 1e12
    series = {}
    for b in data['benchmarks']:
        m = re.match(r'BM_gpu_matmul/(\w+)/(exact|float)/O:2048/I:6144/S:(\d+)', b['name'])
        if not m or 'weight_bytes_per_second' not in b:
            continue
        series.setdefault('%s %s' % (m.group(1), m.group(2)), []).append((int(m.group(3)), b['weight_bytes_per_second'] / 1e12))
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker='o', label=name, linestyle='-' if 'exact' in name else '--')
    if roof:
        ax.axhline(roof, color='black', linewidth=1.5, label='read bandwidth %.2f TB/s (measured)' % roof)
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.set_xlabel('S (rows)')
    ax.set_ylabel('effective weight bandwidth (TB/s)')
    ax.set_title('matmul 2048x6144 on %s' % data['context'].get('device', '?'))
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
