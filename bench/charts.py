#!/usr/bin/env python3
"""charts.py: draws the pictures of `ninja bench`'s report (run by bench/run_bench.py).

    python3 bench/charts.py build/bench/charts.json build/bench

charts.json is a list of charts, each {file, title, series: {impl: [[bytes, mean_us,
busbw_gbs], ...]}, memcpy_gbs}. Each picture has two panels against size (log scale): the
mean time per call (log scale) and the bus bandwidth, one line per implementation, zcoll
drawn heavier, one core's memcpy bandwidth as a dashed line. Exits with status 3 when
matplotlib cannot be imported (run_bench.py then tries Debian's /usr/bin/python3 or says so
in the report).
"""

import json
import os
import sys

NO_MATPLOTLIB = 3
STYLE = {'zcoll': ('C0', 'o', 2.5), 'zcoll_sym': ('C4', 'P', 2.5), 'openmpi': ('C1', 's', 1.2), 'mpich': ('C2', '^', 1.2),
         'gloo': ('C3', 'D', 1.2)}


def size_label(n, _pos=None):
    for unit, div in (('G', 1 << 30), ('M', 1 << 20), ('K', 1 << 10)):
        if n >= div:
            return '%g%s' % (n / div, unit)
    return '%g' % n


def draw(plt, ticker, chart, out_dir):
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(11, 4.2))
    for impl, pts in chart['series'].items():
        color, marker, width = STYLE.get(impl, ('C7', 'x', 1.0))
        xs = [p[0] for p in pts]
        lat.plot(xs, [p[1] for p in pts], color=color, marker=marker, linewidth=width,
                 label=impl)
        bw.plot(xs, [p[2] for p in pts], color=color, marker=marker, linewidth=width,
                label=impl)
    if chart.get('memcpy_gbs'):
        bw.axhline(chart['memcpy_gbs'], color='gray', linestyle='--', linewidth=1,
                   label='1-core memcpy')
    for ax, ylabel in ((lat, 'mean time per call (µs)'), (bw, 'bus bandwidth (GB/s)')):
        ax.set_xscale('log', base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(size_label))
        ax.set_xlabel('size (bytes per rank)')
        ax.set_ylabel(ylabel)
        ax.grid(True, which='major', alpha=0.3)
        ax.legend(fontsize='small')
    lat.set_yscale('log')
    fig.suptitle(chart['title'])
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, chart['file']), dpi=90)
    plt.close(fig)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write('usage: charts.py CHARTS.json OUT_DIR\n')
        return 2
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        import matplotlib.ticker as ticker
    except ImportError:
        sys.stderr.write('charts.py: matplotlib is not installed\n')
        return NO_MATPLOTLIB
    with open(argv[0]) as f:
        charts = json.load(f)
    for chart in charts:
        draw(plt, ticker, chart, argv[1])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
