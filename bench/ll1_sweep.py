#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tunes the shipped one-phase LL allreduce: writes variants with other block/thread counts
(priority 1, so they win over the installed plans), runs planccl-bench with each through
PLANCCL_PLAN_DIR, and prints the time per call (eager and CUDA graph) of every variant by size.
Standard library only. Run on a 2-GPU machine after scripts/gpu_check.sh built build-gpu:

    python3 bench/ll1_sweep.py [--variants 1x256,1x512,2x512,4x512,8x512] [--min 1K --max 64K]
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plans", "dsl"))
sys.dont_write_bytecode = True
from algorithms import allreduce_ll1  # noqa: E402
from planccl_dsl import render  # noqa: E402

KIB = 1 << 10

KIB, MIB = 1 << 10, 1 << 20
SIZES = "1K 2K 4K 8K 16K 32K 64K 128K 256K 512K".split()


def write_variant(d, blocks, threads, hi=64 * KIB):
    for inplace in (True, False):
        name = "allreduce_2gpu_ll1_b%dt%d_%s" % (blocks, threads,
                                                  "inplace" if inplace else "outofplace")
        p = allreduce_ll1.build(2, inplace, blocks, threads, 16, hi, name, priority=1).compile()
        with open(os.path.join(d, name + ".json"), "w") as f:
            f.write(render(p))


def size_label(n):
    for unit, mult in (("M", MIB), ("K", KIB)):
        if n >= mult and n % mult == 0:
            return "%d%s" % (n // mult, unit)
    return str(n)


def bench(plan_dir, lo, hi):
    """{size label: (eager us, graph us, wrong elements, path)} from planccl-bench's CSV."""
    env = dict(os.environ, PLANCCL_PLAN_DIR=plan_dir, NCCL_NVLS_ENABLE="0")
    exe = os.path.join(ROOT, "build-gpu", "install", "bin", "planccl-bench")
    lib = os.path.join(ROOT, "build-gpu", "install", "lib", "libplanccl.so")
    csv_path = os.path.join(plan_dir, "bench.csv")
    cmd = [exe, "--coll", "allreduce", "-b", lo, "-e", hi, "-f", "2", "-g", "2", "--place", "out",
           "--repeat", "3", "--lib", "planccl=" + lib, "--csv", csv_path]
    subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    rows = {}
    if not os.path.exists(csv_path):
        return rows
    with open(csv_path) as f:
        for r in csv.DictReader(f):
            cell = rows.setdefault(size_label(int(r["bytes"])), {"wrong": 0, "path": r["path"]})
            cell[r["mode"]] = r["time_us"]
            cell["wrong"] += int(r["wrong"])
    return {k: (v.get("eager", "-"), v.get("graph", "-"), str(v["wrong"]), v["path"])
            for k, v in rows.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="1x256,1x512,2x512,4x512,8x512")
    ap.add_argument("--out", default=None)
    ap.add_argument("--min", default="1K")
    ap.add_argument("--max", default="64K")
    a = ap.parse_args()
    results = {}
    for v in a.variants.split(","):
        blocks, threads = (int(x) for x in v.split("x"))
        d = tempfile.mkdtemp(prefix="ll1_%s_" % v, dir=a.out)
        hi = int(a.max[:-1]) * {"K": KIB, "M": MIB}[a.max[-1]]
        write_variant(d, blocks, threads, hi)
        results[v] = bench(d, a.min, a.max)
    print("one-phase LL allreduce, planccl-bench us per call, eager / graph (wrong, path)")
    print("%6s" % "bytes" + "".join("%18s" % v for v in results))
    for s in SIZES:
        if not any(s in results[v] for v in results):
            continue
        cells = []
        for v in results:
            r = results[v].get(s)
            cells.append("%18s" % ("%s / %s%s" % (r[0], r[1], "" if r[2] == "0" else " WRONG")
                                   if r else "-"))
        print("%6s" % s + "".join(cells))
    bad = [v for v in results for r in results[v].values() if r[2] != "0" or "_b" not in r[3]]
    if bad:
        print("variants with wrong results or not selected:", " ".join(sorted(set(bad))))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
