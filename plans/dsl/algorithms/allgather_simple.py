# SPDX-License-Identifier: MIT
# Allgather, Simple protocol, staged through scratch: handshake, every rank puts its input into
# every peer's scratch, signal/wait, each copies the peers' data (and its own) into its output.
from planccl_dsl import SIMPLE, Program

from .common import block_channels, ring_order, slot, sync_all


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    p = Program(name, "allgather", nranks, protocol=SIMPLE, inplace=inplace, threads=threads,
                min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    for r in p.ranks:
        peers = ring_order(r.id, p.ranks)
        ch = block_channels(p, r, peers, blocks)
        sync_all(ch, peers, tbs)  # every peer is in this call: its scratch is free
        for q in peers:
            ch[q.id].put(q.scratch[slot(r.id, q.id)], r.input[0], tbs)
        for q in peers:
            ch[q.id].signal(tbs)
        if not inplace:
            r.copy(r.output[r.id], r.input[0], tbs)
        for q in peers:
            ch[q.id].wait(tbs)
        for q in p.ranks:
            if q is not r:
                r.copy(r.output[q.id], r.scratch[slot(q.id, r.id)], tbs)
    return p
