# SPDX-License-Identifier: MIT
# Where an operand lands, for the passes that compare accesses: chunk ranges as exact fractions
# (a thread-block-group slice or a pipeline step is a fraction of a chunk range), with in-place
# buffers folded onto the memory they share.
from fractions import Fraction

PIPE_STEPS = 2  # a pipeline is analysed as this many steps: enough to see step-to-step hazards


def space(prog, rank, buf, index):
    """(space, chunk index) after in-place aliasing: the memory the chunk really is."""
    if not prog.inplace:
        return buf, index
    c = prog.collective
    if c == "allgather" and buf == "i":
        return "o", rank * prog.chunks + index
    if c == "reducescatter" and buf == "o":
        return "i", rank * prog.chunks + index
    if c not in ("allgather", "reducescatter") and buf == "o":
        return "i", index
    return buf, index


def span(prog, op, ref, step=None):
    """(rank, space, lo, hi) of `ref` as `op` touches it (its tbg slice, pipeline `step` of
    PIPE_STEPS); None when that step touches nothing of it."""
    sp, base = space(prog, ref.rank, ref.buf, ref.index)
    lo, hi = Fraction(0), Fraction(ref.size)
    if op.tbg is not None:
        k, n = op.tbg
        lo, hi = Fraction(ref.size * k, n), Fraction(ref.size * (k + 1), n)
    if step is not None:
        unit = Fraction(op.pipe_chunks, PIPE_STEPS)
        wlo = lo + unit * step
        lo, hi = min(wlo, hi), min(wlo + unit, hi)
        if lo >= hi:
            return None
    return ref.rank, sp, base + lo, base + hi


def overlaps(a, b):
    return a[0] == b[0] and a[1] == b[1] and a[2] < b[3] and b[2] < a[3]
