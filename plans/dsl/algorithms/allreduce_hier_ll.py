# SPDX-License-Identifier: MIT
# Allreduce across nodes, hierarchical, LL: memory channels inside a node, port channels between
# nodes, packet flags the only sync (the seed's 2-node allreduce, any number of nodes).
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot


def build(nodes, gpus, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True,
          fuse_port_reduce=False):
    """Local rank j owns chunk j: the node reduces it at rank j (reduce-scatter), rank j swaps
    node partials with rank j of every other node, adds them up in node order (the same bits on
    every node) and sends the result to its local peers (all-gather). fuse_port_reduce is off by
    default: these plans ran bit for bit on a GPU as a recpkt then a port put, before the port
    recspkt (the fused form) ever ran there."""
    p = Program(name, "allreduce", nodes * gpus, ranks_per_node=gpus, chunks=gpus,
                inplace=inplace, threads=threads, min_bytes=lo, max_bytes=hi, priority=priority,
                fuse=fuse, fuse_port_reduce=fuse_port_reduce)
    tbs = p.group(range(blocks))
    # Scratch: [0, G-1) local peers' parts of my chunk, then one partial per node (packets; my
    # own node's too), then the local peers' final chunks.
    parts, finals = gpus - 1, gpus - 1 + nodes
    for r in p.ranks:
        a, j = r.node, r.id % gpus
        out = r.input if inplace else r.output
        local = memory_channels(p, r.id)
        peers = [q for q in ring_order(r.id, p.ranks) if q.node == a]
        for q in peers:
            local[q.id].put_packets(q.scratch[slot(j, q.id % gpus)], r.input[q.id % gpus], tbs)
        r.reduce_packets(out[j], r.input[j], [r.scratch[k] for k in range(gpus - 1)], tbs)
        r.copy_packets(r.scratch[parts + a], out[j], tbs)
        for b in range(nodes):
            if b != a:
                twin = p.ranks[b * gpus + j]
                p.channel(r.id, twin.id, "port").read_put_packets(
                    twin.scratch[parts + a], r.scratch[parts + a], tbs)
        if a != 0:
            r.unpack_packets(out[j], r.scratch[parts], tbs)
        r.reduce_packets(out[j], out[j], [r.scratch[parts + b] for b in range(1, nodes)], tbs)
        for q in peers:
            local[q.id].put_packets(q.scratch[finals + slot(j, q.id % gpus)], out[j], tbs)
        for q in peers:
            k = q.id % gpus
            r.unpack_packets(out[k], r.scratch[finals + slot(k, j)], tbs)
    return p
