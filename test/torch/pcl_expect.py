# SPDX-License-Identifier: MIT
# What planccl should do with each call the PyTorch suite makes (from the installed plan JSON
# files, so the expectation follows the shipped plans), and the PLANCCL_STATS=1 lines it did print.
import glob
import json
import os
import re
import threading
import time

# The NCCL collectives planccl can run on a plan (shim/dispatch/dispatch_decide.c, plan_coll).
PLANNED_COLLS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce")
_JSON_COLL = {"allreduce": "AllReduce", "allgather": "AllGather", "reducescatter": "ReduceScatter",
              "broadcast": "Broadcast", "reduce": "Reduce"}
# planccl's kernels are instantiated for every NCCL dtype and for sum/prod/max/min/avg
# (kernels/types.def): only PreMulSum and the sizes decide, so the table needs no dtype column.
KERNEL_OPS = ("sum", "prod", "max", "min", "avg")


class Plan:
    def __init__(self, path, d):
        self.path = path
        self.name = d["name"]
        self.coll = _JSON_COLL.get(d["collective"], d["collective"])
        self.n_gpus = len(d["gpus"])
        self.rpn = int(d.get("nranks_per_node", self.n_gpus))
        self.inplace = bool(d["inplace"])
        self.outofplace_ok = bool(d.get("outofplace_ok", False))
        self.min = int(d["min_message_size"])
        self.max = int(d["max_message_size"])
        self.align = int(d.get("buffer_alignment", 16))
        g0 = d["gpus"][0]
        self.in_chunks = int(g0.get("input_chunks", 0))
        self.out_chunks = int(g0.get("output_chunks", 0))
        self.priority = int(d.get("priority", 0))
        ops = set()
        for g in d["gpus"]:
            for tb in g.get("threadblocks", []):
                for op in tb.get("ops", []):
                    r = op.get("reduce_op")
                    if r and r != "avg":
                        ops.add(r)
        self.reduce_ops = ops  # empty: the plan takes the call's op
        # Zero-copy plans need registered buffers; the executor may refuse them at run time, so a
        # call they would take is not predictable from the table alone.
        self.uncertain = "zerocopy" in self.name

    def place_ok(self, inplace):
        return self.inplace if inplace else (not self.inplace or self.outofplace_ok)

    def runnable(self, nbytes):
        # executor/plan/plan_layout.c pcl_plan_size_runnable, less the scratch cap (2 MiB-class plans
        # never reach it).
        if nbytes == 0 or nbytes < self.min or nbytes > self.max:
            return False
        n = self.n_gpus
        if self.coll in ("AllGather", "ReduceScatter"):
            if nbytes % n:
                return False
            inb, outb = (nbytes // n, nbytes) if self.coll == "AllGather" else (nbytes, nbytes // n)
        else:
            inb = outb = nbytes
        if self.in_chunks and inb % (self.align * self.in_chunks):
            return False
        if self.out_chunks and outb % (self.align * self.out_chunks):
            return False
        if self.in_chunks and self.out_chunks and inb // self.in_chunks != outb // self.out_chunks:
            return False
        return True


def plan_dirs(prefix):
    """PLANCCL_PLAN_DIR first, then the installed default set, as the registry searches them."""
    dirs = [d for d in os.environ.get("PLANCCL_PLAN_DIR", "").split(":") if d]
    inst = os.path.join(prefix, "share", "planccl", "plans") if prefix else ""
    if inst and os.path.isdir(inst):
        dirs.append(inst)
    else:  # a library that was never installed takes the source tree's default set
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plans")
        dirs.extend(sorted(p for p in glob.glob(os.path.join(src, "*")) if os.path.isdir(p)
                           and os.path.basename(p) not in ("dsl", "extra")))
    return dirs


def load_plans(dirs):
    plans = []
    for d in dirs:
        files = sorted(glob.glob(os.path.join(d, "**", "*.json"), recursive=True),
                       key=lambda p: os.path.relpath(p, d))
        for f in files:
            try:
                with open(f) as fh:
                    plans.append(Plan(f, json.load(fh)))
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                continue  # planccl refuses it too; its calls go to the next match or to NCCL
    return plans


class Table:
    def __init__(self, plans):
        self.plans = plans

    def has_shape(self, world, rpn):
        # A communicator with no plan for its shape is pass-through (README "What runs where").
        return any(p.n_gpus == world and p.rpn == rpn for p in self.plans)

    def select(self, coll, world, rpn, inplace, nbytes):
        best = None
        for p in self.plans:
            if p.coll != coll or p.n_gpus != world or p.rpn != rpn or not p.place_ok(inplace):
                continue
            if not p.runnable(nbytes):
                continue
            if best is None or p.priority > best.priority:
                best = p
            elif p.priority == best.priority and p.max - p.min < best.max - best.min:
                best = p
        return best

    def predict(self, coll, world, rpn, inplace, count, elem, op="sum", root=0):
        """("plan", name) | ("nccl", why) | ("maybe", name); count is NCCL's count."""
        if coll not in PLANNED_COLLS:
            return ("nccl", "collective not planned by planccl")
        if count == 0:
            return ("none", "count 0")
        if not self.has_shape(world, rpn):
            return ("nccl", "pass-through communicator")
        if coll in ("AllReduce", "Reduce", "ReduceScatter") and op not in KERNEL_OPS:
            return ("nccl", "PreMulSum op")
        if coll in ("Broadcast", "Reduce") and root != 0:
            return ("nccl", "root is not 0")
        nbytes = count * elem * (world if coll in ("AllGather", "ReduceScatter") else 1)
        p = self.select(coll, world, rpn, inplace, nbytes)
        if p is None:
            return ("nccl", "no plan for this size")
        if coll in ("AllReduce", "Reduce", "ReduceScatter") and p.reduce_ops:
            if ("sum" if op == "avg" else op) not in p.reduce_ops:
                return ("nccl", "the plan names another reduce_op")
        return ("maybe" if p.uncertain else "plan", p.name)

    def sizes(self, coll, world, rpn, inplace, unit, limit=8 << 20):
        """Message bytes worth testing (multiples of unit, the bytes one element adds to the
        message): both ends of every plan's range, one element past its end, and sizes that no
        plan takes by size or by alignment. The prediction, not this list, says which is which."""
        out = {unit, 3 * unit, 4096 + unit, 1 << 20, 4 << 20}
        for p in self.plans:
            if p.coll != coll or p.n_gpus != world or p.rpn != rpn or not p.place_ok(inplace):
                continue
            if p.uncertain or p.min > limit:
                continue
            lo = -(-p.min // unit) * unit
            hi = min(p.max, limit) // unit * unit
            out.update((lo, hi, hi + unit))
        return sorted(b for b in out if b > 0 and b % unit == 0 and b <= limit)


# ---- PLANCCL_STATS=1 output (shim/dispatch/stats.c) ----
_HEAD = re.compile(r"^planccl stats: comm (\S+) rank (\d+) of (\d+), device (-?\d+), "
                   r"(planned|pass-through)(?:: (.*))?$")
_ROW = re.compile(r"^planccl stats: (\S+)\s+(.+?)\s+(\d+)\s+(\d+)\s*$")
_SUM = re.compile(r"^planccl stats: rank (\d+): (\d+) of (\d+) calls ran on plans\s*$")


def parse_stats(text):
    """One dict per communicator block: comm, rank, nranks, mode, why, rows [(coll, path, calls,
    bytes)], planned, total."""
    blocks, cur = [], None
    for line in text.splitlines():
        line = line.rstrip("\r\n")
        i = line.find("planccl stats: ")
        if i < 0:
            continue
        line = line[i:]
        m = _HEAD.match(line)
        if m:
            cur = {"comm": m.group(1), "rank": int(m.group(2)), "nranks": int(m.group(3)),
                   "mode": m.group(5), "why": m.group(6) or "", "rows": [], "planned": None,
                   "total": None}
            blocks.append(cur)
            continue
        if cur is None:
            continue
        m = _SUM.match(line)
        if m:
            cur["planned"], cur["total"] = int(m.group(2)), int(m.group(3))
            continue
        m = _ROW.match(line)
        if m and m.group(1) != "collective":
            cur["rows"].append((m.group(1), m.group(2).strip(), int(m.group(3)), int(m.group(4))))
    return blocks


def summarize(blocks):
    """{coll: {"plan_calls", "plan_bytes", "nccl_calls", "calls", "paths": {path: calls}}}."""
    s = {}
    for b in blocks:
        for coll, path, calls, nbytes in b["rows"]:
            e = s.setdefault(coll, {"plan_calls": 0, "plan_bytes": 0, "nccl_calls": 0, "calls": 0,
                                    "paths": {}})
            e["calls"] += calls
            e["paths"][path] = e["paths"].get(path, 0) + calls
            if path.startswith("plan "):
                e["plan_calls"] += calls
                e["plan_bytes"] += nbytes
            elif path.startswith("nccl"):
                e["nccl_calls"] += calls
    return s


def format_stats(blocks_spec):
    """planccl's stats text for [(rank, nranks, mode, rows)]; the self-test and the gloo dry run
    feed it to parse_stats, so the parser is checked against the C format strings."""
    out = []
    for rank, nranks, mode, rows in blocks_spec:
        out.append("planccl stats: comm 0x5555deadbeef rank %d of %d, device %d, %s" %
                   (rank, nranks, rank, mode))
        out.append("planccl stats: %-14s %-48s %12s %16s" % ("collective", "path", "calls",
                                                              "bytes"))
        planned = total = 0
        for coll, path, calls, nbytes in rows:
            out.append("planccl stats: %-14s %-48s %12d %16d" % (coll, path, calls, nbytes))
            total += calls
            planned += calls if path.startswith("plan ") else 0
        out.append("planccl stats: rank %d: %d of %d calls ran on plans" % (rank, planned, total))
    return "\n".join(out) + "\n"


class Expect:
    """The calls one communicator (one PyTorch group) was given, with what planccl should do."""

    def __init__(self, name, table, world, rpn):
        self.name, self.table, self.world, self.rpn = name, table, world, rpn
        self.calls = []      # (coll, kind, plan-or-why, bytes)
        self.lenient = {}    # coll -> minimum planned calls (library-internal calls, e.g. DDP)
        self.free = set()    # collectives whose forwarded count PyTorch decides (alltoall, p2p)
        self.ignore = set()  # collectives only PyTorch itself calls here (DDP's broadcasts)

    def call(self, coll, count, elem, inplace, op="sum", root=0):
        kind, what = self.table.predict(coll, self.world, self.rpn, inplace, count, elem, op, root)
        nbytes = count * elem * (self.world if coll in ("AllGather", "ReduceScatter") else 1)
        self.calls.append((coll, kind, what, nbytes))
        return kind

    def expected(self):
        e = {}
        for coll, kind, what, nbytes in self.calls:
            x = e.setdefault(coll, {"plan_calls": 0, "plan_bytes": 0, "calls": 0, "maybe": 0,
                                    "maybe_bytes": 0})
            x["calls"] += kind != "none"
            if kind == "plan":
                x["plan_calls"] += 1
                x["plan_bytes"] += nbytes
            elif kind == "maybe":
                x["maybe"] += 1
                x["maybe_bytes"] += nbytes
        return e

    def check(self, got):
        """Problems (strings) between the expectation and summarize() of this group's blocks."""
        bad = []
        exp = self.expected()
        for coll in sorted(set(exp) | set(got) | set(self.lenient)):
            if coll in self.ignore:
                continue
            x = exp.get(coll, {"plan_calls": 0, "plan_bytes": 0, "calls": 0, "maybe": 0,
                               "maybe_bytes": 0})
            g = got.get(coll, {"plan_calls": 0, "plan_bytes": 0, "nccl_calls": 0, "calls": 0,
                               "paths": {}})
            if coll in self.lenient:
                want = self.lenient[coll]
                if want > 0 and g["plan_calls"] < want:
                    bad.append("%s: %d calls ran on plans, expected at least %d (paths %s)" %
                               (coll, g["plan_calls"], want, g["paths"]))
                if want == 0 and g["plan_calls"] > x["plan_calls"] + x["maybe"]:
                    bad.append("%s: %d calls ran on plans, expected none" % (coll, g["plan_calls"]))
                continue
            lo, hi = x["plan_calls"], x["plan_calls"] + x["maybe"]
            if not lo <= g["plan_calls"] <= hi:
                bad.append("%s: %d calls ran on plans, expected %s (paths %s)" %
                           (coll, g["plan_calls"], lo if lo == hi else "%d..%d" % (lo, hi),
                            g["paths"]))
            elif x["maybe"] == 0 and g["plan_bytes"] != x["plan_bytes"]:
                bad.append("%s: %d bytes ran on plans, expected %d" % (coll, g["plan_bytes"],
                                                                        x["plan_bytes"]))
            if coll not in self.free and g["calls"] < x["calls"]:
                bad.append("%s: planccl saw %d calls, the test made %d" % (coll, g["calls"],
                                                                           x["calls"]))
        return bad


class StderrTee:
    """fd 2 into a pipe that a thread copies to the real stderr and keeps, so a rank can read the
    stats lines planccl's C code prints at communicator destroy (unbuffered fprintf(stderr))."""

    def __init__(self):
        self.saved = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
        self.r = r
        self.buf = []
        self.lock = threading.Lock()
        self.pos = 0
        self.t = threading.Thread(target=self._pump, daemon=True)
        self.t.start()

    def _pump(self):
        while True:
            try:
                data = os.read(self.r, 65536)
            except OSError:
                return
            if not data:
                return
            text = data.decode("utf-8", "replace")
            shown = "".join(ln for ln in text.splitlines(True) if "@@pcl-tee-" not in ln)
            if shown:
                os.write(self.saved, shown.encode())
            with self.lock:
                self.buf.append(text)

    def take(self, timeout=10.0):
        """Everything written since the last take, up to a marker written now."""
        marker = "@@pcl-tee-%d-%f@@" % (os.getpid(), time.time())
        os.write(2, (marker + "\n").encode())
        end = time.time() + timeout
        while True:
            with self.lock:
                text = "".join(self.buf)
            i = text.find(marker, self.pos)
            if i >= 0 or time.time() > end:
                break
            time.sleep(0.005)
        if i < 0:
            i = len(text)
        out = text[self.pos:i]
        self.pos = i + len(marker) + 1 if i < len(text) else i
        return out

    def close(self):
        os.dup2(self.saved, 2)  # the pipe's last writer goes: the pump sees EOF
        self.t.join(timeout=5)


if __name__ == "__main__":
    # Self-test without a GPU: the README's sample lines parse, format_stats round-trips, and the
    # table of the given prefix (argv[1]) says what runs on plans at 1, 2, 4 and 8 ranks.
    import sys
    sample = """planccl stats: comm 0x7f00 rank 0 of 2, device 0, planned
planccl stats: collective     path                                                    calls            bytes
planccl stats: AllReduce      nccl (no plan for this size)                              19         20185112
planccl stats: AllReduce      plan allreduce_2gpu_ll1_inplace                           19           104528
planccl stats: rank 0: 29 of 62 calls ran on plans
host:1:2 [0] PLANCCL INFO x planccl stats: comm 0x7f01 rank 1 of 1, device 0, pass-through: no plan for 1 ranks
planccl stats: Send           nccl (collective not planned by planccl)                   3               48
planccl stats: rank 1: 0 of 3 calls ran on plans
"""
    b = parse_stats(sample)
    assert len(b) == 2 and b[0]["planned"] == 29 and b[1]["mode"] == "pass-through", b
    s = summarize(b)
    assert s["AllReduce"]["plan_calls"] == 19 and s["AllReduce"]["nccl_calls"] == 19, s
    assert s["AllReduce"]["plan_bytes"] == 104528 and s["Send"]["calls"] == 3, s
    rows = [("AllGather", "plan allgather_2gpu_ll_outofplace", 5, 640),
            ("AllReduce", "nccl (PreMulSum op)", 2, 64)]
    b2 = parse_stats(format_stats([(1, 2, "planned", rows)]))
    assert [r for r in b2[0]["rows"]] == rows and b2[0]["planned"] == 5, b2
    t = Table(load_plans(plan_dirs(sys.argv[1] if len(sys.argv) > 1 else "")))
    print("plans read: %d" % len(t.plans))
    for w in (1, 2, 4, 8):
        for coll in PLANNED_COLLS:
            for inplace in (True, False):
                on = [b for b in t.sizes(coll, w, w, inplace, 4)
                      if t.predict(coll, w, w, inplace, b // 4 // (w if coll in ("AllGather",
                      "ReduceScatter") else 1), 4)[0] == "plan"]
                if on:
                    print("  %d ranks %-13s %-11s planned at %s bytes (of the sizes tested)" %
                          (w, coll, "in-place" if inplace else "out-of-place", on))
    print("pcl_expect self-test: ok")
