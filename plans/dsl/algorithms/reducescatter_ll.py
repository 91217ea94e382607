# SPDX-License-Identifier: MIT
# Reduce-scatter, LL: rank r sends its input chunk q as packets into peer q's scratch, then
# reduces its own chunk r with the peers' packets into its output (in place: input chunk r).
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    p = Program(name, "reducescatter", nranks, inplace=inplace, threads=threads, min_bytes=lo,
                max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    for r in p.ranks:
        ch = memory_channels(p, r.id)
        for q in ring_order(r.id, p.ranks):
            ch[q.id].put_packets(q.scratch[slot(r.id, q.id)], r.input[q.id], tbs)
        out = r.input[r.id] if inplace else r.output[0]
        r.reduce_packets(out, r.input[r.id], [r.scratch[j] for j in range(nranks - 1)], tbs)
    return p
