# SPDX-License-Identifier: MIT
# Reduce to rank 0 (other roots: the executor relabels the ranks). LL: every peer sends its input
# as packets into the root's scratch (one slot per peer), the root reduces its input with them in
# rank order and tells each peer it has read them. Simple: the root says its scratch is free, the
# peers put their inputs there and signal, the root reduces.
from planccl_dsl import LL, Program

from .common import root_channels, slot

ROOT = 0


def build(nranks, inplace, blocks, threads, lo, hi, name, protocol=LL, priority=0, fuse=True):
    p = Program(name, "reduce", nranks, protocol=protocol, inplace=inplace, threads=threads,
                min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    root = p.ranks[ROOT]
    peers, down, up = root_channels(p, ROOT, blocks)
    out = root.input[0] if inplace else root.output[0]
    # Slot j holds rank j + 1's data: the root reduces x0 op x1 op ... op x(n-1).
    slots = [root.scratch[j] for j in range(nranks - 1)]
    if protocol == LL:
        for q in peers:
            up[q.id].put_packets(root.scratch[slot(q.id, ROOT)], q.input[0], tbs)
        root.reduce_packets(out, root.input[0], slots, tbs)
        # Nothing else holds a peer back: without this it could run two calls ahead and
        # overwrite packets (in the same scratch half) that the root has not read yet.
        for q in peers:
            down[q.id].signal(tbs)
        for q in peers:
            up[q.id].wait(tbs)
    else:
        for q in peers:
            down[q.id].signal(tbs)  # the root is in this call: its scratch is free
        for q in peers:
            up[q.id].wait(tbs)
            up[q.id].put(root.scratch[slot(q.id, ROOT)], q.input[0], tbs)
            up[q.id].signal(tbs)
        for q in peers:
            down[q.id].wait(tbs)
        root.reduce(out, [root.input[0]] + slots, tbs)
    return p
