#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes plans that pass the validator but are wrong, each with one defect, for the simulator
tests (test/unit/executor/test_sim.c). Standard library only; run from anywhere:
    python3 test/data/plans/broken/gen_broken.py
Each plan's expected verdict and a substring of the simulator's message are in expected.txt."""
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
# The text is the plan DSL's, as in plans/: one op per line, so that a change is a small diff.
sys.dont_write_bytecode = True  # leave no __pycache__ under plans/dsl
sys.path.insert(0, os.path.join(ROOT, "plans", "dsl"))
from planccl_dsl import render  # noqa: E402


def load(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return json.load(f)


def save(name, plan):
    with open(os.path.join(HERE, name), "w") as f:
        f.write(render(plan))


def wrong_chunk():
    """Two-phase allreduce whose rank 0 unpacks the peer's reduced chunk into its own chunk 0
    (index 0 instead of 1): rank 0's output chunk 0 ends up holding rank 1's half."""
    p = copy.deepcopy(load("plans/extra/allreduce/2gpu_ll2_outofplace.json"))
    p["name"] = "broken_wrong_chunk"
    for tb in p["gpus"][0]["threadblocks"]:
        for op in tb["ops"]:
            if op["name"] == "upkt":
                op["dst_buff"][0]["index"] = 0
    return p


def missing_wait():
    """Simple allreduce where rank 1 reduces its scratch without waiting for rank 0's put (the
    wait and its matching signal are gone, so signal/wait counts still pair)."""
    p = copy.deepcopy(load("test/data/plans/good/ar2_simple.json"))
    p["name"] = "broken_missing_wait"
    ops0 = p["gpus"][0]["threadblocks"][0]["ops"]
    ops1 = p["gpus"][1]["threadblocks"][0]["ops"]
    # Rank 0: put, nop, signal(4), wait(5): drop the signal after the put.
    assert ops0[4]["name"] == "signal" and ops1[5]["name"] == "wait"
    del ops0[4]
    del ops1[5]
    return p


def swapped_peer():
    """Four-rank LL allreduce where rank 0's first packet put goes to rank 2 and its second to
    rank 1 (destinations swapped): rank 1 waits forever for packets in its scratch chunk 2."""
    p = copy.deepcopy(load("test/data/plans/good/ar4_ll.json"))
    p["name"] = "broken_swapped_peer"
    op = p["gpus"][0]["threadblocks"][0]["ops"][0]
    assert op["name"] == "ppkt"
    d = op["dst_buff"]
    d[0]["buffer_id"], d[1]["buffer_id"] = d[1]["buffer_id"], d[0]["buffer_id"]
    return p


def single_scratch():
    """One-phase LL allreduce without double scratch: a rank that runs ahead into the next call
    overwrites packets its slower peer has not read yet, which then waits for a flag that never
    comes back (the packet it finds carries the next call's flag)."""
    p = copy.deepcopy(load("plans/allreduce/2gpu_ll1_inplace.json"))
    p["name"] = "broken_single_scratch"
    p["use_double_scratch_buffer"] = False
    # A wide range, so that it never wins selection by narrowness in registry tests over the tree.
    p["max_message_size"] = 2 * 1024 * 1024
    return p


def main():
    save("wrong_chunk.json", wrong_chunk())
    save("missing_wait.json", missing_wait())
    save("swapped_peer.json", swapped_peer())
    save("single_scratch.json", single_scratch())


if __name__ == "__main__":
    main()
