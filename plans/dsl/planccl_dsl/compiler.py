# SPDX-License-Identifier: MIT
# The pass pipeline of Program.compile(): checks on the program as written (pairing, data flow),
# then rewrites (fusion, syncs, replication), then the JSON. Checks run before fusion so that an
# error names the line the user wrote, not a fused op.
from . import dataflow, emit, fusion, pairing, replicate, syncs


def compile_program(prog):
    if getattr(prog, "_compiled", None) is not None:
        return prog._compiled
    pairing.check(prog)
    dataflow.check(prog)
    if prog.fuse:
        fusion.run(prog)
    syncs.run(prog)
    replicate.run(prog)
    prog._compiled = emit.plan(prog)
    return prog._compiled
