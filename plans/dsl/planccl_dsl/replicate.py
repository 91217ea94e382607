# SPDX-License-Identifier: MIT
# Pass: instance replication. `instances` = k copies of the whole program side by side: every
# chunk is split k ways (chunk x of size s becomes index x*k + i*s in copy i), and every channel,
# semaphore, barrier and block gets k copies, so k independent streams share one launch.


class ChannelCopy:
    def __init__(self, c, i, k):
        self.local, self.remote, self.kind = c.local, c.remote, c.kind
        self.index = c.index * k + i


def run(prog):
    k = prog.instances
    if k == 1:
        return
    chans = {}
    for c in prog.all_channels:
        for i in range(k):
            chans[(id(c), i)] = ChannelCopy(c, i, k)
    prog.replicated_channels = sorted(chans.values(), key=lambda c: (c.local, c.kind, c.index))

    def ref(r, i):
        return r.copy(index=r.index * k + i * r.size)

    def op_copy(op, i):
        o = op.clone()
        o.tb = op.tb * k + i
        o.srcs = [ref(r, i) for r in op.srcs]
        o.dsts = [ref(r, i) for r in op.dsts]
        o.chans = [chans[(id(c), i)] for c in op.chans]
        o.sems = [_SemCopy(s, i, k) for s in op.sems]
        if op.barrier_id is not None:
            o.barrier_id = op.barrier_id * k + i
        o.body = [op_copy(b, i) for b in op.body]
        return o

    for r in range(prog.nranks):
        blocks = {}
        for tb, ops in prog.blocks[r].items():
            for i in range(k):
                blocks[tb * k + i] = [op_copy(op, i) for op in ops]
        prog.blocks[r] = blocks
        sems = []
        for s in prog._sems[r]:
            for i in range(k):
                sems.append(_SemCopy(s, i, k))
        prog._sems[r] = sorted(sems, key=lambda s: s.index)
    prog.chunk_scale = k


class _SemCopy:
    def __init__(self, s, i, k):
        self.index, self.init = s.index * k + i, s.init
