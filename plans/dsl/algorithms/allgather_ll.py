# SPDX-License-Identifier: MIT
# Allgather, LL: every rank sends its input as packets into every peer's scratch and unpacks the
# peers' packets into their output chunks (out of place it also copies its own input).
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    p = Program(name, "allgather", nranks, inplace=inplace, threads=threads, min_bytes=lo,
                max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    for r in p.ranks:
        ch = memory_channels(p, r.id)
        for q in ring_order(r.id, p.ranks):
            ch[q.id].put_packets(q.scratch[slot(r.id, q.id)], r.input[0], tbs)
        if not inplace:
            r.copy(r.output[r.id], r.input[0], tbs)
        for q in p.ranks:
            if q is not r:
                r.unpack_packets(r.output[q.id], r.scratch[slot(q.id, r.id)], tbs)
    return p
