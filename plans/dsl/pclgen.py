# SPDX-License-Identifier: MIT
# Compatibility shim for bench/ll1_sweep.py, the one remaining user of the old generator's API:
# the one-phase allreduce now comes from the DSL (algorithms/allreduce_ll1.py). Remove this file
# once the sweep imports the algorithm directly.
from algorithms import allreduce_ll1 as _ll1
from planccl_dsl import render  # noqa: F401  (re-exported)

KIB, MIB = 1 << 10, 1 << 20


def kind(inplace):
    return "inplace" if inplace else "outofplace"


def allreduce_ll1(nranks, inplace, nblocks, threads, lo, hi, prio, name):
    return _ll1.build(nranks, inplace, nblocks, threads, lo, hi, name, priority=prio).compile()
