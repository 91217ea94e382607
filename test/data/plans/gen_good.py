#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the hand-designed valid test plans of good/ (run from anywhere; stdlib only). Each
# function documents the data flow of every rank; the CPU simulator proves them correct.
import os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "good")
# The text is the plan DSL's, as in plans/: one op per line, so that a change is a small diff.
sys.dont_write_bytecode = True  # leave no __pycache__ under plans/dsl
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "plans", "dsl"))
from planccl_dsl import render  # noqa: E402

def L(t, i, s=1): return {"type": t, "index": i, "size": s}
def R(b, i, s=1): return {"buffer_id": b, "index": i, "size": s}

def plan(name, coll, proto, inplace, gpus, lo=0, hi=1 << 20, double=False, **extra):
    p = {"name": name, "collective": coll, "protocol": proto, "inplace": inplace,
         "reuse_resources": False, "num_threads_per_block": 512,
         "use_double_scratch_buffer": double, "buffer_alignment": 16,
         "min_message_size": lo, "max_message_size": hi}
    p.update(extra)
    p["gpus"] = gpus
    return p

def gpu(r, ic, oc, sc, chans, rbufs, tbs, sems=()):
    return {"id": r, "input_chunks": ic, "output_chunks": oc, "scratch_chunks": sc,
            "channels": chans, "remote_buffers": rbufs,
            "semaphores": [{"init_value": v} for v in sems], "threadblocks": tbs}

def tb(i, ops, mem=(), port=(), rmem=(), rport=()):
    ch, rr = [], []
    if mem: ch.append({"channel_type": "memory", "channel_ids": list(mem)})
    if port: ch.append({"channel_type": "port", "channel_ids": list(port)})
    if rmem: rr.append({"access_channel_type": "memory", "remote_buffer_ids": list(rmem)})
    if rport: rr.append({"access_channel_type": "port", "remote_buffer_ids": list(rport)})
    return {"id": i, "ops": ops, "channels": ch, "remote_buffer_refs": rr}

def op(name, **kw):
    d = {"name": name}
    d.update(kw)
    return d

def ar2_ll():
    # 2-rank one-shot LL allreduce, in place. Rank r owns chunk r, peer q = 1 - r.
    # ppkt: my chunk q -> q's scratch[0]. respkt: my chunk r + q's packets in my scratch[0] ->
    # my chunk r, and as packets into q's scratch[1]. upkt: q's result from my scratch[1] -> q.
    gs = []
    for r in range(2):
        q = 1 - r
        ops = [op("ppkt", channel_type="memory", src_buff=[L("i", q)], dst_buff=[R(0, 0)]),
               op("respkt", channel_type="memory", reduce_op="sum",
                  src_buff=[L("i", r), L("s", 0)], dst_buff=[L("i", r), R(0, 1)]),
               op("upkt", src_buff=[L("s", 1)], dst_buff=[L("i", q)])]
        gs.append(gpu(r, 2, 2, 2, [{"channel_type": "memory", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["memory"]}],
                      [tb(0, ops, mem=[0], rmem=[0])]))
    return plan("test_ar2_ll", "allreduce", "LL", True, gs, double=True)

def peers4(r): return [(r + k + 1) % 4 for k in range(3)]
def slot(sender, receiver): return (sender - receiver - 1) % 4  # 0..2

def ar4_ll():
    # 4-rank all-pairs LL allreduce, in place. Scratch slots 0..2: peer contributions to my
    # chunk (slot of sender s at r = (s - r - 1) mod 4); slots 3..5: peers' reduced chunks.
    gs = []
    for r in range(4):
        P = peers4(r)
        ops = [op("ppkt", channel_type="memory", src_buff=[L("i", p) for p in P],
                  dst_buff=[R(k, slot(r, p)) for k, p in enumerate(P)]),
               op("respkt", channel_type="memory", reduce_op="sum",
                  src_buff=[L("i", r)] + [L("s", k) for k in range(3)],
                  dst_buff=[L("i", r)] + [R(k, 3 + slot(r, p)) for k, p in enumerate(P)])]
        ops += [op("upkt", src_buff=[L("s", 3 + k)], dst_buff=[L("i", P[k])]) for k in range(3)]
        gs.append(gpu(r, 4, 4, 6, [{"channel_type": "memory", "connected_to": P}],
                      [{"rank": p, "type": "s", "access_channel_types": ["memory"]} for p in P],
                      [tb(0, ops, mem=[0, 1, 2], rmem=[0, 1, 2])]))
    return plan("test_ar4_ll", "allreduce", "LL", True, gs, double=True)

def ag4_ll():
    # 4-rank LL allgather, out of place. Input 1 chunk, output 4. My input goes as packets to
    # slot (r - p - 1) mod 4 of every peer p; slot k of my scratch holds rank (r + k + 1) % 4.
    gs = []
    for r in range(4):
        P = peers4(r)
        ops = [op("ppkt", channel_type="memory", src_buff=[L("i", 0) for _ in P],
                  dst_buff=[R(k, slot(r, p)) for k, p in enumerate(P)]),
               op("copy", src_buff=[L("i", 0)], dst_buff=[L("o", r)])]
        ops += [op("upkt", src_buff=[L("s", k)], dst_buff=[L("o", P[k])]) for k in range(3)]
        gs.append(gpu(r, 1, 4, 3, [{"channel_type": "memory", "connected_to": P}],
                      [{"rank": p, "type": "s", "access_channel_types": ["memory"]} for p in P],
                      [tb(0, ops, mem=[0, 1, 2], rmem=[0, 1, 2])]))
    return plan("test_ag4_ll", "allgather", "LL", False, gs, hi=4 << 20, double=True)

def ar2_simple():
    # 2-rank Simple allreduce, out of place, memory channels with signal/wait.
    # Entry handshake (the peer has entered this call), put my chunk q into q's scratch[0],
    # signal/wait (q's chunk r has landed in my scratch[0]), reduce-send: o[r] = i[r] + s[0],
    # also written into q's output chunk r, then a closing handshake so q's result is in o[q].
    gs = []
    for r in range(2):
        q = 1 - r
        sw = lambda: [op("nop"), op("signal", channel_type="memory", channel_ids=[0]),
                      op("wait", channel_type="memory", channel_ids=[0]), op("nop")]
        ops = [op("signal", channel_type="memory", channel_ids=[0]),
               op("wait", channel_type="memory", channel_ids=[0]),
               op("put", channel_type="memory", src_buff=[L("i", q)], dst_buff=[R(0, 0)])] + sw() + [
               op("res", channel_type="memory", reduce_op="sum",
                  src_buff=[L("i", r), L("s", 0)], dst_buff=[L("o", r), R(1, r)])] + sw()
        gs.append(gpu(r, 2, 2, 1, [{"channel_type": "memory", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["memory"]},
                       {"rank": q, "type": "o", "access_channel_types": ["memory"]}],
                      [tb(0, ops, mem=[0], rmem=[0, 1])]))
    return plan("test_ar2_simple", "allreduce", "Simple", False, gs, hi=1 << 30)

def ar2_pipeline_sem():
    # 2-rank Simple allreduce, out of place, two blocks handing over pipeline units through a
    # device semaphore. Block 0: entry handshake on channel 0, then per unit: put my chunk q's
    # unit into q's scratch, signal/wait (q's unit of chunk r has landed here), release sem 0.
    # Block 1: per unit: acquire sem 0, o[r] unit = i[r] unit + s[0] unit. Then put o[r] into
    # q's output and a closing signal/wait on channel 1 (q's result is in my o[q]).
    gs = []
    U = 4096
    for r in range(2):
        q = 1 - r
        b0 = [op("signal", channel_type="memory", channel_ids=[0]),
              op("wait", channel_type="memory", channel_ids=[0]),
              op("pipeline", iter_context={"unit_size": U, "num_chunks": 1}, ops=[
                  op("put", channel_type="memory", src_buff=[L("i", q)], dst_buff=[R(0, 0)]),
                  op("nop"),
                  op("signal", channel_type="memory", channel_ids=[0]),
                  op("wait", channel_type="memory", channel_ids=[0]),
                  op("nop"),
                  op("sem_release", semaphore_ids=[0])])]
        b1 = [op("pipeline", iter_context={"unit_size": U, "num_chunks": 1}, ops=[
                  op("sem_acquire", semaphore_ids=[0]),
                  op("nop"),
                  op("re", reduce_op="sum", src_buff=[L("i", r), L("s", 0)],
                     dst_buff=[L("o", r)])]),
              op("nop"),
              op("put", channel_type="memory", src_buff=[L("o", r)], dst_buff=[R(0, r)]),
              op("nop"),
              op("signal", channel_type="memory", channel_ids=[0]),
              op("wait", channel_type="memory", channel_ids=[0]),
              op("nop")]
        gs.append(gpu(r, 2, 2, 1, [{"channel_type": "memory", "connected_to": [q, q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["memory"]},
                       {"rank": q, "type": "o", "access_channel_types": ["memory"]}],
                      [tb(0, b0, mem=[0], rmem=[0]), tb(1, b1, mem=[1], rmem=[1])], sems=[0]))
    return plan("test_ar2_pipeline_sem", "allreduce", "Simple", False, gs, hi=1 << 30)

def ag2_port():
    # 2-rank Simple allgather over a port channel, out of place. Entry handshake, copy my input
    # to o[r], put-with-signal my input into q's o[r], wait for q's put into my o[q], flush.
    gs = []
    for r in range(2):
        q = 1 - r
        ops = [op("signal", channel_type="port", channel_ids=[0]),
               op("wait", channel_type="port", channel_ids=[0]),
               op("copy", src_buff=[L("i", 0)], dst_buff=[L("o", r)]),
               op("pws", channel_type="port", channel_ids=[0], src_buff=[L("i", 0)],
                  dst_buff=[R(0, r)]),
               op("wait", channel_type="port", channel_ids=[0]),
               op("flush", channel_type="port", channel_ids=[0]),
               op("nop")]
        gs.append(gpu(r, 1, 2, 0, [{"channel_type": "port", "connected_to": [q]}],
                      [{"rank": q, "type": "o", "access_channel_types": ["port"]}],
                      [tb(0, ops, port=[0], rport=[0])]))
    return plan("test_ag2_port", "allgather", "Simple", False, gs, hi=1 << 30)

def ag2_port_ll():
    # 2-rank LL allgather through a port channel: cpkt my input into my scratch[0] as packets,
    # port put-packet those packets into q's scratch[1], copy input to o[r], unpack q's packets
    # from my scratch[1] into o[q]. Packet flags are the only synchronisation.
    gs = []
    for r in range(2):
        q = 1 - r
        # The nop makes every thread's packets visible before one thread hands the range to
        # the proxy (DMA reads memory, not flags).
        ops = [op("cpkt", src_buff=[L("i", 0)], dst_buff=[L("s", 0)]),
               op("nop"),
               op("ppkt", channel_type="port", channel_ids=[0], src_buff=[L("s", 0)],
                  dst_buff=[R(0, 1)]),
               op("copy", src_buff=[L("i", 0)], dst_buff=[L("o", r)]),
               op("upkt", src_buff=[L("s", 1)], dst_buff=[L("o", q)])]
        gs.append(gpu(r, 1, 2, 2, [{"channel_type": "port", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["port"]}],
                      [tb(0, ops, port=[0], rport=[0])]))
    return plan("test_ag2_port_ll", "allgather", "LL", False, gs, double=True)

def ar2_ll_recpkt():
    # 2-rank LL allreduce, in place, with reduce-copy-packet. Scratch slot 0: q's contribution
    # to my chunk; slot 1: my result as packets (recpkt's local copy); slot 2: q's result.
    # ppkt my chunk q -> q's slot 0; recpkt i[r] + slot 0 -> i[r] and packets in slot 1;
    # rppkt forwards slot 1's packets to q's slot 2; upkt slot 2 -> i[q].
    gs = []
    for r in range(2):
        q = 1 - r
        ops = [op("ppkt", channel_type="memory", src_buff=[L("i", q)], dst_buff=[R(0, 0)]),
               op("recpkt", reduce_op="sum", src_buff=[L("i", r), L("s", 0)],
                  dst_buff=[L("i", r), L("s", 1)]),
               op("rppkt", channel_type="memory", src_buff=[L("s", 1)], dst_buff=[R(0, 2)]),
               op("upkt", src_buff=[L("s", 2)], dst_buff=[L("i", q)])]
        gs.append(gpu(r, 2, 2, 3, [{"channel_type": "memory", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["memory"]}],
                      [tb(0, ops, mem=[0], rmem=[0])]))
    return plan("test_ar2_ll_recpkt", "allreduce", "LL", True, gs, double=True)

def ar4_ll_recspkt():
    # 4-rank LL allreduce, in place, with reduce-copy-send-packet. Slots 0..2 as in ar4_ll;
    # slots 3..5: peers' results (slot 3 + (s - r - 1) mod 4 for sender s); slot 6: my result
    # as packets. recspkt reduces chunk r, writes it in place, copies its packets to slot 6 and
    # sends them to the first two peers; rppkt forwards slot 6 to the third peer.
    gs = []
    for r in range(4):
        P = peers4(r)
        ops = [op("ppkt", channel_type="memory", src_buff=[L("i", p) for p in P],
                  dst_buff=[R(k, slot(r, p)) for k, p in enumerate(P)]),
               op("recspkt", channel_type="memory", reduce_op="sum",
                  src_buff=[L("i", r)] + [L("s", k) for k in range(3)],
                  dst_buff=[L("i", r), L("s", 6)] + [R(k, 3 + slot(r, P[k])) for k in range(2)]),
               op("rppkt", channel_type="memory", src_buff=[L("s", 6)],
                  dst_buff=[R(2, 3 + slot(r, P[2]))])]
        ops += [op("upkt", src_buff=[L("s", 3 + k)], dst_buff=[L("i", P[k])]) for k in range(3)]
        gs.append(gpu(r, 4, 4, 7, [{"channel_type": "memory", "connected_to": P}],
                      [{"rank": p, "type": "s", "access_channel_types": ["memory"]} for p in P],
                      [tb(0, ops, mem=[0, 1, 2], rmem=[0, 1, 2])]))
    return plan("test_ar4_ll_recspkt", "allreduce", "LL", True, gs, double=True)

def ar2_simple_barrier_tbg():
    # 2-rank Simple allreduce, out of place, two blocks as one thread-block group: each block
    # takes half of every range (tbg_info), a grid barrier joins them before the handshake.
    # Per block: put slice of my chunk q into q's scratch[0]; barrier; block 0 signals/waits
    # (block 1 waits at a second barrier); reduce-send slices into o[r] and q's o[r]; barrier;
    # block 0 closes with signal/wait; final barrier so both blocks end after the data arrived.
    gs = []
    for r in range(2):
        q = 1 - r
        tbs = []
        for b in range(2):
            g = {"tb_id": b, "tbg_size": 2}
            hs = ([op("nop"), op("signal", channel_type="memory", channel_ids=[0]),
                   op("wait", channel_type="memory", channel_ids=[0]), op("nop")] if b == 0 else [])
            bar = lambda i: op("barrier", barrier_id=i, num_threadblocks=2)
            ops = ([bar(0)] + hs + [bar(1),
                    op("put", channel_type="memory", src_buff=[L("i", q)], dst_buff=[R(0, 0)],
                       tbg_info=g),
                    bar(0)] + hs + [bar(1),
                    op("res", channel_type="memory", reduce_op="sum", tbg_info=g,
                       src_buff=[L("i", r), L("s", 0)], dst_buff=[L("o", r), R(1, r)]),
                    bar(0)] + hs + [bar(1)])
            tbs.append(tb(b, ops, mem=[0] if b == 0 else [], rmem=[0, 1]))
        gs.append(gpu(r, 2, 2, 1, [{"channel_type": "memory", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["memory"]},
                       {"rank": q, "type": "o", "access_channel_types": ["memory"]}], tbs))
    return plan("test_ar2_simple_barrier_tbg", "allreduce", "Simple", False, gs, hi=1 << 30)

def rs2_ll():
    # 2-rank LL reduce-scatter, out of place: input 2 chunks, output 1 (rank r keeps chunk r).
    # ppkt my input chunk q -> q's scratch[0]; repkt i[r] + q's packets in my scratch[0] -> o[0].
    gs = []
    for r in range(2):
        q = 1 - r
        ops = [op("ppkt", channel_type="memory", src_buff=[L("i", q)], dst_buff=[R(0, 0)]),
               op("repkt", reduce_op="sum", src_buff=[L("i", r), L("s", 0)],
                  dst_buff=[L("o", 0)])]
        gs.append(gpu(r, 2, 1, 1, [{"channel_type": "memory", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["memory"]}],
                      [tb(0, ops, mem=[0], rmem=[0])]))
    return plan("test_rs2_ll", "reducescatter", "LL", False, gs, double=True)

# ---- Port-channel op coverage (2 ranks, one host) -------------------------------------------

def ar2_port_rppkt():
    # 2-rank LL allreduce, out of place, every packet through a port channel. Scratch slots:
    # 0 my chunk q as packets (staging), 1 q's packets of my chunk, 2 my result as packets, 3
    # q's result. cpkt i[q] -> slot 0; port ppkt slot 0 -> q's slot 1; recpkt i[r] + slot 1 ->
    # o[r] and packets in slot 2; port rppkt (waits for slot 2's packets, then the proxy copies
    # them) -> q's slot 3; upkt slot 3 -> o[q]. Every DMA source is rewritten only two calls
    # later (double scratch), when the peer has consumed it.
    gs = []
    for r in range(2):
        q = 1 - r
        ops = [op("cpkt", src_buff=[L("i", q)], dst_buff=[L("s", 0)]),
               op("nop"),
               op("ppkt", channel_type="port", channel_ids=[0], src_buff=[L("s", 0)],
                  dst_buff=[R(0, 1)]),
               op("recpkt", src_buff=[L("i", r), L("s", 1)], dst_buff=[L("o", r), L("s", 2)]),
               op("rppkt", channel_type="port", channel_ids=[0], src_buff=[L("s", 2)],
                  dst_buff=[R(0, 3)]),
               op("upkt", src_buff=[L("s", 3)], dst_buff=[L("o", q)])]
        gs.append(gpu(r, 2, 2, 4, [{"channel_type": "port", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["port"]}],
                      [tb(0, ops, port=[0], rport=[0])]))
    return plan("test_ar2_port_rppkt", "allreduce", "LL", False, gs, hi=256 << 10, double=True)

def ag2_port_put_signal():
    # 2-rank Simple allgather, out of place, a port put followed by its own signal and flush.
    # Entry handshake (q is in this call, its o[r] is free); copy input -> o[r]; port put input
    # -> q's o[r]; signal (the FIFO orders it after the put); flush (my input may be reused);
    # wait for q's signal (q's input has landed in my o[q]).
    gs = []
    for r in range(2):
        q = 1 - r
        ops = [op("signal", channel_type="port", channel_ids=[0]),
               op("wait", channel_type="port", channel_ids=[0]),
               op("copy", src_buff=[L("i", 0)], dst_buff=[L("o", r)]),
               op("put", channel_type="port", channel_ids=[0], src_buff=[L("i", 0)],
                  dst_buff=[R(0, r)]),
               op("signal", channel_type="port", channel_ids=[0]),
               op("flush", channel_type="port", channel_ids=[0]),
               op("wait", channel_type="port", channel_ids=[0])]
        gs.append(gpu(r, 1, 2, 0, [{"channel_type": "port", "connected_to": [q]}],
                      [{"rank": q, "type": "o", "access_channel_types": ["port"]}],
                      [tb(0, ops, port=[0], rport=[0])]))
    return plan("test_ag2_port_put_signal", "allgather", "Simple", False, gs)

# ---- Multi-node (planccl's nranks_per_node: host h = ranks h*n .. h*n+n-1) ------------------
# Memory channels only inside a host, port channels between hosts.

def mn_ar_2x1():
    # 2 hosts x 1 rank, Simple allreduce, out of place, port channels only (put-with-signal-
    # and-flush). Rank r owns chunk r, q = 1 - r. Entry handshake (q's scratch and o[r] are free);
    # pwsf i[q] -> q's scratch[0] (flushed: my input is no longer read); wait (q's chunk r is in
    # my scratch[0]); o[r] = i[r] + scratch[0]; pwsf o[r] -> q's o[r]; wait (q's o[q] is here).
    gs = []
    for r in range(2):
        q = 1 - r
        ops = [op("signal", channel_type="port", channel_ids=[0]),
               op("wait", channel_type="port", channel_ids=[0]),
               op("pwsf", channel_type="port", channel_ids=[0], src_buff=[L("i", q)],
                  dst_buff=[R(0, 0)]),
               op("wait", channel_type="port", channel_ids=[0]),
               op("re", src_buff=[L("i", r), L("s", 0)], dst_buff=[L("o", r)]),
               op("nop"),
               op("pwsf", channel_type="port", channel_ids=[0], src_buff=[L("o", r)],
                  dst_buff=[R(1, r)]),
               op("wait", channel_type="port", channel_ids=[0])]
        gs.append(gpu(r, 2, 2, 1, [{"channel_type": "port", "connected_to": [q]}],
                      [{"rank": q, "type": "s", "access_channel_types": ["port"]},
                       {"rank": q, "type": "o", "access_channel_types": ["port"]}],
                      [tb(0, ops, port=[0], rport=[0, 1])]))
    return plan("test_mn_ar_2x1", "allreduce", "Simple", False, gs, nranks_per_node=1)

def mn_peers(r):
    # 2 hosts x 2 ranks: local index j, the local peer l (same host) and the remote peer x (same
    # local index on the other host).
    return r & 1, r ^ 1, r ^ 2

def mn_ar_2x2():
    # 2 hosts x 2 ranks, hierarchical LL allreduce, in place. Half j of the data belongs to the
    # ranks of local index j. Scratch slots: 0 l's half j, 1 my host's partial of half j as
    # packets, 2 the other host's partial, 3 l's final half. Inside the host (memory): ppkt
    # i[1-j] -> l's slot 0; recpkt i[j] + slot 0 -> i[j] (host partial) and packets in slot 1.
    # Between hosts (port): rppkt slot 1 -> x's slot 2. Inside the host: respkt i[j] + slot 2 ->
    # i[j] (final: own host's partial + the other's, the same bits on both hosts since a + b ==
    # b + a) and as packets into l's slot 3; upkt slot 3 -> i[1-j].
    gs = []
    for r in range(4):
        j, l, x = mn_peers(r)
        ops = [op("ppkt", channel_type="memory", src_buff=[L("i", 1 - j)], dst_buff=[R(0, 0)]),
               op("recpkt", src_buff=[L("i", j), L("s", 0)], dst_buff=[L("i", j), L("s", 1)]),
               op("rppkt", channel_type="port", channel_ids=[0], src_buff=[L("s", 1)],
                  dst_buff=[R(0, 2)]),
               op("respkt", channel_type="memory", src_buff=[L("i", j), L("s", 2)],
                  dst_buff=[L("i", j), R(0, 3)]),
               op("upkt", src_buff=[L("s", 3)], dst_buff=[L("i", 1 - j)])]
        gs.append(gpu(r, 2, 2, 4, [{"channel_type": "memory", "connected_to": [l]},
                                   {"channel_type": "port", "connected_to": [x]}],
                      [{"rank": l, "type": "s", "access_channel_types": ["memory"]},
                       {"rank": x, "type": "s", "access_channel_types": ["port"]}],
                      [tb(0, ops, mem=[0], port=[0], rmem=[0], rport=[1])]))
    return plan("test_mn_ar_2x2", "allreduce", "LL", True, gs, hi=256 << 10, double=True,
                nranks_per_node=2)

def mn_ag_2x2():
    # 2 hosts x 2 ranks, Simple allgather, out of place; o[k] = rank k's input. Entry handshake
    # with l (memory) and x (port). copy input -> o[r]; memory put input -> l's o[r]; port put
    # input -> x's o[r], signal, flush (my input may be reused); wait (x's input is in my o[x]);
    # memory put o[x] -> l's o[x] (forwarding the other host's chunk), nop, signal l; wait (l's
    # input is in my o[l], and l forwarded x's local peer's chunk into my o[r ^ 3]).
    gs = []
    for r in range(4):
        j, l, x = mn_peers(r)
        sig = lambda t: op("signal", channel_type=t, channel_ids=[0])
        wait = lambda t: op("wait", channel_type=t, channel_ids=[0])
        ops = [sig("memory"), sig("port"), wait("memory"), wait("port"),
               op("copy", src_buff=[L("i", 0)], dst_buff=[L("o", r)]),
               op("put", channel_type="memory", src_buff=[L("i", 0)], dst_buff=[R(0, r)]),
               op("put", channel_type="port", channel_ids=[0], src_buff=[L("i", 0)],
                  dst_buff=[R(0, r)]),
               sig("port"),
               op("flush", channel_type="port", channel_ids=[0]),
               wait("port"),
               op("put", channel_type="memory", src_buff=[L("o", x)], dst_buff=[R(0, x)]),
               op("nop"),
               sig("memory"),
               wait("memory")]
        gs.append(gpu(r, 1, 4, 0, [{"channel_type": "memory", "connected_to": [l]},
                                   {"channel_type": "port", "connected_to": [x]}],
                      [{"rank": l, "type": "o", "access_channel_types": ["memory"]},
                       {"rank": x, "type": "o", "access_channel_types": ["port"]}],
                      [tb(0, ops, mem=[0], port=[0], rmem=[0], rport=[1])]))
    return plan("test_mn_ag_2x2", "allgather", "Simple", False, gs, nranks_per_node=2)

def port_recspkt(base, name, k):
    # base() with its ops k (recpkt: result dst[0], packet copy dst[1]) and k + 1 (port rppkt of
    # that copy) fused into one port recspkt on every rank: the block reduces into dst[0..1],
    # then the proxy puts dst[1]'s packets to dst_buff[2 + j] through channel_ids[j] (the
    # kernel syncs the block before the FIFO push; dst[0..1] take no channel).
    p = base()
    p["name"] = name
    for g in p["gpus"]:
        ops = g["threadblocks"][0]["ops"]
        rec, fwd = ops[k], ops[k + 1]
        ops[k:k + 2] = [op("recspkt", channel_type="port", channel_ids=fwd["channel_ids"],
                           src_buff=rec["src_buff"], dst_buff=rec["dst_buff"] + fwd["dst_buff"])]
    return p

def ar2_port_recspkt():
    # ar2_port_rppkt with recpkt + rppkt as one port recspkt: o[r] and slot 2, then q's slot 3.
    return port_recspkt(ar2_port_rppkt, "test_ar2_port_recspkt", 3)

def mn_ar_2x2_recspkt():
    # mn_ar_2x2 likewise: i[j] (host partial) and slot 1, then x's slot 2; the block holds a
    # memory and a port channel, the recspkt's remote ref is a port slot.
    return port_recspkt(mn_ar_2x2, "test_mn_ar_2x2_recspkt", 1)

ALL = {"ar2_ll": ar2_ll, "ar4_ll": ar4_ll, "ag4_ll": ag4_ll, "ar2_simple": ar2_simple,
       "ar2_pipeline_sem": ar2_pipeline_sem, "ag2_port": ag2_port, "ag2_port_ll": ag2_port_ll,
       "ar2_ll_recpkt": ar2_ll_recpkt, "ar4_ll_recspkt": ar4_ll_recspkt,
       "ar2_simple_barrier_tbg": ar2_simple_barrier_tbg, "rs2_ll": rs2_ll,
       "ar2_port_rppkt": ar2_port_rppkt, "ag2_port_put_signal": ag2_port_put_signal,
       "mn_ar_2x1": mn_ar_2x1, "mn_ar_2x2": mn_ar_2x2, "mn_ag_2x2": mn_ag_2x2,
       "ar2_port_recspkt": ar2_port_recspkt, "mn_ar_2x2_recspkt": mn_ar_2x2_recspkt}

if __name__ == "__main__":
    texts = {name + ".json": render(fn()) for name, fn in ALL.items()}
    if "--check" in sys.argv[1:]:
        # CI: good/ holds exactly what this script writes (plus hand-written plans it does not
        # own, which it leaves alone).
        stale = [n for n, t in sorted(texts.items())
                 if not os.path.exists(os.path.join(OUT, n)) or open(os.path.join(OUT, n)).read() != t]
        for n in stale:
            print(f"test/data/plans/good/{n}: differs from gen_good.py (run it to regenerate)")
        sys.exit(1 if stale else 0)
    os.makedirs(OUT, exist_ok=True)
    for name, text in texts.items():
        with open(os.path.join(OUT, name), "w") as f:
            f.write(text)
