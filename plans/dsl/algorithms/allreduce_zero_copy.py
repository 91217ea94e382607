# SPDX-License-Identifier: MIT
# Allreduce, Simple, zero-copy (registered buffers only: it reads and writes the peers' user
# buffers): rank r owns chunk r. Handshake; it reduces chunk r of every rank's input straight
# from the peers' memory and writes the result into every peer's output; closing signal/wait.
from planccl_dsl import SIMPLE, Program

from .common import block_channels, ring_order, sync_all


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    p = Program(name, "allreduce", nranks, chunks=nranks, protocol=SIMPLE, inplace=inplace,
                threads=threads, min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    for r in p.ranks:
        out = r.input if inplace else r.output
        peers = ring_order(r.id, p.ranks)
        ch = block_channels(p, r, peers, blocks)

        def sync():
            sync_all(ch, peers, tbs)

        sync()  # every peer is in this call: its input is ready, its output free
        acc = r.input[r.id]
        for q in peers:
            ch[q.id].reduce(out[r.id], acc, [q.input[r.id]], tbs)
            acc = out[r.id]
        for q in peers:
            ch[q.id].put((q.input if inplace else q.output)[r.id], out[r.id], tbs)
        sync()  # every peer's result is in my output
    return p
