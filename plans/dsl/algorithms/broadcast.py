# SPDX-License-Identifier: MIT
# Broadcast from rank 0. LL: the root sends its input as packets into every peer's scratch, each
# peer unpacks them and signals that it did. Simple: the peers say they are ready, the root puts
# its input into their scratch and signals, each peer copies it out.
from planccl_dsl import LL, SIMPLE, Program

from .common import root_channels

ROOT = 0


def build(nranks, inplace, blocks, threads, lo, hi, name, protocol=LL, priority=0, fuse=True):
    p = Program(name, "broadcast", nranks, protocol=protocol, inplace=inplace, threads=threads,
                min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    root = p.ranks[ROOT]
    peers, down, up = root_channels(p, ROOT, blocks)
    if protocol == LL:
        for q in peers:
            down[q.id].put_packets(q.scratch[0], root.input[0], tbs)
            q.unpack_packets((q.input if inplace else q.output)[0], q.scratch[0], tbs)
            up[q.id].signal(tbs)
        # Nothing else holds the root back: without this it could run two calls ahead and
        # overwrite packets (in the same scratch half) that a peer has not read yet.
        for q in peers:
            down[q.id].wait(tbs)
    else:
        for q in peers:
            up[q.id].signal(tbs)
            down[q.id].wait(tbs)  # the peer is in this call: its scratch is free
        for q in peers:
            down[q.id].put(q.scratch[0], root.input[0], tbs)
        for q in peers:
            down[q.id].signal(tbs)
            up[q.id].wait(tbs)
            q.copy((q.input if inplace else q.output)[0], q.scratch[0], tbs)
    if not inplace:
        root.copy(root.output[0], root.input[0], tbs)
    return p
