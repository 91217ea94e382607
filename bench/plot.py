#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Plots planccl-bench --csv output: per collective, latency and busbw against size, one line per
# library and mode (eager, graph; in-place dashed), as SVG and PNG. Usage in docs/bench.md.
import argparse
import csv
import os
import sys
from collections import defaultdict

REQUIRED = ("lib", "coll", "ngpus", "bytes", "type", "place", "mode", "time_us", "busbw_gbs")


def read_rows(path):
    """The CSV's rows as dicts; ValueError naming what is wrong with the file."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError("%s: not planccl-bench CSV, no column %s" % (path, ", ".join(missing)))
        rows = list(reader)
    for i, r in enumerate(rows, 2):
        try:
            r["bytes"] = int(r["bytes"])
            r["time_us"] = float(r["time_us"])
            r["busbw_gbs"] = float(r["busbw_gbs"])
        except ValueError:
            raise ValueError("%s:%d: bad number" % (path, i)) from None
    return rows


def series(rows, coll, places):
    """{(lib, mode, place): [(bytes, time_us, busbw)]} of one collective, sorted by size; the
    libraries in their order of appearance."""
    out = defaultdict(list)
    for r in rows:
        if r["coll"] == coll and r["place"] in places:
            out[(r["lib"], r["mode"], r["place"])].append(
                (r["bytes"], r["time_us"], r["busbw_gbs"]))
    return {k: sorted(v) for k, v in out.items()}


def size_label(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def make_figure(rows, coll, places=("out",), title=None):
    """The figure of one collective: latency (log-log) and busbw (log x) side by side."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = series(rows, coll, places)
    first = next(r for r in rows if r["coll"] == coll)
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(13, 5))
    libs = list(dict.fromkeys(k[0] for k in s))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (lib, mode, place), pts in s.items():
        color = colors[libs.index(lib) % len(colors)]
        style = dict(color=color, marker="o" if mode == "eager" else "s", markersize=3,
                     linestyle="--" if place == "in" else "-", alpha=1.0 if mode == "eager" else 0.6)
        label = "%s %s%s" % (lib, mode, " in-place" if place == "in" else "")
        x = [p[0] for p in pts]
        lat.plot(x, [p[1] for p in pts], label=label, **style)
        bw.plot(x, [p[2] for p in pts], label=label, **style)
    for ax, name in ((lat, "time per call (us)"), (bw, "bus bandwidth (GB/s)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel(name)
        ax.grid(True, which="both", alpha=0.3)
        ticks = sorted({p[0] for pts in s.values() for p in pts})
        step = max(1, len(ticks) // 10)
        ax.set_xticks(ticks[::step])
        ax.set_xticklabels([size_label(t) for t in ticks[::step]], rotation=45)
    lat.set_yscale("log")
    bw.legend(fontsize=8)
    fig.suptitle(title or "%s, %s, %s GPUs" % (coll, first["type"], first["ngpus"]))
    fig.tight_layout()
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description="plot planccl-bench --csv output")
    ap.add_argument("csv")
    ap.add_argument("--out", default=None, help="folder of the plots (default: the CSV's)")
    ap.add_argument("--place", choices=("out", "in", "both"), default="out")
    ap.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    try:
        rows = read_rows(a.csv)
    except (OSError, ValueError) as e:
        print("plot.py: %s" % e, file=sys.stderr)
        return 2
    if not rows:
        print("plot.py: %s has no results" % a.csv, file=sys.stderr)
        return 1
    out = a.out or os.path.dirname(os.path.abspath(a.csv))
    os.makedirs(out, exist_ok=True)
    places = ("out", "in") if a.place == "both" else (a.place,)
    base = os.path.splitext(os.path.basename(a.csv))[0]
    import matplotlib.pyplot as plt
    for coll in dict.fromkeys(r["coll"] for r in rows):
        if not series(rows, coll, places):
            continue
        fig = make_figure(rows, coll, places, a.title)
        for ext in ("svg", "png"):
            path = os.path.join(out, "%s-%s.%s" % (base, coll, ext))
            fig.savefig(path, dpi=110)
            print(path)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
