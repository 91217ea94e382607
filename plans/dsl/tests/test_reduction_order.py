# SPDX-License-Identifier: MIT
# Every shipped allreduce plan gives all ranks bit-identical results (float reductions in other
# orders round differently).
#
# A symbolic run of the blocks (one per thread-block group: its others do the same on other
# slices) yields, per output chunk, the expression each rank ends with, e.g. ((x0 + x1) + x2);
# they must agree on every rank up to swapping the two operands of one step (a + b == b + a).
import unittest

import helpers
import generate

MOVES = {"ppkt", "cpkt", "upkt", "copy", "put", "get", "rppkt"}
REDUCES = {"re", "res", "rre", "rres", "repkt", "respkt", "recpkt", "recspkt"}


def reduction_exprs(p):
    alias = {"o": "i"} if p["inplace"] else {}
    gpus = {g["id"]: g for g in p["gpus"]}
    val = {(g["id"], "i", k): "x%d.%d" % (g["id"], k)
           for g in p["gpus"] for k in range(g["input_chunks"])}

    def key(rank, tb, ref, op):
        if "buffer_id" in ref:
            ids = [x for x in tb["remote_buffer_refs"]
                   if x["access_channel_type"] == op["channel_type"]][0]["remote_buffer_ids"]
            rb = gpus[rank]["remote_buffers"][ids[ref["buffer_id"]]]
            return [(rb["rank"], alias.get(rb["type"], rb["type"]), ref["index"] + k)
                    for k in range(ref["size"])]
        t = alias.get(ref["type"], ref["type"])
        return [(rank, t, ref["index"] + k) for k in range(ref["size"])]

    pending = {(r, tb["id"]): [x for op in tb["ops"] for x in op.get("ops", [op])]
               for r, g in gpus.items() for tb in g["threadblocks"]
               if all(op.get("tbg_info", {}).get("tb_id", 0) == 0 for op in tb["ops"])}
    while any(pending.values()):
        progressed = False
        for (r, b), ops in pending.items():
            tb = gpus[r]["threadblocks"][b]
            while ops:
                op = ops[0]
                srcs = [key(r, tb, x, op) for x in op.get("src_buff", [])]
                if any(k not in val for s in srcs for k in s):
                    break
                dsts = [key(r, tb, x, op) for x in op.get("dst_buff", [])]
                if op["name"] in REDUCES:
                    for j in range(len(srcs[0])):
                        acc = val[srcs[0][j]]
                        for s in srcs[1:]:
                            acc = tuple(sorted((acc, val[s[j]]), key=repr))
                        for d in dsts:
                            val[d[j]] = acc
                elif op["name"] in MOVES:
                    for i, d in enumerate(dsts):
                        s = srcs[min(i, len(srcs) - 1)]
                        for j in range(len(d)):
                            val[d[j]] = val[s[j]]
                ops.pop(0)
                progressed = True
        if not progressed:
            raise AssertionError("%s: symbolic run stuck" % p["name"])
    out = "i" if p["inplace"] else "o"
    return [[val[(g["id"], out, k)] for k in range(g["output_chunks"])] for g in p["gpus"]]


class ReductionOrder(unittest.TestCase):
    def test_all_ranks_reduce_in_one_order(self):
        for rel, make in generate.plans():
            if not rel.startswith(("allreduce/", "extra/allreduce/")):
                continue
            with self.subTest(rel):
                exprs = reduction_exprs(make(True).compile())
                for e in exprs[1:]:
                    self.assertEqual(e, exprs[0])


if __name__ == "__main__":
    unittest.main()
