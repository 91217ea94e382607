# SPDX-License-Identifier: MIT
# Reduce-scatter across nodes, LL: rank r sends its chunk t as packets to rank t, directly over a
# memory channel inside the node and through a port channel (packets staged in scratch) to the
# other nodes; each rank reduces its own chunk with everyone's packets.
from planccl_dsl import Program

from .common import memory_channels, ring_order, slot

MAX_PACKET_SOURCES = 9  # an op reads at most 10 ranges: its own chunk and 9 packet slots


def build(nodes, gpus, inplace, blocks, threads, lo, hi, name, priority=0, fuse=True):
    n = nodes * gpus
    p = Program(name, "reducescatter", n, ranks_per_node=gpus, inplace=inplace, threads=threads,
                min_bytes=lo, max_bytes=hi, priority=priority, fuse=fuse)
    tbs = p.group(range(blocks))
    staged = n - 1  # scratch: [0, n-1) one slot per sender; then my packets for remote ranks
    for r in p.ranks:
        local = memory_channels(p, r.id)
        order = ring_order(r.id, p.ranks)
        far = [t for t in order if t.node != r.node]
        for t in order:
            if t.node == r.node:
                local[t.id].put_packets(t.scratch[slot(r.id, t.id)], r.input[t.id], tbs)
        for m, t in enumerate(far):
            r.copy_packets(r.scratch[staged + m], r.input[t.id], tbs)
        for m, t in enumerate(far):
            p.channel(r.id, t.id, "port").put_packets(t.scratch[slot(r.id, t.id)],
                                                      r.scratch[staged + m], tbs)
        out = r.input[r.id] if inplace else r.output[0]
        slots = [r.scratch[k] for k in range(n - 1)]
        first = r.input[r.id]
        for k in range(0, n - 1, MAX_PACKET_SOURCES):
            r.reduce_packets(out, first, slots[k:k + MAX_PACKET_SOURCES], tbs)
            first = out
    return p
