#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates planccl's shipped 2-GPU LL plans (MSCCL++ executor JSON, planccl extensions
nranks_per_node and priority). Standard library only. Run from anywhere:

    python3 plans/dsl/gen_2gpu.py            # rewrites plans/allreduce/*.json and plans/extra/*/*.json
    python3 plans/dsl/gen_2gpu.py --check    # exit 1 if the files on disk differ (for CI)

Every op is sliced over the plan's blocks with tbg_info, so sizes only need to split into whole
16-byte units per chunk: one-phase allreduce takes any multiple of 16 bytes, two-phase allreduce
and allgather multiples of 32 (two chunks). Other sizes are not runnable and fall back to NCCL
(the registry also falls back from two-phase to one-phase for 16 mod 32 sizes: see priorities).
Tuning knobs (blocks, threads, ranges) are the constants below.
"""
import json
import os
import sys

KIB = 1024
MIB = 1024 * KIB

# Tunables, set from planccl-bench on 2 H200s over NVLink (README, "Measured results"). The
# default set (plans/<collective>/) holds only plans that matched or beat NCCL there both eagerly
# and under CUDA graphs: one-phase allreduce up to 64 KiB. The opt-in set (plans/extra/, installed
# to share/planccl/plans-extra, enabled with PLANCCL_PLAN_DIR) holds the two-phase allreduce
# (slower than NCCL from 128 KiB on H200) and the allgather (faster eagerly, slower in graphs).
LL1_BLOCKS, LL1_THREADS = 8, 512
LL1_MIN, LL1_MAX = 16, 64 * KIB          # every 16-byte multiple up to 64 KiB, priority 0
LL2_BLOCKS, LL2_THREADS = 16, 1024
LL2_MIN, LL2_MAX = 64 * KIB + 1, 2 * MIB  # opt-in; priority 1 where it is loaded
AG_BLOCKS, AG_THREADS = 8, 512
AG_MIN, AG_MAX = 32, 2 * MIB            # opt-in; total output bytes

NRANKS = 2


def loc(t, index, size=1):
    return {"type": t, "index": index, "size": size}


def rem(slot, index, size=1):
    return {"buffer_id": slot, "index": index, "size": size}


def tbg(b, n):
    return {"tb_id": b, "tbg_size": n}


def gpu(rank, ic, oc, sc, blocks):
    peer = 1 - rank
    return {
        "id": rank,
        "input_chunks": ic,
        "output_chunks": oc,
        "scratch_chunks": sc,
        "channels": [{"channel_type": "memory", "connected_to": [peer]}],
        "remote_buffers": [{"rank": peer, "type": "s", "access_channel_types": ["memory"]}],
        "semaphores": [],
        "threadblocks": [
            {
                "id": b,
                "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}],
                "ops": ops,
            }
            for b, ops in enumerate(blocks)
        ],
    }


def plan(name, coll, inplace, threads, lo, hi, prio, gpus):
    return {
        "name": name,
        "collective": coll,
        "protocol": "LL",
        "inplace": inplace,
        "reuse_resources": False,
        "num_threads_per_block": threads,
        "use_double_scratch_buffer": True,
        "buffer_alignment": 16,
        "min_message_size": lo,
        "max_message_size": hi,
        "nranks_per_node": NRANKS,
        "priority": prio,
        "gpus": gpus,
    }


def allreduce_ll1(inplace):
    """One phase: each rank packs its whole input into the peer's scratch, then reduces its input
    with the peer's packets into its output. Packet flags are the only synchronisation."""
    out = "i" if inplace else "o"
    gpus = []
    for r in range(NRANKS):
        blocks = []
        for b in range(LL1_BLOCKS):
            t = tbg(b, LL1_BLOCKS)
            blocks.append([
                {"name": "ppkt", "channel_type": "memory", "src_buff": [loc("i", 0)],
                 "dst_buff": [rem(0, 0)], "tbg_info": t},
                {"name": "repkt", "src_buff": [loc("i", 0), loc("s", 0)],
                 "dst_buff": [loc(out, 0)], "tbg_info": t},
            ])
        gpus.append(gpu(r, 1, 1, 1, blocks))
    kind = "inplace" if inplace else "outofplace"
    return plan("allreduce_2gpu_ll1_" + kind, "allreduce", inplace, LL1_THREADS, LL1_MIN, LL1_MAX,
                0, gpus)


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
        gpus.append(gpu(r, 2, 2, 2, blocks))
    kind = "inplace" if inplace else "outofplace"
    return plan("allreduce_2gpu_ll2_" + kind, "allreduce", inplace, LL2_THREADS, LL2_MIN, LL2_MAX,
                1, gpus)


def allgather_ll(inplace):
    """Each rank packs its input into the peer's scratch and unpacks the peer's packets into the
    peer's output slot; out-of-place also copies its own input into its own slot."""
    gpus = []
    for r in range(NRANKS):
        peer = 1 - r
        blocks = []
        for b in range(AG_BLOCKS):
            t = tbg(b, AG_BLOCKS)
            ops = [{"name": "ppkt", "channel_type": "memory", "src_buff": [loc("i", 0)],
                    "dst_buff": [rem(0, 0)], "tbg_info": t}]
            if not inplace:
                ops.append({"name": "copy", "src_buff": [loc("i", 0)], "dst_buff": [loc("o", r)],
                            "tbg_info": t})
            ops.append({"name": "upkt", "src_buff": [loc("s", 0)], "dst_buff": [loc("o", peer)],
                        "tbg_info": t})
            blocks.append(ops)
        gpus.append(gpu(r, 1, 2, 1, blocks))
    kind = "inplace" if inplace else "outofplace"
    return plan("allgather_2gpu_ll_" + kind, "allgather", inplace, AG_THREADS, AG_MIN, AG_MAX, 0,
                gpus)


def outputs():
    for ip in (True, False):
        kind = "inplace" if ip else "outofplace"
        yield os.path.join("allreduce", "2gpu_ll1_%s.json" % kind), allreduce_ll1(ip)
        yield os.path.join("extra", "allreduce", "2gpu_ll2_%s.json" % kind), allreduce_ll2(ip)
        yield os.path.join("extra", "allgather", "2gpu_ll_%s.json" % kind), allgather_ll(ip)


def render(p):
    return json.dumps(p, indent=1) + "\n"


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    check = "--check" in argv
    stale = []
    for rel, p in outputs():
        path = os.path.join(root, rel)
        text = render(p)
        if check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        stale.append(rel)
            except OSError:
                stale.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print("wrote", rel)
    if stale:
        print("stale (run plans/dsl/gen_2gpu.py):", " ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
