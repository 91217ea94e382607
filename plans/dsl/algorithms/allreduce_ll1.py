# SPDX-License-Identifier: MIT
# Allreduce, one phase, all pairs, LL: every rank sends its whole input as packets into every
# peer's scratch and reduces all contributions itself; packet flags are the only sync.
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot


def build(nranks, inplace, blocks, threads, lo, hi, name, priority=0, same_order=None, fuse=True):
    """same_order (default from 3 ranks on): every rank reduces x0 + x1 + ... in rank order, so
    float results are bit-identical on all ranks. A packet reduction's first operand must be
    plain data, so ranks other than 0 unpack rank 0's packets first and reduce their own input
    from packets too (scratch slot j = rank j's packets). 2 ranks need none of it (a+b == b+a):
    own input + the peer's packets, in compact slots."""
    same_order = nranks > 2 if same_order is None else same_order
    at = (lambda s, r: s) if same_order else slot
    p = Program(name, "allreduce", nranks, inplace=inplace, threads=threads, min_bytes=lo,
                max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    for r in p.ranks:
        out = r.input if inplace else r.output
        ch = memory_channels(p, r.id)
        for q in ring_order(r.id, p.ranks):
            ch[q.id].put_packets(q.scratch[at(r.id, q.id)], r.input[0], tbs)
        if not same_order:
            r.reduce_packets(out[0], r.input[0], [r.scratch[j] for j in range(nranks - 1)], tbs)
            continue
        first = r.input[0]
        if r.id != 0:
            r.copy_packets(r.scratch[r.id], r.input[0], tbs)
            r.unpack_packets(out[0], r.scratch[0], tbs)
            first = out[0]
        r.reduce_packets(out[0], first, [r.scratch[j] for j in range(1, nranks)], tbs)
    return p
