# SPDX-License-Identifier: MIT
# Pass: per-chunk data dependencies across ranks, blocks and proxies: refuses a read of a chunk no
# op wrote, a read or overwrite no sync orders after what it depends on, and waits that hang.
from .errors import DslError
from .layout import PIPE_STEPS, space, span
from .pairing import partner

# The program runs symbolically: every block and every rank's proxy is an agent with a vector
# clock, carried by signals, semaphores, barriers and flushes; packets are there or not.
PORT_DATA = {"put", "pws", "pwsf", "ppkt", "rppkt"}
INIT = "(the caller's input)"


def _hb(a, b):
    return all(v <= b.get(k, 0) for k, v in a.items())


def _merge(a, b):
    for k, v in b.items():
        if a.get(k, 0) < v:
            a[k] = v


class _Seg:
    __slots__ = ("lo", "hi", "pkt", "vc", "where", "reads")

    def __init__(self, lo, hi, pkt, vc, where, reads=None):
        self.lo, self.hi, self.pkt, self.vc, self.where = lo, hi, pkt, vc, where
        self.reads = reads if reads is not None else []


class _Memory:
    def __init__(self, prog):
        self.prog = prog
        self.segs = {}
        for r in range(prog.nranks):
            ic = prog.ranks[r].input.chunks
            sp, base = space(prog, r, "i", 0)
            self.segs[(r, sp)] = [_Seg(base, base + ic, False, {}, INIT)]

    def _over(self, key, lo, hi):
        return [s for s in self.segs.get(key, []) if s.lo < hi and lo < s.hi]

    def packets_ready(self, sp):
        rank, space, lo, hi = sp
        pos = lo
        for s in sorted(self._over((rank, space), lo, hi), key=lambda s: s.lo):
            if not s.pkt or s.lo > pos:
                return False
            pos = max(pos, s.hi)
        return pos >= hi

    def read_plain(self, sp, vc, where, what):
        rank, space, lo, hi = sp
        segs = sorted(self._over((rank, space), lo, hi), key=lambda s: s.lo)
        pos = lo
        for s in segs:
            if s.lo > pos:
                break
            if s.pkt:
                raise DslError(where, "%s reads rank %d's %s chunks [%s, %s) as plain data, but "
                               "they hold packets (%s)" % (what, rank, _word(space), _f(s.lo),
                                                          _f(s.hi), s.where))
            if not _hb(s.vc, vc):
                raise DslError(where, "%s reads rank %d's %s chunks [%s, %s), written by %s, "
                               "with no sync ordering that write first (a signal/wait, "
                               "semaphore, barrier or flush)" %
                               (what, rank, _word(space), _f(s.lo), _f(s.hi), s.where))
            s.reads.append((lo, hi, dict(vc), where))
            pos = max(pos, s.hi)
        if pos < hi:
            raise DslError(where, "%s reads rank %d's %s chunks [%s, %s), which no op wrote "
                           "before it" % (what, rank, _word(space), _f(pos), _f(hi)))

    def write(self, sp, pkt, vc, where, what):
        rank, space, lo, hi = sp
        key = (rank, space)
        keep = []
        for s in self.segs.get(key, []):
            if not (s.lo < hi and lo < s.hi):
                keep.append(s)
                continue
            for rlo, rhi, rvc, rwhere in s.reads:
                if rlo < hi and lo < rhi and not _hb(rvc, vc):
                    raise DslError(where, "%s overwrites rank %d's %s chunks [%s, %s) that %s "
                                   "reads, with no sync ordering that read first" %
                                   (what, rank, _word(space), _f(max(lo, s.lo)),
                                    _f(min(hi, s.hi)), rwhere))
            if not pkt and not s.pkt and not _hb(s.vc, vc):
                raise DslError(where, "%s writes rank %d's %s chunks [%s, %s) that %s also "
                               "writes, unordered" % (what, rank, _word(space), _f(max(lo, s.lo)),
                                                      _f(min(hi, s.hi)), s.where))
            if s.lo < lo:
                keep.append(_Seg(s.lo, lo, s.pkt, s.vc, s.where, list(s.reads)))
            if s.hi > hi:
                keep.append(_Seg(hi, s.hi, s.pkt, s.vc, s.where, list(s.reads)))
        keep.append(_Seg(lo, hi, pkt, dict(vc), where))
        self.segs[key] = keep


def _word(space):
    return {"i": "input", "o": "output", "s": "scratch"}[space]


def _f(x):
    return str(x) if x.denominator != 1 else str(x.numerator)


class _Agent:
    def __init__(self, key, steps):
        self.key, self.steps, self.pc, self.state = key, steps, 0, None
        self.vc = {key: 0}
        self.why = ""


def _flatten(ops):
    out = []
    for op in ops:
        if op.name != "pipeline":
            out.append((op, None))
            continue
        for step in range(PIPE_STEPS):
            for inner in op.body:
                inner.pipe_chunks = op.pipe[1]
                out.append((inner, step))
    return out


class _Run:
    def __init__(self, prog):
        self.prog = prog
        self.mem = _Memory(prog)
        self.inbound = {}   # id(channel) -> [vc of each signal that reached it]
        self.expected = {}  # id(channel) -> waits issued
        self.sems = {}      # (rank, index) -> [vc of releases not yet acquired]
        self.sem_taken = {}
        self.bars = {}      # (rank, barrier id) -> [vc of arrivals]
        self.blocks = []
        self.fifo = {r: [] for r in range(prog.nranks)}
        self.proxy = {r: _Agent(("proxy", r), []) for r in range(prog.nranks)}
        self.done_vcs = {r: [] for r in range(prog.nranks)}
        for r in range(prog.nranks):
            for tb in sorted(prog.blocks[r]):
                self.blocks.append(_Agent((r, tb), _flatten(prog.blocks[r][tb])))

    def sp(self, op, ref, step):
        return span(self.prog, op, ref, step)

    # ---- one op of a block: True when done, False when it must wait ----
    def exec(self, a, op, step):
        n = op.name
        r = op.rank
        if n in ("nop",):
            return True
        if n == "barrier":
            key = (r, op.barrier_id)
            if a.state is None:
                arr = self.bars.setdefault(key, [])
                arr.append(dict(a.vc))
                a.state = len(arr) + (-len(arr) % op.nblocks)  # arrivals this round completes at
            arr = self.bars[key]
            if len(arr) < a.state:
                a.why = "barrier %d: %d of %d blocks arrived" % (op.barrier_id,
                                                               len(arr) % op.nblocks, op.nblocks)
                return False
            for v in arr[a.state - op.nblocks:a.state]:
                _merge(a.vc, v)
            return True
        if n in ("signal", "rlxsignal"):
            for c in op.chans:
                d = partner(self.prog, c)
                if c.kind == "memory":
                    self.inbound.setdefault(id(d), []).append(dict(a.vc))
                else:
                    self.fifo[r].append(("flag", None, d, dict(a.vc), op))
            return True
        if n in ("wait", "rlxwait"):
            if a.state is None:
                a.state = []
                for c in op.chans:
                    self.expected[id(c)] = self.expected.get(id(c), 0) + 1
                    a.state.append(self.expected[id(c)])
            for c, want in zip(op.chans, a.state):
                got = self.inbound.get(id(c), [])
                if len(got) < want:
                    a.why = "waits on its %r for signal %d (%d arrived)" % (c, want, len(got))
                    return False
            for c, want in zip(op.chans, a.state):
                _merge(a.vc, self.inbound[id(c)][want - 1])
            return True
        if n == "sem_release":
            for s in op.sems:
                self.sems.setdefault((r, s.index), []).append(dict(a.vc))
            return True
        if n == "sem_acquire":
            for s in op.sems:
                key = (r, s.index)
                have = s.init + len(self.sems.get(key, [])) - self.sem_taken.get(key, 0)
                if have <= 0:
                    a.why = "acquires semaphore %d (value 0)" % s.index
                    return False
            for s in op.sems:
                key = (r, s.index)
                k = self.sem_taken.get(key, 0)
                self.sem_taken[key] = k + 1
                rel = self.sems.get(key, [])
                if k >= s.init and k - s.init < len(rel):
                    _merge(a.vc, rel[k - s.init])
            return True
        if n == "flush" or (n == "pwsf" and a.state is not None):
            if a.state is None:
                self.fifo[r].append(("sync", None, None, dict(a.vc), op))
                a.state = len(self.fifo[r])
            if len(self.done_vcs[r]) < a.state:
                a.why = "waits for its proxy to flush"
                return False
            _merge(a.vc, self.done_vcs[r][a.state - 1])
            return True
        if op.ctype == "port" and n in PORT_DATA:
            if n == "rppkt":
                for s in op.srcs:
                    sp = self.sp(op, s, step)
                    if sp and not self.mem.packets_ready(sp):
                        a.why = "waits for packets in rank %d's scratch %s" % (sp[0], sp[2:])
                        return False
            for i, (c, d) in enumerate(zip(op.chans, op.dsts)):
                s = op.srcs[min(i, len(op.srcs) - 1)]
                flag = partner(self.prog, c) if n in ("pws", "pwsf") else None
                self.fifo[r].append(("data", (s, d, step), flag, dict(a.vc), op))
            if n == "pwsf":
                self.fifo[r].append(("sync", None, None, dict(a.vc), op))
                a.state = len(self.fifo[r])
                return self.exec(a, op, step)
            return True
        # Data ops run by the block's threads: packets first (they wait), then plain data.
        for s in op.srcs:
            sp = self.sp(op, s, step)
            if sp and s.pkt and not self.mem.packets_ready(sp):
                a.why = "waits for packets in rank %d's scratch chunks [%s, %s)" % (
                    sp[0], _f(sp[2]), _f(sp[3]))
                return False
        for s in op.srcs:
            sp = self.sp(op, s, step)
            if sp and not s.pkt:
                self.mem.read_plain(sp, a.vc, op.where[0], "'%s'" % n)
        for d in op.dsts:
            sp = self.sp(op, d, step)
            if sp:
                self.mem.write(sp, d.pkt, a.vc, op.where[0], "'%s'" % n)
        return True

    def proxy_step(self, r):
        p = self.proxy[r]
        done = len(self.done_vcs[r])
        if done >= len(self.fifo[r]):
            return False
        kind, data, flag, vc, op = self.fifo[r][done]
        _merge(p.vc, vc)
        p.vc[p.key] += 1
        if kind == "data":
            s, d, step = data
            ss, ds = span(self.prog, op, s, step), span(self.prog, op, d, step)
            if ss:
                what = "the proxy's copy for port '%s'" % op.name
                if s.pkt:
                    if not self.mem.packets_ready(ss):
                        raise DslError(op.where[0], "%s sends rank %d's scratch chunks [%s, %s) "
                                       "before its packets were written" %
                                       (what, ss[0], _f(ss[2]), _f(ss[3])))
                else:
                    self.mem.read_plain(ss, p.vc, op.where[0], what)
                self.mem.write(ds, d.pkt, p.vc, op.where[0], what)
        if flag is not None:
            self.inbound.setdefault(id(flag), []).append(dict(p.vc))
        self.done_vcs[r].append(dict(p.vc))
        return True

    def run(self):
        while True:
            progress = False
            for a in self.blocks:
                while a.pc < len(a.steps):
                    op, step = a.steps[a.pc]
                    if a.state is None:
                        a.vc[a.key] += 1
                    if not self.exec(a, op, step):
                        break
                    a.pc += 1
                    a.state = None
                    progress = True
            for r in range(self.prog.nranks):
                while self.proxy_step(r):
                    progress = True
            if all(a.pc == len(a.steps) for a in self.blocks):
                return
            if not progress:
                stuck = [a for a in self.blocks if a.pc < len(a.steps)]
                text = "; ".join("%s '%s' on rank %d block %d %s" % (
                    a.steps[a.pc][0].where[0], a.steps[a.pc][0].name, a.key[0], a.key[1], a.why)
                    for a in stuck)
                raise DslError(stuck[0].steps[stuck[0].pc][0].where[0],
                               "cycle of waits, no rank can proceed: " + text)


def check(prog):
    _Run(prog).run()
