# SPDX-License-Identifier: MIT
# Reduce-scatter, Simple protocol, staged through scratch: handshake, rank r puts its chunk q into
# peer q's scratch, signal/wait, then reduces its own chunk with what the peers put.
from planccl_dsl import SIMPLE, Program

from .common import block_channels, ring_order, slot, sync_all


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    p = Program(name, "reducescatter", nranks, protocol=SIMPLE, inplace=inplace,
                threads=threads, min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    for r in p.ranks:
        peers = ring_order(r.id, p.ranks)
        ch = block_channels(p, r, peers, blocks)
        sync_all(ch, peers, tbs)  # every peer is in this call: its scratch is free
        for q in peers:
            ch[q.id].put(q.scratch[slot(r.id, q.id)], r.input[q.id], tbs)
        sync_all(ch, peers, tbs)
        out = r.input[r.id] if inplace else r.output[0]
        r.reduce(out, [r.input[r.id]] + [r.scratch[j] for j in range(nranks - 1)], tbs)
    return p
