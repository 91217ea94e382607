# SPDX-License-Identifier: MIT
"""Shared pieces of planccl's plan generators (gen_2gpu.py, gen_ngpu.py): JSON building blocks
for MSCCL++ executor plans (reference mscclpp.md section 2, planccl extensions nranks_per_node and
priority), the single-node LL plans that work for any number of ranks, and the write/--check
driver. Standard library only.

Layout conventions of every plan built here:
- one memory channel per peer, in rank order (`peers`); remote buffer k of a rank is the scratch
  of its k-th peer, reached through memory channel k;
- a rank's scratch holds one slot per peer, compacted (its own rank has no slot): sender s lands
  in slot `slot(s, receiver)` = s, or s - 1 above the receiver. With 2 ranks that is slot 0.
  Exception: the same-order allreduce (3+ ranks) has one slot per rank, slot j for rank j
  (`by_sender`), its own included (see allreduce_ll1);
- every op is sliced over all blocks with tbg_info, so block b of the sender packs exactly the
  byte range that block b of the receiver waits for.
"""
import json
import os

KIB = 1024
MIB = 1024 * KIB


def loc(t, index, size=1):
    return {"type": t, "index": index, "size": size}


def rem(slot_id, index, size=1):
    return {"buffer_id": slot_id, "index": index, "size": size}


def tbg(b, n):
    return {"tb_id": b, "tbg_size": n}


def peers(rank, nranks):
    """Every other rank, ascending: peer k is reached through channel k and remote buffer k."""
    return [p for p in range(nranks) if p != rank]


def slot(sender, receiver):
    """Scratch slot of `receiver` that `sender`'s packets land in (compact: no slot for itself)."""
    return sender if sender < receiver else sender - 1


def by_sender(sender, receiver):
    """Scratch slot of `receiver` for `sender` when every rank has a slot: slot = sender."""
    del receiver
    return sender


def sender_of(slot_id, receiver):
    """Inverse of slot(): which rank writes slot `slot_id` of `receiver`'s scratch."""
    return slot_id if slot_id < receiver else slot_id + 1


def gpu(rank, nranks, ic, oc, sc, blocks):
    """One rank: memory channels to every peer, each peer's scratch as a remote buffer, and one
    threadblock per entry of `blocks` (its op list) that can reach all of them."""
    ps = peers(rank, nranks)
    ids = list(range(len(ps)))
    return {
        "id": rank,
        "input_chunks": ic,
        "output_chunks": oc,
        "scratch_chunks": sc,
        "channels": [{"channel_type": "memory", "connected_to": ps}],
        "remote_buffers": [{"rank": p, "type": "s", "access_channel_types": ["memory"]}
                           for p in ps],
        "semaphores": [],
        "threadblocks": [
            {
                "id": b,
                "channels": [{"channel_type": "memory", "channel_ids": ids}],
                "remote_buffer_refs": [{"access_channel_type": "memory",
                                        "remote_buffer_ids": ids}],
                "ops": ops,
            }
            for b, ops in enumerate(blocks)
        ],
    }


def plan(name, coll, inplace, threads, lo, hi, prio, nranks, gpus):
    return {
        "name": name,
        "collective": coll,
        "protocol": "LL",
        "inplace": inplace,
        "reuse_resources": False,
        "num_threads_per_block": threads,
        "use_double_scratch_buffer": True,
        "buffer_alignment": 16,
        "min_message_size": lo,
        "max_message_size": hi,
        "nranks_per_node": nranks,
        "priority": prio,
        "gpus": gpus,
    }


def kind(inplace):
    return "inplace" if inplace else "outofplace"


def put_packets(rank, nranks, src_of, slot_of, t):
    """One ppkt sending src_of(p) to slot slot_of(rank, p) of every peer p's scratch. A memory
    ppkt pairs src_buff[k] with dst_buff[k] (the validator wants as many sources as
    destinations). Peers are visited starting after `rank` (rank+1, rank+2, ... mod nranks) so
    that at any moment the ranks write to different peers rather than all to the lowest one."""
    ps = peers(rank, nranks)
    order = sorted(ps, key=lambda p: (p - rank) % nranks)
    return {"name": "ppkt", "channel_type": "memory", "src_buff": [src_of(p) for p in order],
            "dst_buff": [rem(ps.index(p), slot_of(rank, p)) for p in order], "tbg_info": t}


def allreduce_ll1(nranks, inplace, nblocks, threads, lo, hi, prio, name, same_order=None):
    """One phase: each rank packs its whole input into every peer's scratch, then reduces all
    ranks' data into its output with one repkt. Packet flags are the only synchronisation.

    A repkt reduces src_buff left to right (the kernel rounds to the dtype at every step) and its
    first source must be plain data, so "own input first, then the peers' packets" would reduce in
    a different order on every rank: with 3+ ranks, float sums would differ between ranks in the
    last bits, which NCCL's algorithms never do (every element is reduced once, or in one fixed
    order). With same_order (the default from 3 ranks on) every rank reduces x0 + x1 + ... in
    rank order instead: scratch slot j holds rank j's packets (scratch_chunks = nranks), a rank
    other than 0 also packs its own input into its own slot (cpkt) and unpacks rank 0's packets
    into its output (upkt), which then is the repkt's plain first source. In place that
    overwrites the input, but only the slice that this block has already packed. Without
    same_order (2 ranks, where a + b == b + a), scratch holds the peers' slots compacted (slot())
    and the repkt reads own input + the peers' slots."""
    if same_order is None:
        same_order = nranks > 2
    out = "i" if inplace else "o"
    gpus = []
    for r in range(nranks):
        blocks = []
        for b in range(nblocks):
            t = tbg(b, nblocks)
            if not same_order:
                blocks.append([
                    put_packets(r, nranks, lambda p: loc("i", 0), slot, t),
                    {"name": "repkt", "src_buff": [loc("i", 0)] + [loc("s", j)
                                                                   for j in range(nranks - 1)],
                     "dst_buff": [loc(out, 0)], "tbg_info": t},
                ])
                continue
            ops = [put_packets(r, nranks, lambda p: loc("i", 0), by_sender, t)]
            first = loc("i", 0)
            if r != 0:
                ops.append({"name": "cpkt", "src_buff": [loc("i", 0)], "dst_buff": [loc("s", r)],
                            "tbg_info": t})
                ops.append({"name": "upkt", "src_buff": [loc("s", 0)], "dst_buff": [loc(out, 0)],
                            "tbg_info": t})
                first = loc(out, 0)
            ops.append({"name": "repkt", "src_buff": [first] + [loc("s", j)
                                                                for j in range(1, nranks)],
                        "dst_buff": [loc(out, 0)], "tbg_info": t})
            blocks.append(ops)
        sc = nranks if same_order else nranks - 1
        gpus.append(gpu(r, nranks, 1, 1, sc, blocks))
    return plan(name, "allreduce", inplace, threads, lo, hi, prio, nranks, gpus)


def allgather_ll(nranks, inplace, nblocks, threads, lo, hi, prio, name):
    """Each rank packs its input into every peer's scratch (its slot there) and unpacks the
    nranks-1 peers' packets into their output slots; out-of-place also copies its own input into
    its own output slot (in place, the input already is that slot)."""
    gpus = []
    for r in range(nranks):
        blocks = []
        for b in range(nblocks):
            t = tbg(b, nblocks)
            ops = [put_packets(r, nranks, lambda p: loc("i", 0), slot, t)]
            if not inplace:
                ops.append({"name": "copy", "src_buff": [loc("i", 0)], "dst_buff": [loc("o", r)],
                            "tbg_info": t})
            for j in range(nranks - 1):
                ops.append({"name": "upkt", "src_buff": [loc("s", j)],
                            "dst_buff": [loc("o", sender_of(j, r))], "tbg_info": t})
            blocks.append(ops)
        gpus.append(gpu(r, nranks, 1, nranks, nranks - 1, blocks))
    return plan(name, "allgather", inplace, threads, lo, hi, prio, nranks, gpus)


def reducescatter_ll(nranks, inplace, nblocks, threads, lo, hi, prio, name):
    """Rank r packs its input chunk p into peer p's scratch (r's slot there) for every peer p,
    then reduces its own chunk r with the nranks-1 packets into its output. In place the output
    is input chunk r, so the result is written there (the peers' chunks it reads are others)."""
    gpus = []
    for r in range(nranks):
        dst = loc("i", r) if inplace else loc("o", 0)
        blocks = []
        for b in range(nblocks):
            t = tbg(b, nblocks)
            blocks.append([
                put_packets(r, nranks, lambda p: loc("i", p), slot, t),
                {"name": "repkt", "src_buff": [loc("i", r)] + [loc("s", j)
                                                               for j in range(nranks - 1)],
                 "dst_buff": [dst], "tbg_info": t},
            ])
        gpus.append(gpu(r, nranks, nranks, 1, nranks - 1, blocks))
    return plan(name, "reducescatter", inplace, threads, lo, hi, prio, nranks, gpus)


def reduction_exprs(p):
    """Symbolic run of an allreduce plan's block 0 on every rank (all blocks run the same ops on
    their own slices): returns, per rank, the expression its output ends with, e.g.
    ((x0 + x1) + x2) as nested tuples. Covers the ops this module emits."""
    alias = {"o": "i"} if p["inplace"] else {}
    val = {}
    for g in p["gpus"]:
        val[(g["id"], "i", 0)] = "x%d" % g["id"]

    def key(rank, ref, g):
        if "buffer_id" in ref:
            rb = g["remote_buffers"][ref["buffer_id"]]
            return (rb["rank"], rb["type"], ref["index"])
        return (rank, alias.get(ref["type"], ref["type"]), ref["index"])

    pending = {g["id"]: list(g["threadblocks"][0]["ops"]) for g in p["gpus"]}
    gpus = {g["id"]: g for g in p["gpus"]}
    while any(pending.values()):
        progressed = False
        for r, ops in pending.items():
            while ops:
                op, g = ops[0], gpus[r]
                srcs = [key(r, x, g) for x in op.get("src_buff", [])]
                if any(k not in val for k in srcs):
                    break
                dsts = [key(r, x, g) for x in op.get("dst_buff", [])]
                if op["name"] in ("repkt",):
                    acc = val[srcs[0]]
                    for k in srcs[1:]:
                        acc = (acc, val[k])
                    val[dsts[0]] = acc
                elif op["name"] in ("ppkt", "cpkt", "upkt", "copy"):
                    for i, d in enumerate(dsts):
                        val[d] = val[srcs[min(i, len(srcs) - 1)]]
                elif op["name"] != "nop":
                    raise ValueError("reduction_exprs: op %s not modelled" % op["name"])
                ops.pop(0)
                progressed = True
        if not progressed:
            raise ValueError("reduction_exprs: plan %s deadlocks" % p["name"])
    return [val[(g["id"], alias.get("o", "o"), 0)] for g in p["gpus"]]


def render(p):
    return json.dumps(p, indent=1) + "\n"


def main(argv, outputs, script):
    """Writes every (relative path, plan) of `outputs` under plans/, or with --check reports the
    files that differ from what would be written (exit status 1)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    check = "--check" in argv
    stale = []
    for rel, p in outputs:
        path = os.path.join(root, rel)
        text = render(p)
        if check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        stale.append(rel)
            except OSError:
                stale.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print("wrote", rel)
    if stale:
        print("stale (run plans/dsl/%s):" % script, " ".join(stale))
        return 1
    return 0
