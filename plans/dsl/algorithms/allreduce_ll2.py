# SPDX-License-Identifier: MIT
# Allreduce, two phases in packets: a reduce-scatter (rank r reduces chunk r from every peer's
# packets) and an all-gather (it sends the reduced chunk to every peer as packets).
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    p = Program(name, "allreduce", nranks, chunks=nranks, inplace=inplace, threads=threads,
                min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    gathered = nranks - 1  # scratch slots [0, n-1): peers' parts of my chunk; then their results
    for r in p.ranks:
        out = r.input if inplace else r.output
        ch = memory_channels(p, r.id)
        peers = ring_order(r.id, p.ranks)
        for q in peers:
            ch[q.id].put_packets(q.scratch[slot(r.id, q.id)], r.input[q.id], tbs)
        r.reduce_packets(out[r.id], r.input[r.id], [r.scratch[j] for j in range(nranks - 1)],
                         tbs)
        for q in peers:
            ch[q.id].put_packets(q.scratch[gathered + slot(r.id, q.id)], out[r.id], tbs)
        for q in peers:
            r.unpack_packets(out[q.id], r.scratch[gathered + slot(q.id, r.id)], tbs)
    return p
