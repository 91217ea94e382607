# SPDX-License-Identifier: MIT
# Pass: signal/wait pairing per channel. A signal on A's k-th channel to B is consumed by a wait
# on B's k-th channel to A, so their counts must match (per pipeline rate, since ops in a
# pipeline run once per iteration); an imbalance hangs a rank or leaves a stale count behind.
from fractions import Fraction

from .errors import DslError
from .program import SIGNALS, WAITS


def partner(prog, c):
    for d in prog.all_channels:
        if (d.local, d.remote, d.kind, d.nth) == (c.remote, c.local, c.kind, c.nth):
            return d
    return None


def _walk(prog):
    """(op, rate) for every op: rate None outside pipelines, num_chunks/unit_size inside."""
    for r in range(prog.nranks):
        for tb in sorted(prog.blocks[r]):
            for op in prog.blocks[r][tb]:
                if op.name == "pipeline":
                    rate = Fraction(op.pipe[1], op.pipe[0])
                    for inner in op.body:
                        yield inner, rate
                else:
                    yield op, None


def check(prog):
    for c in prog.all_channels:
        if partner(prog, c) is None:
            have = sum(1 for d in prog.all_channels
                       if (d.local, d.remote, d.kind) == (c.remote, c.local, c.kind))
            raise DslError(c.where, "%r has no partner: rank %d has %d %s channel%s to rank %d "
                           "(channels pair up: make one on each side)" %
                           (c, c.remote, have, c.kind, "" if have == 1 else "s", c.local))
    sig, wait, users = {}, {}, {}
    for op, rate in _walk(prog):
        table = sig if op.name in SIGNALS else wait if op.name in WAITS else None
        if table is None:
            continue
        for c in op.chans:
            table.setdefault((id(c), rate), []).append(op.where[0])
            first = users.setdefault((id(c), table is sig), (op.tb, op.where[0]))
            if first[0] != op.tb:
                raise DslError(op.where[0], "blocks %d (%s) and %d both %s on %r: a counting "
                               "semaphore cannot tell their signals apart, give each block its "
                               "own channel (Program.channels)" %
                               (first[0], first[1], op.tb, "signal" if table is sig else "wait",
                                c))
    rates = {k[1] for k in list(sig) + list(wait)}
    for c in prog.all_channels:
        d = partner(prog, c)
        for rate in rates:
            s = sig.get((id(c), rate), [])
            w = wait.get((id(d), rate), [])
            if len(s) == len(w):
                continue
            per = "" if rate is None else " per pipeline iteration"
            text = ("unbalanced signal/wait%s: rank %d signals %d time%s on its %r (%s) but rank "
                    "%d waits %d time%s on its %r (%s)" %
                    (per, c.local, len(s), "" if len(s) == 1 else "s", c,
                     ", ".join(s) or "no signal", c.remote, len(w), "" if len(w) == 1 else "s",
                     d, ", ".join(w) or "no wait"))
            # Blame the side with the extra op: an unpaired wait hangs, an extra signal lingers.
            raise DslError((w[len(s)] if len(w) > len(s) else s[len(w)]), text)
