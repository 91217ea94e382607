# SPDX-License-Identifier: MIT
# Allreduce, Simple protocol, staged through scratch so user buffers need no registration; the
# pipelined form for large messages loops over slices and runs several instances side by side.
import contextlib

from planccl_dsl import SIMPLE, Program

from .common import block_channels, ring_order, slot, sync_all


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, unit=None, instances=1,
          fuse=True):
    """Rank r owns chunk r. Handshake; every rank puts chunk q into peer q's scratch; each
    reduces its own chunk and puts the result into every peer's scratch; each copies the peers'
    results out. With `unit`, the data phases loop over unit-byte slices (a signal/wait per
    slice); `instances` copies of the program each take their own part of every chunk."""
    p = Program(name, "allreduce", nranks, chunks=nranks, protocol=SIMPLE, inplace=inplace,
                threads=threads, min_bytes=lo, max_bytes=hi, priority=priority,
                instances=instances, fuse=fuse)
    tbs = p.group(range(blocks))
    results = nranks - 1  # scratch slots [0, n-1): peers' parts of my chunk; then their results
    for r in p.ranks:
        out = r.input if inplace else r.output
        peers = ring_order(r.id, p.ranks)
        ch = block_channels(p, r, peers, blocks)

        def sync():
            sync_all(ch, peers, tbs)

        sync()  # every peer is in this call: it has read its scratch of the last one
        with p.pipeline(unit, 1) if unit else contextlib.nullcontext():
            for q in peers:
                ch[q.id].put(q.scratch[slot(r.id, q.id)], r.input[q.id], tbs)
            sync()
            r.reduce(out[r.id], [r.input[r.id]] + [r.scratch[j] for j in range(nranks - 1)], tbs)
            for q in peers:
                ch[q.id].put(q.scratch[results + slot(r.id, q.id)], out[r.id], tbs)
            sync()
            for q in peers:
                r.copy(out[q.id], r.scratch[results + slot(q.id, r.id)], tbs)
    return p

