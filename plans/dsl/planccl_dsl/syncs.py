# SPDX-License-Identifier: MIT
# Pass: the block-local syncs (nop = __syncthreads) a block needs between its own ops, and only
# those.
#
# Two ops of a block conflict when they touch overlapping memory and one writes; the
# conflict needs a nop unless a __syncthreads already lies between them (every sync op, port op
# and semaphore op issues one) or both are packet ops on the very same range: the LL kernels give
# packet element i to thread i mod blockDim in every packet op, so no element crosses threads.
from .layout import overlaps, span
from .program import Op

EW = {"cpkt", "upkt", "repkt", "respkt", "recpkt", "recspkt"}
FULL = {"nop", "barrier", "signal", "rlxsignal", "wait", "rlxwait", "flush", "sem_acquire",
        "sem_release"}
PORT_OPS = {"put", "pws", "pwsf", "ppkt", "rppkt"}


def _ew(op):
    # A port rppkt's threads first wait for its packets the way every packet op reads them.
    return op.name in EW or op.name == "rppkt" or (op.name == "ppkt" and op.ctype == "memory")


def _full(op):
    # A port recspkt syncs the block after its reduction, before the proxy push.
    return op.name in FULL or (op.ctype == "port" and op.name in PORT_OPS | {"recspkt"})


def accesses(prog, op):
    if op.name == "pipeline":
        return [a for inner in op.body for a in accesses(prog, inner)]
    if op.ctype == "port" and op.name in ("put", "pws", "pwsf", "ppkt"):
        return []  # the proxy reads the source later, after the op's own __syncthreads
    ew = _ew(op)
    out = [(span(prog, op, s), "r", ew) for s in op.srcs]
    if not (op.ctype == "port" and op.name == "rppkt"):
        # Port recspkt: the block writes dst[0..1]; the proxy writes the remote rest.
        dsts = op.dsts[:2] if op.ctype == "port" and op.name == "recspkt" else op.dsts
        out += [(span(prog, op, d), "w", ew) for d in dsts]
    return out


def _conflict(pending, new):
    for sa, ma, ewa in pending:
        for sb, mb, ewb in new:
            if "w" not in (ma, mb) or not overlaps(sa, sb):
                continue
            if ewa and ewb and sa == sb:
                continue
            return True
    return False


def insert_ops(prog, ops):
    out, pending = [], []
    for op in ops:
        acc = accesses(prog, op)
        if _conflict(pending, acc):
            out.append(Op("nop", op.rank, op.tb, op.where[0]))
            pending = []
        if op.name == "pipeline":
            op = op.clone()
            op.body = insert_ops(prog, op.body)
        out.append(op)
        pending = [] if _full(op) else pending + acc
    return out


def run(prog):
    for r in range(prog.nranks):
        for tb in prog.blocks[r]:
            prog.blocks[r][tb] = insert_ops(prog, prog.blocks[r][tb])
