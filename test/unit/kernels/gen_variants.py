#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes DSL-made variants of the shipped LL and Simple algorithms (other rank counts, block
# counts, thread counts, placements, reduction orders, pipelining, the DSL's op fusion off) and a
# manifest of the kernel each must take: the fast path follows what a plan does, not the file it
# came from. test_exec_build's "variants" case reads the manifest.
# Usage: gen_variants.py <plans/dsl> <output directory>
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])

from planccl_dsl import render  # noqa: E402
from algorithms import (allgather_ll, allgather_simple, allreduce_ll1, allreduce_simple,  # noqa
                        allreduce_zero_copy, broadcast, reduce, reducescatter_ll,
                        reducescatter_simple)
from planccl_dsl import SIMPLE  # noqa: E402

KIB = 1 << 10


def variants():
    """(file name, ranks, kernel, program) for every variant."""
    for n in (2, 4, 8):
        for inplace in (True, False):
            place = "in" if inplace else "out"
            for blocks, threads in ((1, 256), (3, 512), (6, 256)):
                # rank order from 3 ranks on, as shipped: the slot order would let ranks round
                # their sums differently
                for order in ((True, False) if n == 2 else (True,)):
                    name = "ar%d_%s_b%d_t%d_%s" % (n, place, blocks, threads,
                                                  "same" if order else "slot")
                    yield (name, n, "ew", allreduce_ll1.build(
                        n, inplace, blocks, threads, 16, 64 * KIB, name, same_order=order,
                        fuse=blocks != 3))
                for coll, mod in (("ag", allgather_ll), ("rs", reducescatter_ll),
                                  ("bc", broadcast), ("rd", reduce)):
                    name = "%s%d_%s_b%d_t%d" % (coll, n, place, blocks, threads)
                    # a 2-rank in-place allgather is one put and one unpack: the EW kernel's
                    kernel = "ew-ag" if coll == "ag" and n == 2 and inplace else "ewx"
                    yield (name, n, kernel, mod.build(n, inplace, blocks, threads, 32,
                                                      256 * KIB, name, fuse=blocks != 3))
            # Plain ops (puts, reductions, copies, signals, waits): the Simple kernel, at any
            # thread count up to 1024, pipelined or not.
            for blocks, threads in ((1, 1024), (3, 512), (8, 1024)):
                tag = "%d_%s_b%d_t%d" % (n, place, blocks, threads)
                yield ("ars" + tag, n, "simple", allreduce_simple.build(
                    n, inplace, blocks, threads, 1 * KIB, 64 * (1 << 20), "ars" + tag))
                yield ("arp" + tag, n, "simple", allreduce_simple.build(
                    n, inplace, 1, threads, 1 * KIB, 64 * (1 << 20), "arp" + tag,
                    unit=16 * KIB, instances=blocks))
                yield ("arz" + tag, n, "simple", allreduce_zero_copy.build(
                    n, inplace, blocks, threads, 1 * KIB, 64 * (1 << 20), "arz" + tag))
                for coll, mod in (("ags", allgather_simple), ("rss", reducescatter_simple)):
                    yield (coll + tag, n, "simple", mod.build(
                        n, inplace, blocks, threads, 1 * KIB, 64 * (1 << 20), coll + tag))
                for coll, mod in (("bcs", broadcast), ("rds", reduce)):
                    yield (coll + tag, n, "simple", mod.build(
                        n, inplace, blocks, threads, 1 * KIB, 64 * (1 << 20), coll + tag,
                        protocol=SIMPLE))


def main():
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, n, kernel, prog in variants():
        path = os.path.join(out, name + ".json")
        with open(path, "w") as f:
            f.write(render(prog.compile()))
        lines.append("%s %d %s\n" % (kernel, n, path))
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.writelines(lines)
    print("gen_variants: %d plans in %s" % (len(lines), out))


if __name__ == "__main__":
    main()
