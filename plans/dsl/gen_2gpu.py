#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates planccl's shipped 2-GPU LL plans (MSCCL++ executor JSON, planccl extensions
nranks_per_node and priority). Standard library only. Run from anywhere:

    python3 plans/dsl/gen_2gpu.py            # rewrites plans/{,extra/}*/2gpu_*.json
    python3 plans/dsl/gen_2gpu.py --check    # exit 1 if the files on disk differ (for CI)

The building blocks (and the one-phase allreduce and allgather for any rank count) live in
pclgen.py; gen_ngpu.py writes the 4- and 8-GPU plans with them.

Every op is sliced over the plan's blocks with tbg_info, so sizes only need to split into whole
16-byte units per chunk: one-phase allreduce takes any multiple of 16 bytes, two-phase allreduce
and allgather multiples of 32 (two chunks). Other sizes are not runnable and fall back to NCCL
(the registry also falls back from two-phase to one-phase for 16 mod 32 sizes: see priorities).
Tuning knobs (blocks, threads, ranges) are the constants below.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (CI runs this from there)
import pclgen  # noqa: E402
from pclgen import KIB, MIB, loc, rem, tbg, gpu, plan  # noqa: E402

# Tunables, set from planccl-bench on 2 H200s over NVLink (README, "Measured results";
# bench/ll1_sweep.py measured the block counts: bench/results/2026-11-29-h200x2-session2/). The
# default set (plans/<collective>/) holds only plans that matched or beat NCCL there both eagerly
# and under CUDA graphs: the one-phase allreduce up to 128 KiB, in three block shapes (one small
# block is cheapest up to 2 KiB; more blocks pay off from 32 KiB). The opt-in set (plans/extra/,
# installed to share/planccl/plans-extra, enabled with PLANCCL_PLAN_DIR) holds the two-phase
# allreduce (slower than NCCL on H200) and the allgather (faster eagerly, slower in graphs).
# Each entry: file suffix, blocks, threads per block, min and max bytes (every 16-byte multiple).
LL1_SHAPES = [
    ("ll1_small", 1, 256, 16, 2 * KIB),
    ("ll1", 16, 512, 2 * KIB + 1, 32 * KIB),
    ("ll1_large", 32, 512, 32 * KIB + 1, 128 * KIB),
]
LL2_BLOCKS, LL2_THREADS = 16, 1024
LL2_MIN, LL2_MAX = 128 * KIB + 1, 2 * MIB  # opt-in; priority 1 where it is loaded
AG_BLOCKS, AG_THREADS = 8, 512
AG_MIN, AG_MAX = 32, 2 * MIB            # opt-in; total output bytes

NRANKS = 2


def allreduce_ll1(inplace, shape):
    """One phase: each rank packs its whole input into the peer's scratch, then reduces its input
    with the peer's packets into its output. Packet flags are the only synchronisation."""
    suffix, blocks, threads, lo, hi = shape
    return pclgen.allreduce_ll1(NRANKS, inplace, blocks, threads, lo, hi, 0,
                                "allreduce_2gpu_%s_%s" % (suffix, pclgen.kind(inplace)))


def allreduce_ll2(inplace):
    """Two phases in packets (reduce-scatter + all-gather): rank r owns chunk r. It packs the
    peer's chunk into the peer's scratch slot 0, reduces its own chunk with the peer's packets
    (respkt: result to its output and as packets into the peer's slot 1), then unpacks the peer's
    reduced chunk from its own slot 1."""
    out = "i" if inplace else "o"
    gpus = []
    for r in range(NRANKS):
        peer = 1 - r
        blocks = []
        for b in range(LL2_BLOCKS):
            t = tbg(b, LL2_BLOCKS)
            blocks.append([
                {"name": "ppkt", "channel_type": "memory", "src_buff": [loc("i", peer)],
                 "dst_buff": [rem(0, 0)], "tbg_info": t},
                {"name": "respkt", "channel_type": "memory",
                 "src_buff": [loc("i", r), loc("s", 0)],
                 "dst_buff": [loc(out, r), rem(0, 1)], "tbg_info": t},
                {"name": "nop"},
                {"name": "upkt", "src_buff": [loc("s", 1)], "dst_buff": [loc(out, peer)],
                 "tbg_info": t},
            ])
        gpus.append(gpu(r, NRANKS, 2, 2, 2, blocks))
    kind = "inplace" if inplace else "outofplace"
    return plan("allreduce_2gpu_ll2_" + kind, "allreduce", inplace, LL2_THREADS, LL2_MIN, LL2_MAX,
                1, NRANKS, gpus)


def allgather_ll(inplace):
    """Each rank packs its input into the peer's scratch and unpacks the peer's packets into the
    peer's output slot; out-of-place also copies its own input into its own slot."""
    return pclgen.allgather_ll(NRANKS, inplace, AG_BLOCKS, AG_THREADS, AG_MIN, AG_MAX, 0,
                               "allgather_2gpu_ll_" + pclgen.kind(inplace))


def outputs():
    for ip in (True, False):
        kind = "inplace" if ip else "outofplace"
        for shape in LL1_SHAPES:
            yield (os.path.join("allreduce", "2gpu_%s_%s.json" % (shape[0], kind)),
                   allreduce_ll1(ip, shape))
        yield os.path.join("extra", "allreduce", "2gpu_ll2_%s.json" % kind), allreduce_ll2(ip)
        yield os.path.join("extra", "allgather", "2gpu_ll_%s.json" % kind), allgather_ll(ip)


if __name__ == "__main__":
    sys.exit(pclgen.main(sys.argv[1:], outputs(), "gen_2gpu.py"))
