# SPDX-License-Identifier: MIT
# Each compiler pass on small programs: refusals (with the DSL line they name), pairing, data
# flow, fusion, sync insertion, replication, pipelines and the emitted JSON.
import inspect
import unittest

import helpers  # noqa: F401  (import path)
from planccl_dsl import LL, MEMORY, PORT, SIMPLE, DslError, Program, line_of, op_count


def here():
    """The line after the call: tests put the offending DSL call right below it."""
    return inspect.currentframe().f_back.f_lineno + 1


def ops_of(plan, rank=0, tb=0):
    return [o["name"] for o in plan["gpus"][rank]["threadblocks"][tb]["ops"]]


def two(protocol=LL, **kw):
    p = Program("t", "allreduce", 2, protocol=protocol, **kw)
    a, b = p.ranks
    return p, a, b, p.channel(0, 1, MEMORY), p.channel(1, 0, MEMORY)


class Refusals(unittest.TestCase):
    def expect(self, line, fn):
        with self.assertRaises(DslError) as cm:
            fn()
        self.assertEqual(line_of(cm.exception.where), line, str(cm.exception))
        self.assertIn("test_passes.py", cm.exception.where)
        return str(cm.exception)

    def test_unpaired_wait(self):
        p, a, b, ab, ba = two(SIMPLE)
        ab.signal(0)
        ba.wait(0)
        line = here()
        ba.wait(0)
        text = self.expect(line, p.compile)
        # both sides are named: the signal's line and both waits
        self.assertIn("rank 0 signals 1 time", text)
        self.assertIn("rank 1 waits 2 times", text)
        self.assertIn("test_passes.py:%d" % (line - 3), text)

    def test_extra_signal(self):
        p, a, b, ab, ba = two(SIMPLE)
        ab.signal(0)
        line = here()
        ab.signal(0)
        ba.wait(0)
        self.expect(line, p.compile)

    def test_channel_without_partner(self):
        p = Program("t", "allreduce", 2)
        line = here()
        p.channel(0, 1, MEMORY)
        self.assertIn("no partner", self.expect(line, p.compile))

    def test_chunk_out_of_range(self):
        p, a, b, ab, ba = two()
        line = here()
        self.expect(line, lambda: a.copy(a.output[0], a.input[3], 0))

    def test_memory_channel_between_nodes(self):
        p = Program("t", "allreduce", 4, ranks_per_node=2)
        p.channel(0, 1, MEMORY)
        line = here()
        text = self.expect(line, lambda: p.channel(0, 2, MEMORY))
        self.assertIn("different nodes", text)

    def test_port_op_on_memory_channel(self):
        p, a, b, ab, ba = two(SIMPLE)
        line = here()
        self.assertIn("port op 'flush'", self.expect(line, lambda: ab.flush(0)))
        line = here()
        self.expect(line, lambda: ab.put_with_signal(b.scratch[0], a.input[0], 0))

    def test_memory_op_on_port_channel(self):
        p = Program("t", "allreduce", 2, protocol=SIMPLE)
        c = p.channel(0, 1, PORT)
        line = here()
        self.expect(line, lambda: c.get(p.ranks[0].output[0], p.ranks[1].input[0], 0))

    def test_packet_op_in_simple(self):
        p, a, b, ab, ba = two(SIMPLE)
        line = here()
        text = self.expect(line, lambda: ab.put_packets(b.scratch[0], a.input[0], 0))
        self.assertIn("needs protocol LL", text)

    def test_cycle_of_waits(self):
        p, a, b, ab, ba = two(SIMPLE)
        line = here()
        ab.wait(0)
        ab.signal(0)
        ba.wait(0)
        ba.signal(0)
        self.assertIn("cycle of waits", self.expect(line, p.compile))

    def test_packets_nobody_sends(self):
        p, a, b, ab, ba = two()
        line = here()
        a.unpack_packets(a.output[0], a.scratch[0], 0)
        self.expect(line, p.compile)

    def test_read_of_unwritten_chunk(self):
        p, a, b, ab, ba = two(SIMPLE)
        line = here()
        a.copy(a.output[0], a.scratch[0], 0)
        self.assertIn("no op wrote", self.expect(line, p.compile))

    def test_read_before_the_wait(self):
        # b reduces what a put into its scratch, but never waits for a's signal.
        p, a, b, ab, ba = two(SIMPLE)
        ab.put(b.scratch[0], a.input[0], 0)
        ab.signal(0)
        line = here()
        b.reduce(b.output[0], [b.input[0], b.scratch[0]], 0)
        ba.wait(0)
        self.expect(line, p.compile)

    def test_cross_block_read_needs_a_semaphore(self):
        p, a, b, ab, ba = two(SIMPLE)
        a.copy(a.scratch[0], a.input[0], 0)
        line = here()
        a.copy(a.output[0], a.scratch[0], 1)
        self.assertIn("no sync ordering", self.expect(line, p.compile))

    def test_blocks_sharing_a_channel(self):
        p, a, b, ab, ba = two(SIMPLE)
        ab.signal(0)
        line = here()
        ab.signal(1)
        ba.wait(0)
        ba.wait(0)
        self.assertIn("give each block its own channel", self.expect(line, p.compile))

    def test_nested_pipeline(self):
        p, a, b, ab, ba = two(SIMPLE)
        with p.pipeline(1024, 1):
            line = here()
            self.expect(line, lambda: p.pipeline(1024, 1).__enter__())


class Passes(unittest.TestCase):
    def test_semaphore_orders_blocks(self):
        p, a, b, ab, ba = two(SIMPLE)
        s = a.semaphore()
        a.copy(a.scratch[0], a.input[0], 0)
        s.release(0)
        s.acquire(1)
        a.copy(a.output[0], a.scratch[0], 1)
        plan = p.compile()
        self.assertEqual(ops_of(plan, 0, 0), ["copy", "sem_release"])
        self.assertEqual(ops_of(plan, 0, 1), ["sem_acquire", "copy"])
        self.assertEqual(plan["gpus"][0]["semaphores"], [{"init_value": 0}])

    def test_barrier(self):
        p, a, b, ab, ba = two(SIMPLE)
        a.copy(a.scratch[0], a.input[0], 0)
        a.barrier([0, 1])
        a.copy(a.output[0], a.scratch[0], 1)
        plan = p.compile()
        self.assertEqual(plan["gpus"][0]["threadblocks"][1]["ops"][0],
                         {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2})

    def test_nop_only_where_needed(self):
        p, a, b, ab, ba = two(SIMPLE)
        a.copy(a.scratch[0], a.input[0], 0)
        a.copy(a.output[0], a.scratch[0], 0)   # reads what other threads wrote: nop
        a.copy(a.scratch[1], a.input[0], 0)    # independent of the copy before: no nop
        self.assertEqual(ops_of(p.compile()), ["copy", "nop", "copy", "copy"])

    def test_packet_ops_on_one_range_need_no_nop(self):
        p, a, b, ab, ba = two()
        g = p.group([0, 1])
        ab.put_packets(b.scratch[0], a.input[0], g)
        ba.put_packets(a.scratch[0], b.input[0], g)
        for r in (a, b):
            r.reduce_packets(r.input[0], r.input[0], [r.scratch[0]], g)
            r.copy_packets(r.scratch[1], r.input[0], g)
            r.unpack_packets(r.output[0], r.scratch[1], g)
        self.assertEqual(ops_of(p.compile()), ["ppkt", "recpkt", "upkt"])

    def test_partly_overlapping_packet_ranges_need_a_nop(self):
        p = Program("t", "allreduce", 2, chunks=2)
        a, b = p.ranks
        p.channel(0, 1, MEMORY)
        p.channel(1, 0, MEMORY)
        a.copy_packets(a.scratch[0:2], a.input[0:2], 0)
        a.unpack_packets(a.output[1], a.scratch[1], 0)
        a.copy(a.output[0], a.input[0], 0)
        b.copy(b.output[0:2], b.input[0:2], 0)
        self.assertEqual(ops_of(p.compile()), ["cpkt", "nop", "upkt", "copy"])

    def _seed_rules(self, fuse):
        # 4 ranks, rank 0: the packets of 3 peers reduced, copied as packets, sent and forwarded.
        p = Program("t", "allreduce", 4, fuse=fuse)
        ch = {(x, y): p.channel(x, y, MEMORY) for x in range(4) for y in range(4) if x != y}
        r0 = p.ranks[0]
        for q in (1, 2, 3):
            ch[(q, 0)].put_packets(r0.scratch[q - 1], p.ranks[q].input[0], 0)
        r0.reduce_packets(r0.input[0], r0.input[0], [r0.scratch[k] for k in range(3)], 0)
        r0.copy_packets(r0.scratch[3], r0.input[0], 0)
        ch[(0, 1)].put_packets(p.ranks[1].scratch[0], r0.input[0], 0)
        ch[(0, 2)].read_put_packets(p.ranks[2].scratch[0], r0.scratch[3], 0)
        for q in (1, 2, 3):
            p.ranks[q].unpack_packets(p.ranks[q].output[0], p.ranks[q].scratch[0], 0) \
                if q != 3 else None
        return p.compile()

    def test_seed_fusions(self):
        fused, unfused = self._seed_rules(True), self._seed_rules(False)
        self.assertEqual(ops_of(unfused), ["repkt", "cpkt", "ppkt", "rppkt"])
        self.assertEqual(ops_of(fused), ["recspkt"])
        op = fused["gpus"][0]["threadblocks"][0]["ops"][0]
        self.assertEqual(len(op["dst_buff"]), 4)  # result, packet copy, 2 peers
        self.assertLess(op_count(fused), op_count(unfused))

    def _port_rules(self, fuse, forward):
        # 2 nodes x 1: reduce the peer's packets, copy the result as packets, ship the copy
        # through the port channel (put_packets or read_put_packets of that very range).
        p = Program("t", "allreduce", 2, ranks_per_node=1, fuse=fuse)
        for r in p.ranks:
            q = p.ranks[1 - r.id]
            c = p.channel(r.id, q.id, PORT)
            r.copy_packets(r.scratch[0], r.input[0], 0)
            c.put_packets(q.scratch[1], r.scratch[0], 0)
            r.reduce_packets(r.output[0], r.input[0], [r.scratch[1]], 0)
            r.copy_packets(r.scratch[2], r.output[0], 0)
            (c.read_put_packets if forward else c.put_packets)(q.scratch[3], r.scratch[2], 0)
        return p.compile()

    def test_port_reduce_copy_send(self):
        for forward in (False, True):
            fused, unfused = self._port_rules(True, forward), self._port_rules(False, forward)
            self.assertEqual(ops_of(unfused)[-3:], ["repkt", "cpkt", "rppkt" if forward
                                                    else "ppkt"])
            self.assertEqual(ops_of(fused)[-1], "recspkt")
            op = fused["gpus"][0]["threadblocks"][0]["ops"][-1]
            self.assertEqual((op["channel_type"], op["channel_ids"]), ("port", [0]))
            self.assertEqual([len(op["src_buff"]), len(op["dst_buff"])], [2, 3])

    def test_reduce_send_packets(self):
        p, a, b, ab, ba = two()
        ba.put_packets(a.scratch[0], b.input[0], 0)
        a.reduce_packets(a.output[0], a.input[0], [a.scratch[0]], 0)
        ab.put_packets(b.scratch[1], a.output[0], 0)
        b.unpack_packets(b.output[0], b.scratch[1], 0)
        self.assertEqual(ops_of(p.compile()), ["respkt"])

    def test_port_put_signal_flush(self):
        p = Program("t", "allgather", 2, protocol=SIMPLE, ranks_per_node=1)
        for r in p.ranks:
            q = p.ranks[1 - r.id]
            c = p.channel(r.id, q.id, PORT)
            c.signal(0)
            c.wait(0)
            c.put(q.output[r.id], r.input[0], 0)
            c.signal(0)
            c.flush(0)
            c.wait(0)
            r.copy(r.output[r.id], r.input[0], 0)
        plan = p.compile()
        self.assertEqual(ops_of(plan), ["signal", "wait", "pwsf", "wait", "copy"])
        self.assertEqual(plan["nranks_per_node"], 1)

    def test_port_put_without_a_signal_after_it(self):
        p = Program("t", "allgather", 2, protocol=SIMPLE, ranks_per_node=1)
        for r in p.ranks:
            q = p.ranks[1 - r.id]
            c = p.channel(r.id, q.id, PORT)
            c.signal(0)
            c.wait(0)
            c.put(q.output[r.id], r.input[0], 0)
            r.copy(r.output[r.id], r.input[0], 0)
            c.signal(0)
            c.wait(0)
        self.assertEqual(ops_of(p.compile()), ["signal", "wait", "put", "copy", "signal", "wait"])

    def test_reduce_then_put(self):
        p, a, b, ab, ba = two(SIMPLE)
        for r, c, d in ((a, ab, ba), (b, ba, ab)):
            c.signal(0)
            c.wait(0)
            r.reduce(r.output[0], [r.input[0], r.input[0]], 0)
            c.put(p.ranks[1 - r.id].scratch[0], r.output[0], 0)
            c.signal(0)
            c.wait(0)
        self.assertEqual(ops_of(p.compile()), ["signal", "wait", "res", "signal", "wait"])

    def test_same_ops_merge(self):
        p = Program("t", "allgather", 3, protocol=SIMPLE)
        for r in p.ranks:
            peers = [q for q in p.ranks if q is not r]
            ch = {q.id: p.channel(r.id, q.id, MEMORY) for q in peers}
            for q in peers:
                ch[q.id].signal(0)
            for q in peers:
                ch[q.id].wait(0)
            for q in peers:
                ch[q.id].put(q.output[r.id], r.input[0], 0)
            for q in peers:
                ch[q.id].signal(0)
            r.copy(r.output[r.id], r.input[0], 0)
            for q in peers:
                ch[q.id].wait(0)
        plan = p.compile()
        self.assertEqual(ops_of(plan), ["signal", "wait", "put", "signal", "copy", "wait"])
        self.assertEqual(plan["gpus"][0]["threadblocks"][0]["ops"][0]["channel_ids"], [0, 1])

    def test_instances(self):
        p = Program("t", "allreduce", 2, instances=2)
        g = p.group([0, 1])
        for r in p.ranks:
            q = p.ranks[1 - r.id]
            p.channel(r.id, q.id, MEMORY).put_packets(q.scratch[0], r.input[0], g)
            r.reduce_packets(r.output[0], r.input[0], [r.scratch[0]], g)
        plan = p.compile()
        g0 = plan["gpus"][0]
        self.assertEqual((g0["input_chunks"], g0["output_chunks"], g0["scratch_chunks"]),
                         (2, 2, 2))
        self.assertEqual(len(g0["threadblocks"]), 4)
        self.assertEqual(g0["channels"], [{"channel_type": "memory", "connected_to": [1, 1]}])
        # block 1 = instance 1 of block 0: chunk 1, channel 1
        tb1 = g0["threadblocks"][1]
        self.assertEqual(tb1["ops"][0]["src_buff"], [{"type": "i", "index": 1, "size": 1}])
        self.assertEqual(tb1["channels"], [{"channel_type": "memory", "channel_ids": [1]}])

    def test_pipeline_and_reduce_op(self):
        p, a, b, ab, ba = two(SIMPLE, reduce_op="max", priority=3)
        for r, c in ((a, ab), (b, ba)):
            c.signal(0)
            c.wait(0)
            with p.pipeline(4096, 1):
                c.put(p.ranks[1 - r.id].scratch[0], r.input[0], 0)
                c.signal(0)
                c.wait(0)
                r.reduce(r.output[0], [r.input[0], r.scratch[0]], 0)
            c.signal(0)
            c.wait(0)
        plan = p.compile()
        pipe = plan["gpus"][0]["threadblocks"][0]["ops"][2]
        self.assertEqual(pipe["iter_context"], {"unit_size": 4096, "num_chunks": 1})
        self.assertEqual([o["name"] for o in pipe["ops"]], ["put", "signal", "wait", "re"])
        self.assertEqual(pipe["ops"][3]["reduce_op"], "max")
        self.assertEqual(plan["priority"], 3)


if __name__ == "__main__":
    unittest.main()
