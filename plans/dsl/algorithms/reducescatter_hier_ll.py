# SPDX-License-Identifier: MIT
# Reduce-scatter across nodes, hierarchical, LL: each node first reduces, per destination, what
# its ranks hold for it, and sends that one partial per remote rank through a port channel.
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot


def build(nodes, gpus, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    """Rank (a, k) = local index k of node a. Chunk t = (b, k) of every rank of node a is summed
    at rank (a, k) over memory channels (an intra-node reduce-scatter of `nodes` chunks); the
    node partial goes as packets to rank (b, k), its twin on node b, through a port channel (the
    reduction, its packet copy and the proxy's put are one port recspkt); rank (b, k) adds its
    own node's partial and the other nodes' ones. Each rank sends nodes - 1 chunks across nodes
    instead of gpus x (nodes - 1) for the direct algorithm."""
    n = nodes * gpus
    p = Program(name, "reducescatter", n, ranks_per_node=gpus, inplace=inplace, threads=threads,
                min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    # Scratch: [0, L) local peers' packets, chunk of node b from local sender j at
    # b * (gpus - 1) + slot(j, k); then one staging slot per far node (my partial as packets,
    # what the proxy ships); then one slot per far node for its partial of my chunk; in place,
    # last, my node's partial of my own chunk as packets.
    local_slots = nodes * (gpus - 1)
    staging, received = local_slots, local_slots + nodes - 1
    parked = received + nodes - 1
    for r in p.ranks:
        a, k = r.node, r.id % gpus
        local = memory_channels(p, r.id)
        peers = [q for q in ring_order(r.id, p.ranks) if q.node == a]
        far = [b for b in range(nodes) if b != a]
        out = r.input[r.id] if inplace else r.output[0]

        def mine(b):
            """The local peers' packets of chunk (b, k) in my scratch."""
            return [r.scratch[b * (gpus - 1) + slot(q.id % gpus, k)] for q in peers]

        for q in peers:
            kq = q.id % gpus
            for b in range(nodes):
                local[q.id].put_packets(q.scratch[b * (gpus - 1) + slot(k, kq)],
                                        r.input[b * gpus + kq], tbs)
        if inplace:
            # out is my input chunk, read by my own node's partial: make that first and park it
            # as packets, since the far nodes' partials below use out as their plain result.
            r.reduce_packets(out, r.input[r.id], mine(a), tbs)
            r.copy_packets(r.scratch[parked], out, tbs)
        # The far nodes' partials: every plain result goes to out, which only the last
        # reduction below defines (same range, packet ops: one thread per element, no hazard).
        for m, b in enumerate(far):
            r.reduce_packets(out, r.input[b * gpus + k], mine(b), tbs)
            r.copy_packets(r.scratch[staging + m], out, tbs)
            twin = p.ranks[b * gpus + k]
            p.channel(r.id, twin.id, "port").put_packets(
                twin.scratch[received + slot(a, b)], r.scratch[staging + m], tbs)
        remote = [r.scratch[received + slot(b, a)] for b in far]
        if inplace:
            r.unpack_packets(out, r.scratch[parked], tbs)
            r.reduce_packets(out, out, remote, tbs)
        else:
            r.reduce_packets(out, r.input[r.id], mine(a) + remote, tbs)
    return p
