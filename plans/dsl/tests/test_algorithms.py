# SPDX-License-Identifier: MIT
# Every algorithm, fused and unfused, in place and out of place: both plans pass the simulator
# (every dtype, reduction and packet format at small sizes, checked against the reference
# result) and fusion cuts the op count. Also: the checked-in plans are what generate.py writes.
import os
import subprocess
import sys
import unittest

import helpers
from planccl_dsl import op_count
from algorithms import (allgather_ll, allgather_mn_ll, allgather_simple, allreduce_hier_ll,
                        allreduce_ll1, allreduce_ll2, allreduce_simple, allreduce_zero_copy,
                        broadcast, reduce, reducescatter_hier_ll,
                        reducescatter_ll, reducescatter_mn_ll, reducescatter_simple)

SMALL = dict(threads=256, lo=16, hi=1 << 20)
# (name, build(inplace, fuse)); shapes are small but have something for every fusion rule.
ALGORITHMS = [
    ("allreduce_ll1_4", lambda ip, f: allreduce_ll1.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("allreduce_ll1_2", lambda ip, f: allreduce_ll1.build(2, ip, 2, name="t", fuse=f, **SMALL)),
    ("allreduce_ll2_4", lambda ip, f: allreduce_ll2.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("allgather_ll_4", lambda ip, f: allgather_ll.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("reducescatter_ll_4",
     lambda ip, f: reducescatter_ll.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("allreduce_simple_4",
     lambda ip, f: allreduce_simple.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("allreduce_simple_pipe_2",
     lambda ip, f: allreduce_simple.build(2, ip, 1, name="t", unit=64, instances=2, fuse=f,
                                          **SMALL)),
    ("allreduce_zero_copy_4",
     lambda ip, f: allreduce_zero_copy.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("allgather_simple_4",
     lambda ip, f: allgather_simple.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("reducescatter_simple_4",
     lambda ip, f: reducescatter_simple.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("broadcast_ll_4", lambda ip, f: broadcast.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("broadcast_simple_4",
     lambda ip, f: broadcast.build(4, ip, 2, name="t", protocol="Simple", fuse=f, **SMALL)),
    ("reduce_ll_4", lambda ip, f: reduce.build(4, ip, 2, name="t", fuse=f, **SMALL)),
    ("reduce_simple_4",
     lambda ip, f: reduce.build(4, ip, 2, name="t", protocol="Simple", fuse=f, **SMALL)),
    ("allreduce_hier_2x4",
     lambda ip, f: allreduce_hier_ll.build(2, 4, ip, 2, name="t", fuse=f, **SMALL)),
    ("allreduce_hier_4x2",
     lambda ip, f: allreduce_hier_ll.build(4, 2, ip, 2, name="t", fuse=f, **SMALL)),
    ("allgather_mn_2x4",
     lambda ip, f: allgather_mn_ll.build(2, 4, ip, 2, name="t", fuse=f, **SMALL)),
    ("reducescatter_mn_2x4",
     lambda ip, f: reducescatter_mn_ll.build(2, 4, ip, 2, name="t", fuse=f, **SMALL)),
    ("reducescatter_hier_4x2",
     lambda ip, f: reducescatter_hier_ll.build(4, 2, ip, 2, name="t", fuse=f, **SMALL)),
]
# Nothing to fuse: one peer, one packet send and one reduction per block.
NOTHING_TO_FUSE = {"allreduce_ll1_2"}
SIM = ["--dtype", "all", "--op", "all", "--packet", "all", "--max-bytes", "1K", "--seeds", "1"]


def plans(name, build):
    out = {}
    for ip in (True, False):
        for fuse in (True, False):
            p = build(ip, fuse).compile()
            p["name"] = "%s_%s_%s" % (name, "inplace" if ip else "outofplace",
                                      "fused" if fuse else "unfused")
            out[(ip, fuse)] = p
    return out


class Algorithms(unittest.TestCase):
    def test_fusion_cuts_ops(self):
        for name, build in ALGORITHMS:
            with self.subTest(name):
                ps = plans(name, build)
                for ip in (True, False):
                    fused, unfused = op_count(ps[(ip, True)]), op_count(ps[(ip, False)])
                    if name in NOTHING_TO_FUSE:
                        self.assertEqual(fused, unfused)
                    else:
                        self.assertLess(fused, unfused)

    @unittest.skipIf(helpers.plan_tool() is None, helpers.NO_TOOL)
    def test_fused_and_unfused_simulate(self):
        for name, build in ALGORITHMS:
            with self.subTest(name):
                rc, out = helpers.simulate(list(plans(name, build).values()), *SIM)
                self.assertEqual(rc, 0, out)
                self.assertNotIn(" 0 passed", out.splitlines()[-1])


class Generated(unittest.TestCase):
    def test_checked_in_plans_are_up_to_date(self):
        r = subprocess.run([sys.executable, os.path.join(helpers.DSL, "generate.py"), "--check"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 0, r.stdout)


if __name__ == "__main__":
    unittest.main()
