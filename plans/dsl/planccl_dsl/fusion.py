# SPDX-License-Identifier: MIT
# Pass: op fusion, greedy over neighbours in each block. Every rule makes one executor op out of
# two that the executor would otherwise run back to back (fewer ops, one pass over the data).
#
# Rules:
#   repkt + cpkt -> recpkt; recpkt + ppkt / rppkt -> recspkt (the seed's three rules; over a
#   port channel too when the put sends the packet copy, planccl's port recspkt)
#   repkt + ppkt -> respkt; re + put -> res; rre + put -> rres (memory channels)
#   port put + signal -> pws; pws + flush -> pwsf
#   same op twice (ppkt, put, get, rppkt, signal, wait, flush, sem ops, nop; a re / repkt /
#   rre that goes on from the previous one's result) -> one op with more operands.
# MSCCL++'s executor limits, below planccl's own (14 remote, 16 per side, 16 channels): plans the
# DSL writes stay loadable by both.
MAX_REMOTE, MAX_SIDE, MAX_CHANS = 8, 10, 8


def _same_place(a, b):
    return a.tb == b.tb and a.tbg == b.tbg


def _key(ref):
    return (ref.rank, ref.buf, ref.index, ref.size)


def _remote(refs):
    return sum(1 for r in refs if r.remote)


def _fits(srcs, dsts, chans=()):
    return (len(srcs) <= MAX_SIDE and len(dsts) <= MAX_SIDE and _remote(srcs) <= MAX_REMOTE and
            _remote(dsts) <= MAX_REMOTE and len(chans) <= MAX_CHANS)


def _new(a, name, srcs, dsts, chans=None, b=None):
    o = a.clone()
    o.name, o.srcs, o.dsts = name, list(srcs), list(dsts)
    if chans is not None:
        o.chans = list(chans)
    if b is not None:
        o.where = a.where + b.where
        if b.ctype and not o.ctype:
            o.ctype = b.ctype
    return o


def _disjoint(a, b):
    return not {id(c) for c in a.chans} & {id(c) for c in b.chans}


def fuse_pair(a, b, port_reduce=True):
    """The fused op of a then b, or None. port_reduce: may fuse into a port recspkt."""
    if not _same_place(a, b) or a.name == "pipeline" or b.name == "pipeline":
        return None
    na, nb = a.name, b.name
    if na == nb == "nop":
        return a
    if na == nb and na in ("signal", "rlxsignal", "wait", "rlxwait", "flush") and \
            a.ctype == b.ctype and _disjoint(a, b) and len(a.chans) + len(b.chans) <= MAX_CHANS:
        return _new(a, na, [], [], a.chans + b.chans, b)
    if na == nb and na in ("sem_acquire", "sem_release"):
        o = _new(a, na, [], [], None, b)
        o.sems = a.sems + b.sems
        return o if len({s.index for s in o.sems}) == len(o.sems) else None
    if b.srcs and b.dsts and a.srcs and a.srcs[0].size != b.srcs[0].size:
        return None
    memory = a.ctype == b.ctype == "memory"
    port = a.ctype == b.ctype == "port"
    # Same data op again: more (src, dst) pairs in one op.
    if na == nb and na in ("ppkt", "put", "get") and (memory or (port and na != "get")):
        if port and not _disjoint(a, b):
            return None
        srcs, dsts = a.srcs + b.srcs, a.dsts + b.dsts
        if not _fits(srcs, dsts, a.chans + b.chans):
            return None
        return _new(a, na, srcs, dsts, a.chans + b.chans, b)
    if na == nb == "rppkt" and _key(a.srcs[0]) == _key(b.srcs[0]) and (memory or port):
        if port and not _disjoint(a, b):
            return None
        dsts = a.dsts + b.dsts
        if not _fits(a.srcs, dsts, a.chans + b.chans):
            return None
        return _new(a, na, a.srcs, dsts, a.chans + b.chans, b)
    # A reduce that goes on from the last one's result (b: D = D op ...): one reduce, the same
    # operands in the same order, unless b reads D again later (it would see the new D).
    if na == nb and na in ("re", "repkt", "rre") and len(a.dsts) == len(b.dsts) == 1 and \
            _key(a.dsts[0]) == _key(b.dsts[0]) == _key(b.srcs[0]) and \
            all(_key(s) != _key(a.dsts[0]) for s in b.srcs[1:]):
        srcs = a.srcs + b.srcs[1:]
        if not _fits(srcs, a.dsts):
            return None
        return _new(a, na, srcs, a.dsts, a.chans + b.chans, b)
    # The seed's rules.
    if na == "repkt" and nb == "cpkt" and len(a.dsts) == 1 and \
            _key(b.srcs[0]) == _key(a.dsts[0]):
        return _new(a, "recpkt", a.srcs, a.dsts + b.dsts, a.chans, b)
    if na in ("recpkt", "recspkt") and b.ctype == "memory" and a.ctype in (None, "memory") and \
            ((nb == "ppkt" and all(_key(s) == _key(a.dsts[0]) for s in b.srcs)) or
             (nb == "rppkt" and _key(b.srcs[0]) == _key(a.dsts[1]))):
        dsts = a.dsts + b.dsts
        if not _fits(a.srcs, dsts):
            return None
        o = _new(a, "recspkt", a.srcs, dsts, a.chans + b.chans, b)
        o.ctype = "memory"
        return o
    # Port: the proxy can only ship the packet copy dst[1] (the kernel's port recspkt puts it to
    # dst[2 + j] through channel j after a __syncthreads), so b must send exactly that range.
    if port_reduce and na in ("recpkt", "recspkt") and b.ctype == "port" and \
            a.ctype in (None, "port") and nb in ("ppkt", "rppkt") and _disjoint(a, b) and \
            all(_key(s) == _key(a.dsts[1]) for s in b.srcs):
        dsts, chans = a.dsts + b.dsts, a.chans + b.chans
        if not _fits(a.srcs, dsts, chans):
            return None
        o = _new(a, "recspkt", a.srcs, dsts, chans, b)
        o.ctype = "port"
        return o
    # Reduce then send the result.
    if na in ("repkt", "respkt") and nb == "ppkt" and b.ctype == "memory" and \
            (na == "respkt" or len(a.dsts) == 1) and \
            all(_key(s) == _key(a.dsts[0]) for s in b.srcs):
        dsts = a.dsts + b.dsts
        if not _fits(a.srcs, dsts):
            return None
        o = _new(a, "respkt", a.srcs, dsts, a.chans + b.chans, b)
        o.ctype = "memory"
        return o
    if na in ("re", "res", "rre", "rres") and nb == "put" and b.ctype == "memory" and \
            (na in ("res", "rres") or len(a.dsts) == 1) and \
            all(_key(s) == _key(a.dsts[0]) for s in b.srcs):
        dsts = a.dsts + b.dsts
        if not _fits(a.srcs, dsts):
            return None
        o = _new(a, {"re": "res", "res": "res", "rre": "rres", "rres": "rres"}[na], a.srcs, dsts,
                 a.chans + b.chans, b)
        o.ctype = "memory"
        return o
    # Port: a put and the signal that follows it on the same channels, then its flush.
    if na == "put" and port and nb == "signal" and \
            [id(c) for c in a.chans] == [id(c) for c in b.chans]:
        return _new(a, "pws", a.srcs, a.dsts, a.chans, b)
    if na == "pws" and port and nb == "flush" and \
            [id(c) for c in a.chans] == [id(c) for c in b.chans]:
        return _new(a, "pwsf", a.srcs, a.dsts, a.chans, b)
    return None


def fuse_ops(ops, port_reduce=True):
    out = []
    for op in ops:
        if op.name == "pipeline":
            op = op.clone()
            op.body = fuse_ops(op.body, port_reduce)
        if out:
            f = fuse_pair(out[-1], op, port_reduce)
            if f is not None:
                out[-1] = f
                continue
        out.append(op)
    return out


def run(prog):
    for r in range(prog.nranks):
        for tb in prog.blocks[r]:
            prog.blocks[r][tb] = fuse_ops(prog.blocks[r][tb], prog.fuse_port_reduce)
