# SPDX-License-Identifier: MIT
# Pass: the executor JSON (MSCCL++'s plan format plus planccl's nranks_per_node, priority and
# reduce_op). Channels, remote buffers and block-local slots are numbered here, in a fixed order
# (peers ascending), so the same program always writes the same bytes.
import json

from .program import REDUCE_NAMES

KINDS = ("memory", "port")
BUF_ORDER = "ios"
CHANNEL_IDS = {"signal", "rlxsignal", "wait", "rlxwait", "flush"}
PORT_DATA = {"put", "pws", "pwsf", "ppkt", "rppkt", "recspkt"}  # channel_ids: the remote dsts


def _all_ops(ops):
    for op in ops:
        yield op
        for inner in op.body:
            yield inner


def _chunks(prog, r):
    k = getattr(prog, "chunk_scale", 1)
    rk = prog.ranks[r]
    sc = rk.scratch.chunks
    if sc is None:
        sc = 0
        for q in range(prog.nranks):
            for ops in prog.blocks[q].values():
                for op in _all_ops(ops):
                    for ref in op.srcs + op.dsts:
                        if ref.rank == r and ref.buf == "s":
                            sc = max(sc, ref.index + ref.size)
        return rk.input.chunks * k, rk.output.chunks * k, sc
    return rk.input.chunks * k, rk.output.chunks * k, sc * k


def _gpu(prog, r):
    chans = getattr(prog, "replicated_channels", prog.all_channels)
    mine = [c for c in chans if c.local == r]
    groups = []
    for kind in KINDS:
        peers = [c.remote for c in sorted((c for c in mine if c.kind == kind),
                                          key=lambda c: c.index)]
        if peers:
            groups.append({"channel_type": kind, "connected_to": peers})
    blocks = prog.blocks[r]
    rbufs = {}
    for ops in blocks.values():
        for op in _all_ops(ops):
            for ref in op.srcs + op.dsts:
                if ref.remote:
                    rbufs.setdefault((ref.rank, ref.buf), set()).add(op.ctype)
    rkeys = sorted(rbufs, key=lambda k: (k[0], BUF_ORDER.index(k[1])))
    rid = {k: i for i, k in enumerate(rkeys)}
    ic, oc, sc = _chunks(prog, r)
    tbs = []
    for tb in range(max(blocks) + 1 if blocks else 0):
        ops = blocks.get(tb, [])
        used = {kind: sorted({c.index for op in _all_ops(ops) for c in op.chans
                              if c.kind == kind}) for kind in KINDS}
        refs = {kind: sorted({rid[(x.rank, x.buf)] for op in _all_ops(ops) if op.ctype == kind
                              for x in op.srcs + op.dsts if x.remote}) for kind in KINDS}
        tbs.append({
            "id": tb,
            "channels": [{"channel_type": k, "channel_ids": used[k]} for k in KINDS if used[k]],
            "remote_buffer_refs": [{"access_channel_type": k, "remote_buffer_ids": refs[k]}
                                   for k in KINDS if refs[k]],
            "ops": [_op(prog, op, used, refs, rid) for op in ops],
        })
    return {
        "id": r,
        "input_chunks": ic,
        "output_chunks": oc,
        "scratch_chunks": sc,
        "channels": groups,
        "remote_buffers": [{"rank": k[0], "type": k[1],
                            "access_channel_types": [t for t in KINDS if t in rbufs[k]]}
                           for k in rkeys],
        "semaphores": [{"init_value": s.init} for s in prog._sems[r]],
        "threadblocks": tbs,
    }


def _ref(ref, op, refs, rid):
    if ref.remote:
        return {"buffer_id": refs[op.ctype].index(rid[(ref.rank, ref.buf)]),
                "index": ref.index, "size": ref.size}
    return {"type": ref.buf, "index": ref.index, "size": ref.size}


def _op(prog, op, used, refs, rid):
    o = {"name": op.name}
    if op.ctype:
        o["channel_type"] = op.ctype
    if op.name in CHANNEL_IDS or (op.ctype == "port" and op.name in PORT_DATA):
        o["channel_ids"] = [used[c.kind].index(c.index) for c in op.chans]
    if op.srcs:
        o["src_buff"] = [_ref(x, op, refs, rid) for x in op.srcs]
    if op.dsts:
        o["dst_buff"] = [_ref(x, op, refs, rid) for x in op.dsts]
    if prog.reduce_op and op.name in REDUCE_NAMES:
        o["reduce_op"] = prog.reduce_op
    if op.tbg is not None:
        o["tbg_info"] = {"tb_id": op.tbg[0], "tbg_size": op.tbg[1]}
    if op.barrier_id is not None:
        o["barrier_id"] = op.barrier_id
        o["num_threadblocks"] = op.nblocks
    if op.sems:
        o["semaphore_ids"] = [s.index for s in op.sems]
    if op.name == "pipeline":
        o["iter_context"] = {"unit_size": op.pipe[0], "num_chunks": op.pipe[1]}
        o["ops"] = [_op(prog, x, used, refs, rid) for x in op.body]
    return o


def plan(prog):
    return _smallest_runnable_min({
        "name": prog.name,
        "collective": prog.collective,
        "protocol": prog.protocol,
        "inplace": prog.inplace,
        "reuse_resources": prog.reuse_resources,
        "num_threads_per_block": prog.threads,
        "use_double_scratch_buffer": prog.double_scratch,
        "buffer_alignment": prog.alignment,
        "min_message_size": prog.min_bytes,
        "max_message_size": prog.max_bytes,
        "nranks_per_node": prog.nranks_per_node,
        "priority": prog.priority,
        "gpus": [_gpu(prog, r) for r in range(prog.nranks)],
    })


def _runnable(plan, msg):
    """The executor's layout rule: every gpu's input and output bytes split into equal chunks
    that are multiples of buffer_alignment."""
    n, al = len(plan["gpus"]), plan.get("buffer_alignment", 16)
    coll = plan["collective"]
    in_b = msg // n if coll == "allgather" else msg
    out_b = msg // n if coll == "reducescatter" else msg
    if (coll in ("allgather", "reducescatter")) and msg % n:
        return False
    for g in plan["gpus"]:
        for b, c in ((in_b, g["input_chunks"]), (out_b, g["output_chunks"])):
            if c and b % (al * c):
                return False
    return True


def _smallest_runnable_min(plan):
    """A min_message_size below the plan's smallest runnable size (the Simple plans split every
    buffer in n chunks of 16-byte units) raised to it, so that the range starts with a size the
    plan runs. Ranges that start higher (one block shape taking over from another) stay."""
    lo, hi = plan["min_message_size"], plan["max_message_size"]
    g = 1
    while g <= hi and not _runnable(plan, g):
        g += 1
    if lo < g <= hi:
        plan["min_message_size"] = g
    return plan


def _depth(v):
    """How deep containers nest in v: 0 for a scalar, 1 for a list or object of scalars."""
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, list):
        return 1 + max(map(_depth, v), default=0)
    return 0


def _one_line(v):
    """Small values (buffer refs, channel and remote-buffer entries, id lists) and objects whose
    deepest part is a list of small objects (an op with its src/dst buffers) take one line each,
    so that a change to one op is a one-line diff; the rest (the plan, gpus, blocks, op lists, a
    pipeline op with its inner ops) is spread out one member per line."""
    d = _depth(v)
    return d <= 2 or (d == 3 and isinstance(v, dict))


def _render(v, indent, out):
    if not isinstance(v, (dict, list)) or not v or _one_line(v):
        out.append(json.dumps(v))
        return
    pad = " " * (indent + 1)
    items = list(v.items()) if isinstance(v, dict) else [(None, x) for x in v]
    out.append("{\n" if isinstance(v, dict) else "[\n")
    for i, (k, x) in enumerate(items):
        out.append(pad if k is None else pad + json.dumps(k) + ": ")
        _render(x, indent + 1, out)
        out.append(",\n" if i + 1 < len(items) else "\n")
    out.append(" " * indent + ("}" if isinstance(v, dict) else "]"))


def render(p):
    """The checked-in text of a plan: valid JSON, one line per op (see _one_line), one space
    of indent per level and json.dumps's ", " and ": " separators inside a line."""
    out = []
    _render(p, 0, out)
    return "".join(out) + "\n"


def op_count(p):
    """Ops of a plan over all ranks and blocks, pipeline inner ops included."""
    n = 0
    for g in p["gpus"]:
        for tb in g["threadblocks"]:
            for op in tb["ops"]:
                n += 1 + len(op.get("ops", []))
    return n
