#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# bench/plot.py on a recorded planccl-bench CSV: one SVG and one PNG per collective, a line per
# library and mode, and a clear error on a file that is not the bench's CSV. Exit 77 (skipped)
# only when matplotlib cannot be imported.
import importlib.util
import os
import sys
import tempfile

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("matplotlib not importable: skipped")
    sys.exit(77)


def load(path):
    spec = importlib.util.spec_from_file_location("plot", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    plot, data = load(sys.argv[1]), sys.argv[2]
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    rows = plot.read_rows(data)
    colls = list(dict.fromkeys(r["coll"] for r in rows))
    libs = set(r["lib"] for r in rows)
    with tempfile.TemporaryDirectory() as out:
        expect(plot.main([data, "--out", out]) == 0, "plot.py failed on the recorded CSV")
        base = os.path.splitext(os.path.basename(data))[0]
        for coll in colls:
            svg = os.path.join(out, "%s-%s.svg" % (base, coll))
            png = os.path.join(out, "%s-%s.png" % (base, coll))
            expect(os.path.exists(svg) and b"<svg" in open(svg, "rb").read(4096),
                   "%s: no SVG" % coll)
            expect(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
                   "%s: no PNG" % coll)
        # one line per (library, mode) on each axis, each with a point per size of its series
        fig = plot.make_figure(rows, "allreduce")
        for ax in fig.axes:
            labels = sorted(line.get_label() for line in ax.get_lines())
            want = sorted("%s %s" % (lib, m) for lib in libs for m in ("eager", "graph"))
            expect(labels == want, "allreduce lines %s, want %s" % (labels, want))
            for line in ax.get_lines():
                lib, mode = line.get_label().split()
                n = sum(1 for r in rows if r["coll"] == "allreduce" and r["lib"] == lib
                        and r["mode"] == mode)
                expect(len(line.get_xdata()) == n, "%s: %d points, want %d"
                       % (line.get_label(), len(line.get_xdata()), n))
        lat = fig.axes[0].get_lines()[0]
        xs = list(lat.get_xdata())
        expect(xs == sorted(xs), "sizes not in order")
        # a file that is not the bench's CSV: exit 2 and a reason
        bad = os.path.join(out, "bad.csv")
        with open(bad, "w") as f:
            f.write("size,time\n1,2\n")
        expect(plot.main([bad, "--out", out]) == 2, "a foreign CSV was not refused")
        # in-place rows are dashed lines when asked for
        inplace = [dict(r, place="in", time_us=r["time_us"] * 2) for r in rows]
        fig = plot.make_figure(rows + inplace, "allgather", ("out", "in"))
        dashed = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
        expect(len(dashed) == len(libs) * 2, "in-place lines: %d" % len(dashed))
    for f in failures:
        print("FAIL:", f)
    print("%d checks failed" % len(failures) if failures else "plot.py: all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
