#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes every shipped plan of plans/ from the DSL algorithms (the list and the tunables are
# below). `--check` rewrites nothing and exits 1 naming each file that differs (CI runs it).
import argparse
import os
import sys

sys.dont_write_bytecode = True  # CI runs this in the source tree: leave no __pycache__ there
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from planccl_dsl import render  # noqa: E402
from algorithms import (allgather_ll, allgather_mn_ll, allgather_simple,  # noqa: E402
                        allreduce_hier_ll, allreduce_ll1, allreduce_ll2, allreduce_simple,
                        allreduce_zero_copy, broadcast, reduce, reducescatter_hier_ll,
                        reducescatter_ll, reducescatter_mn_ll, reducescatter_simple)

KIB, MIB = 1 << 10, 1 << 20
ROOT = os.path.dirname(HERE)

# Measured with planccl-bench on 2 H200s over NVLink (docs/performance.md): the default
# set holds only what matched or beat NCCL eagerly and under CUDA graphs: the one-phase
# allreduce up to 128 KiB in three block shapes (file suffix, blocks, threads, min, max bytes).
LL1_2GPU = [("ll1_small", 1, 256, 16, 2 * KIB),
            ("ll1", 16, 512, 2 * KIB + 1, 32 * KIB),
            ("ll1_large", 32, 512, 32 * KIB + 1, 128 * KIB)]
# Opt-in (plans/extra): slower than NCCL somewhere in their range on 2 H200s, or not measured
# yet (4 and 8 GPUs: first guesses, the 2-GPU values).
LL2_2GPU = dict(blocks=16, threads=1024, lo=128 * KIB + 1, hi=2 * MIB, priority=1)
AG_2GPU = dict(blocks=8, threads=512, lo=32, hi=2 * MIB)
NGPU = dict(blocks=8, threads=512)
AR_NGPU_MAX, AG_NGPU_MAX, RS_NGPU_MAX = 64 * KIB, 256 * KIB, 256 * KIB
# Written with the DSL, simulated, not yet run on GPUs: opt-in, blocks and ranges are first
# guesses. The Simple plans (scratch-staged, no registration needed) are meant for large
# messages; their ranges start at 16 bytes only so that CI simulates them at small sizes, and a
# lower priority lets the LL plans win wherever both match (pipelined last: for the largest).
NEW = dict(blocks=8, threads=512)
LL2_NGPU = dict(lo=64 * KIB + 1, hi=1 * MIB)
SIMPLE_AR = dict(blocks=8, threads=1024, lo=16, hi=32 * MIB, priority=-1)
# The pipelined allreduce covers every larger size: calls whose scratch would exceed the
# communicator's run in segments of it (executor/exec/exec_segment.c), so its range ends at 1 GiB.
PIPE_AR = dict(blocks=1, threads=1024, lo=16, hi=1024 * MIB, unit=16 * KIB, instances=8,
               priority=-2)
SIMPLE_AG_RS = dict(blocks=8, threads=1024, lo=16, hi=64 * MIB, priority=-1)
ZERO_COPY_AR = dict(blocks=8, threads=1024, lo=16, hi=64 * MIB, priority=-1)
BCAST_LL = dict(blocks=8, threads=512, lo=16, hi=256 * KIB)
# Broadcast and reduce are elementwise too: their Simple plans run larger calls in segments.
BCAST_SIMPLE = dict(blocks=8, threads=1024, lo=16, hi=1024 * MIB, priority=-1)
# Reduce: the broadcast's shapes (the same traffic, reversed). The Simple root's scratch holds
# n - 1 inputs, more than 4 GiB at 8 ranks above 585 MiB: such calls cannot run whole, but they
# run in segments of the communicator's scratch like any larger call (sized from the plans, up
# to its 64 MiB cap: shim/comm/comm_res.c; executor/plan/plan_layout.c, pcl_plan_size_selectable).
REDUCE_LL = dict(BCAST_LL)
REDUCE_SIMPLE = dict(BCAST_SIMPLE)
RS_LL_2GPU = dict(blocks=8, threads=512, lo=32, hi=256 * KIB)
# Several nodes (port channels between them): N nodes x G GPUs.
HIER_AR = [(2, 2), (2, 4), (2, 8), (4, 2)]
MN_AG_RS = [(2, 1), (2, 2), (2, 4), (2, 8)]
# Reduce-scatter across nodes sends every chunk straight to its owner; at 2 x 4 on one GPU
# (emulated hosts, port channels over TCP) its calls stall for seconds (timeouts at 3 s in most
# runs, at 10 s once in 400 cases) while the simulator passes it: not shipped beyond 2 x 2 until
# that is understood.
MN_RS = [(2, 1), (2, 2)]
# The hierarchical reduce-scatter instead: one node partial per remote node crosses the network
# (a port recspkt each), so a rank drives nodes - 1 port channels, as the hierarchical allreduce
# and the multi-node allgather that run on that bed do, not gpus x (nodes - 1).
HIER_RS = [(2, 2), (2, 4), (2, 8), (4, 2)]
MN = dict(blocks=8, threads=512, hi=1 * MIB)


def kind(inplace):
    return "inplace" if inplace else "outofplace"


def plans():
    """(path under plans/, factory(fuse) -> Program) for every shipped plan."""
    for ip in (True, False):
        k = kind(ip)
        for suffix, blocks, threads, lo, hi in LL1_2GPU:
            yield ("allreduce/2gpu_%s_%s.json" % (suffix, k),
                   lambda fuse, ip=ip, s=suffix, b=blocks, t=threads, lo=lo, hi=hi:
                   allreduce_ll1.build(2, ip, b, t, lo, hi, "allreduce_2gpu_%s_%s" %
                                       (s, kind(ip)), fuse=fuse))
        yield ("extra/allreduce/2gpu_ll2_%s.json" % k,
               lambda fuse, ip=ip: allreduce_ll2.build(2, ip, name="allreduce_2gpu_ll2_" +
                                                       kind(ip), fuse=fuse, **LL2_2GPU))
        yield ("extra/allgather/2gpu_ll_%s.json" % k,
               lambda fuse, ip=ip: allgather_ll.build(2, ip, name="allgather_2gpu_ll_" +
                                                      kind(ip), fuse=fuse, **AG_2GPU))
    for n in (4, 8):
        for ip in (True, False):
            k = kind(ip)
            yield ("extra/allreduce/%dgpu_ll1_%s.json" % (n, k),
                   lambda fuse, n=n, ip=ip: allreduce_ll1.build(
                       n, ip, lo=16, hi=AR_NGPU_MAX, name="allreduce_%dgpu_ll1_%s" % (n, kind(ip)),
                       fuse=fuse, **NGPU))
            yield ("extra/allgather/%dgpu_ll_%s.json" % (n, k),
                   lambda fuse, n=n, ip=ip: allgather_ll.build(
                       n, ip, lo=16 * n, hi=AG_NGPU_MAX, name="allgather_%dgpu_ll_%s" %
                       (n, kind(ip)), fuse=fuse, **NGPU))
            yield ("extra/reducescatter/%dgpu_ll_%s.json" % (n, k),
                   lambda fuse, n=n, ip=ip: reducescatter_ll.build(
                       n, ip, lo=16 * n, hi=RS_NGPU_MAX, name="reducescatter_%dgpu_ll_%s" %
                       (n, kind(ip)), fuse=fuse, **NGPU))
    yield from new_plans()


def _plan(path, build, name, *args, **kw):
    return path, lambda fuse: build(*args, name=name, fuse=fuse, **kw)


def new_plans():
    for ip in (True, False):
        k = kind(ip)
        yield _plan("extra/reducescatter/2gpu_ll_%s.json" % k, reducescatter_ll.build,
                    "reducescatter_2gpu_ll_" + k, 2, ip, **RS_LL_2GPU)
        for n in (4, 8):
            yield _plan("extra/allreduce/%dgpu_ll2_%s.json" % (n, k), allreduce_ll2.build,
                        "allreduce_%dgpu_ll2_%s" % (n, k), n, ip, **dict(NEW, **LL2_NGPU))
        for n in (2, 4, 8):
            yield _plan("extra/allreduce/%dgpu_simple_%s.json" % (n, k), allreduce_simple.build,
                        "allreduce_%dgpu_simple_%s" % (n, k), n, ip, **SIMPLE_AR)
            yield _plan("extra/allreduce/%dgpu_simple_pipe_%s.json" % (n, k),
                        allreduce_simple.build, "allreduce_%dgpu_simple_pipe_%s" % (n, k), n, ip,
                        **PIPE_AR)
            yield _plan("extra/allreduce/%dgpu_zerocopy_%s.json" % (n, k),
                        allreduce_zero_copy.build, "allreduce_%dgpu_zerocopy_%s" % (n, k), n, ip,
                        **ZERO_COPY_AR)
            yield _plan("extra/allgather/%dgpu_simple_%s.json" % (n, k), allgather_simple.build,
                        "allgather_%dgpu_simple_%s" % (n, k), n, ip, **SIMPLE_AG_RS)
            yield _plan("extra/reducescatter/%dgpu_simple_%s.json" % (n, k),
                        reducescatter_simple.build, "reducescatter_%dgpu_simple_%s" % (n, k), n,
                        ip, **SIMPLE_AG_RS)
            yield _plan("extra/broadcast/%dgpu_ll_%s.json" % (n, k), broadcast.build,
                        "broadcast_%dgpu_ll_%s" % (n, k), n, ip, **BCAST_LL)
            yield _plan("extra/broadcast/%dgpu_simple_%s.json" % (n, k), broadcast.build,
                        "broadcast_%dgpu_simple_%s" % (n, k), n, ip, protocol="Simple",
                        **BCAST_SIMPLE)
            yield _plan("extra/reduce/%dgpu_ll_%s.json" % (n, k), reduce.build,
                        "reduce_%dgpu_ll_%s" % (n, k), n, ip, **REDUCE_LL)
            yield _plan("extra/reduce/%dgpu_simple_%s.json" % (n, k), reduce.build,
                        "reduce_%dgpu_simple_%s" % (n, k), n, ip, protocol="Simple",
                        **REDUCE_SIMPLE)
        for nodes, g in HIER_AR:
            yield _plan("extra/allreduce/%dx%dgpu_hier_ll_%s.json" % (nodes, g, k),
                        allreduce_hier_ll.build, "allreduce_%dx%dgpu_hier_ll_%s" % (nodes, g, k),
                        nodes, g, ip, lo=16 * g, **MN)
        for nodes, g in HIER_RS:
            yield _plan("extra/reducescatter/%dx%dgpu_hier_ll_%s.json" % (nodes, g, k),
                        reducescatter_hier_ll.build,
                        "reducescatter_%dx%dgpu_hier_ll_%s" % (nodes, g, k), nodes, g, ip,
                        lo=16 * nodes * g, **MN)
        for nodes, g in MN_AG_RS:
            n = nodes * g
            yield _plan("extra/allgather/%dx%dgpu_ll_%s.json" % (nodes, g, k),
                        allgather_mn_ll.build, "allgather_%dx%dgpu_ll_%s" % (nodes, g, k),
                        nodes, g, ip, lo=16 * n, **MN)
            if (nodes, g) in MN_RS:
                yield _plan("extra/reducescatter/%dx%dgpu_ll_%s.json" % (nodes, g, k),
                            reducescatter_mn_ll.build, "reducescatter_%dx%dgpu_ll_%s" %
                            (nodes, g, k), nodes, g, ip, lo=16 * n, **MN)


def on_disk(root):
    """Every plan file under root's default (<collective>/) and opt-in (extra/<collective>/)
    sets, as paths relative to root."""
    found = set()
    for base in (root, os.path.join(root, "extra")):
        if not os.path.isdir(base):
            continue
        for coll in sorted(os.listdir(base)):
            d = os.path.join(base, coll)
            if coll in ("dsl", "extra") or not os.path.isdir(d):
                continue
            for f in os.listdir(d):
                if f.endswith(".json"):
                    found.add(os.path.relpath(os.path.join(d, f), root))
    return found


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="exit 1 if a file on disk differs")
    ap.add_argument("--out", default=ROOT, help="write under this directory instead of plans/")
    args = ap.parse_args(argv)
    stale = []
    made = set()
    for rel, make in plans():
        made.add(rel)
        text = render(make(True).compile())
        path = os.path.join(args.out, rel)
        if args.check:
            try:
                with open(path) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                stale.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    # A plan file the DSL no longer writes would still be installed and loaded: --check names
    # it, a write removes it.
    for rel in sorted(on_disk(args.out) - made):
        if args.check:
            stale.append(rel + " (not written by the DSL)")
        else:
            os.remove(os.path.join(args.out, rel))
    if stale:
        print("plans differ from the DSL (run python3 plans/dsl/generate.py):")
        for rel in stale:
            print("  plans/" + rel)
        return 1
    if args.check:
        print("all plans up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
