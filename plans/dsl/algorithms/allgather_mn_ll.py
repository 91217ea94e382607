# SPDX-License-Identifier: MIT
# Allgather across nodes, LL: a rank sends its input as packets to its local peers (memory) and
# to rank j of every other node (port); each rank unpacks what it gets and forwards what came
# from another node to its own local peers, so each byte crosses the network once per node.
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot


def build(nodes, gpus, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    p = Program(name, "allgather", nodes * gpus, ranks_per_node=gpus, inplace=inplace,
                threads=threads, min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    # Scratch: [0, G-1) local peers' inputs; then one slot per node for rank j of that node (my
    # own slot stages my packets for the proxy); then G slots per node for forwarded inputs.
    twins, fwd = gpus - 1, gpus - 1 + nodes
    for r in p.ranks:
        a, j = r.node, r.id % gpus
        local = memory_channels(p, r.id)
        peers = [q for q in ring_order(r.id, p.ranks) if q.node == a]
        others = [b for b in range(nodes) if b != a]
        for q in peers:
            local[q.id].put_packets(q.scratch[slot(j, q.id % gpus)], r.input[0], tbs)
        r.copy_packets(r.scratch[twins + a], r.input[0], tbs)
        for b in others:
            twin = p.ranks[b * gpus + j]
            p.channel(r.id, twin.id, "port").put_packets(twin.scratch[twins + a],
                                                         r.scratch[twins + a], tbs)
        if not inplace:
            r.copy(r.output[r.id], r.input[0], tbs)
        for b in others:
            for q in peers:
                local[q.id].read_put_packets(q.scratch[fwd + b * gpus + j],
                                             r.scratch[twins + b], tbs)
            r.unpack_packets(r.output[b * gpus + j], r.scratch[twins + b], tbs)
        for q in peers:
            r.unpack_packets(r.output[q.id], r.scratch[slot(q.id % gpus, j)], tbs)
        for b in others:
            for q in peers:
                k = q.id % gpus
                r.unpack_packets(r.output[b * gpus + k], r.scratch[fwd + b * gpus + k], tbs)
    return p
