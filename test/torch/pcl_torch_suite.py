# SPDX-License-Identifier: MIT
# PyTorch end to end through planccl (run.sh starts it under torchrun with libplanccl.so preloaded):
# every rank checks each collective's result and, from PLANCCL_STATS=1, that planned calls ran on plans.
import argparse
import gc
import json
import os
import sys
import time
import traceback

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts: DDP bitwise
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcl_expect as pe  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL = int(os.environ.get("LOCAL_RANK", str(RANK)))
LOCAL_WORLD = int(os.environ.get("LOCAL_WORLD_SIZE", str(WORLD)))


def gpu_index():
    """The GPU of this rank: LOCAL_RANK modulo the GPUs present, so that several ranks may share
    one GPU (under the CUDA MPS daemon, with an NCCL that accepts several ranks per GPU)."""
    import torch
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return LOCAL % n if n > 0 else 0


class Skip(Exception):
    pass


def log(msg):
    print("[rank %d] %s" % (RANK, msg), flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Ctx:
    """State shared by the tests: backend, device, plan table, stats capture, failures."""

    def __init__(self, a):
        self.a = a
        self.nccl = a.backend == "nccl"
        self.dev = torch.device("cuda", gpu_index()) if self.nccl else torch.device("cpu")
        self.planccl = False
        self.tee = None
        self.table = pe.Table(pe.load_plans(pe.plan_dirs(a.prefix)))
        self.failures = []
        self.notes = []
        self.pending = []       # Expect of groups destroyed without their stats showing up yet
        self.strict = None      # collectives checked exactly (None: all)
        self.fake = a.fake_stats

    # ---- groups, each its own communicator so stats are per test ----
    def group(self, name, ranks=None, **kw):
        ranks = list(range(WORLD)) if ranks is None else ranks
        g = dist.new_group(ranks, **kw)
        ex = pe.Expect(name, self.table, len(ranks), min(len(ranks), LOCAL_WORLD))
        return g, ex

    def finish(self, g, ex, member=True):
        """Destroy g and compare its stats with ex (ex None: a group this rank is not in)."""
        if g is not None and g != dist.GroupMember.NON_GROUP_MEMBER:
            if self.nccl:
                torch.cuda.synchronize()
            dist.destroy_process_group(g)
        del g
        gc.collect()
        if ex is not None and member:
            self.verify([ex])

    def verify(self, exs):
        if not self.want_stats():
            return
        if self.fake:
            text = fake_stats_text(exs)
        else:
            text = self.tee.take()
        blocks = pe.parse_stats(text)
        if not blocks and not self.final:
            self.pending.extend(exs)
            self.notes.append("stats of %s did not appear at its destroy; checked at the end" %
                              ",".join(e.name for e in exs))
            return
        exs = self.pending + exs
        self.pending = []
        if not blocks:
            self.failures.append("%s: no planccl stats printed at destroy (PLANCCL_STATS=1 unset, "
                                 "or PyTorch never destroyed the communicator)" %
                                 ",".join(e.name for e in exs))
            return
        merged = pe.Expect("+".join(e.name for e in exs), self.table, exs[0].world, exs[0].rpn)
        for e in exs:
            merged.calls += e.calls
            for k, v in e.lenient.items():
                merged.lenient[k] = merged.lenient.get(k, 0) + v
            merged.free |= e.free
            merged.ignore |= e.ignore
        if self.strict is not None:
            for coll in pe.PLANNED_COLLS:
                if coll not in self.strict:
                    merged.lenient.setdefault(coll, 1 if merged.expected().get(coll, {}).get(
                        "plan_calls") else 0)
        got = pe.summarize(blocks)
        bad = merged.check(got)
        modes = sorted(set("%s(%d ranks)" % (b["mode"], b["nranks"]) for b in blocks))
        planned = sum(v["plan_calls"] for v in got.values())
        total = sum(v["calls"] for v in got.values())
        log("stats %s: %d comm(s) %s, %d of %d calls on plans%s" %
            (merged.name, len(blocks), " ".join(modes), planned, total,
             "" if not bad else ": MISMATCH"))
        for b in bad:
            self.failures.append("stats %s: %s" % (merged.name, b))

    def want_stats(self):
        return self.fake or (self.planccl and os.environ.get("PLANCCL_STATS", "0") not in
                             ("0", "", "false", "no", "off"))

    final = False


def fake_stats_text(exs):
    """planccl's table as the prediction says it would print (gloo dry run: checks the parser and
    the bookkeeping without a planccl)."""
    rows = {}
    for e in exs:
        for coll, kind, what, nbytes in e.calls:
            if kind == "none":
                continue
            path = "plan " + what if kind in ("plan", "maybe") else "nccl (%s)" % what
            c, b = rows.get((coll, path), (0, 0))
            rows[(coll, path)] = (c + 1, b + nbytes)
        for coll, n in e.lenient.items():
            if n:
                c, b = rows.get((coll, "plan fake_lenient"), (0, 0))
                rows[(coll, "plan fake_lenient")] = (c + n, b)
    spec = [(RANK, exs[0].world, "planned", [(c, p, n, b) for (c, p), (n, b) in sorted(rows.items())])]
    return pe.format_stats(spec)


# ---- dtypes and values ----
# (torch dtype, NCCL element bytes, NCCL elements per torch element): what PyTorch hands NCCL.
DTYPES = [
    ("float32", 4, 1), ("float64", 8, 1), ("float16", 2, 1), ("bfloat16", 2, 1),
    ("int8", 1, 1), ("uint8", 1, 1), ("int32", 4, 1), ("int64", 8, 1), ("bool", 1, 1),
    ("uint16", 2, 1), ("uint32", 4, 1), ("uint64", 8, 1),
    ("float8_e4m3fn", 1, 1), ("float8_e5m2", 1, 1),
    ("complex64", 4, 2), ("complex128", 8, 2),
]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM"]
# What PyTorch has always sent to NCCL: a refusal of these is a failure, not a skip.
_ALL = ("SUM", "PRODUCT", "MIN", "MAX", "AVG")
MUST_WORK = {"float32": _ALL + ("PREMUL_SUM",), "float64": _ALL + ("PREMUL_SUM",),
             "float16": _ALL + ("PREMUL_SUM",), "bfloat16": _ALL + ("PREMUL_SUM",),
             "int8": _ALL, "uint8": _ALL, "int32": _ALL, "int64": _ALL,
             "bool": ("SUM", "PRODUCT", "MIN", "MAX"), "complex64": ("SUM", "AVG")}


def tdtype(name):
    return getattr(torch, name, None)


def is_float(dt):
    return dt.is_floating_point


def make(dt, op, count, r, dev):
    """Rank r's input: small values whose reduction is exact in every dtype (so results compare
    bitwise at any world size up to 8), built in float64/int64 and cast."""
    i = torch.arange(count, device=dev, dtype=torch.int64)
    if dt == torch.bool:
        return ((i + r) % 3 == 0)
    fp8 = dt in (tdtype("float8_e4m3fn"), tdtype("float8_e5m2"))
    if op == "PRODUCT":
        v = 1 + (i + r) % 2
    elif fp8 and op != "AVG":
        v = (i % 2) + (r % 2)  # fp8 holds every sum of these exactly
    elif op == "AVG":
        # Sum-then-divide and divide-then-sum agree, and sums fit int8.
        v = WORLD_OF[0] * ((i % 2) + (r % 2))
    else:
        v = (i % 7) + r
    if dt.is_complex:
        return torch.complex(v.double(), (v % 3).double()).to(dt)
    return v.to(torch.float64).to(dt) if is_float(dt) else v.to(dt)


WORLD_OF = [WORLD]  # the group size the AVG values are built for


def expect(dt, op, count, n, dev, factor=0.5):
    xs = [make(dt, op, count, r, dev) for r in range(n)]
    if dt == torch.bool:
        stack = torch.stack(xs)
        if op in ("SUM", "MAX"):
            return stack.any(0)
        return stack.all(0)  # PRODUCT and MIN: NCCL's Min on uint8
    wide = torch.complex128 if dt.is_complex else (torch.float64 if is_float(dt) else torch.int64)
    st = torch.stack([x.to(wide) for x in xs])
    if op == "SUM":
        out = st.sum(0)
    elif op == "PRODUCT":
        out = st.prod(0)
    elif op == "MIN":
        out = st.min(0).values
    elif op == "MAX":
        out = st.max(0).values
    elif op == "AVG":
        out = st.sum(0) / n if (is_float(dt) or dt.is_complex) else torch.div(st.sum(0), n,
                                                                               rounding_mode="trunc")
    else:
        out = (st * factor).sum(0)
    return out.to(dt)


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype in (tdtype("float8_e4m3fn"), tdtype("float8_e5m2")):
        return torch.equal(a.float(), b.float())
    if a.dtype in (tdtype("uint16"), tdtype("uint32"), tdtype("uint64")):
        return torch.equal(a.to(torch.int64), b.to(torch.int64))
    return torch.equal(a, b)


def reduce_op(op, dev, factor=0.5, tensor_factor=False):
    if op == "PREMUL_SUM":
        # a tensor factor must have the input's dtype (PyTorch passes it as ncclScalarDevice)
        f = torch.tensor([factor], device=dev, dtype=tensor_factor) if tensor_factor else factor
        return dist._make_nccl_premul_sum(f)
    return getattr(dist.ReduceOp, op)


def premul_unchecked(c, world):
    """PREMUL_SUM at world size 1 is called but not value-checked: PyTorch 2.11 with the real
    NCCL 2.28.9 returns zeros there without planccl too (one H200, 2026-12-01), and planccl
    forwards every call of a one-rank communicator, so there is nothing of planccl's to check."""
    if world != 1 or not c.nccl:
        return False
    note = "PREMUL_SUM at world size 1 not value-checked (the real NCCL returns zeros there too)"
    if note not in c.notes:
        c.notes.append(note)
    return True


def refused_by_torch(e):
    """A refusal PyTorch makes before reaching NCCL (dtype/op it does not send), not a failure in
    the library underneath, which PyTorch raises as DistBackendError."""
    if isinstance(e, getattr(dist, "DistBackendError", ())):
        return False
    return isinstance(e, (RuntimeError, ValueError, TypeError, NotImplementedError))


def refused_how(e):
    """Who refused a call: "" for PyTorch itself (refused_by_torch), " (by the library)" for the
    NCCL API's own ncclInvalidArgument (a dtype/op pair it does not reduce, e.g. the real NCCL
    2.28.9 with AVG on float8, raised as DistBackendError), None for a failure."""
    if refused_by_torch(e):
        return ""
    if isinstance(e, getattr(dist, "DistBackendError", ())) and "invalid argument" in str(e):
        return " (by the library)"
    return None


# ---- the tests ----
def t_basic(c):
    """A few calls on the default group (eager, device_id): proves the path before the rest."""
    dev = c.dev
    for count in (1024, 1 << 20):
        x = torch.full((count,), float(RANK + 1), device=dev)
        dist.all_reduce(x)
        check(torch.all(x == WORLD * (WORLD + 1) / 2).item(), "all_reduce sum on the default group")
        c.default_ex.call("AllReduce", count, 4, True)
    part = torch.full((256,), float(RANK), device=dev)
    out = torch.empty(WORLD * 256, device=dev)
    dist.all_gather_into_tensor(out, part)
    check(torch.equal(out, torch.arange(WORLD, device=dev).float().repeat_interleave(256)),
          "all_gather_into_tensor on the default group")
    c.default_ex.call("AllGather", 256, 4, False)
    if c.nccl:
        pg = dist.distributed_c10d._get_default_group()
        bound = getattr(pg, "bound_device_id", None)
        check(bound is not None and bound.index == gpu_index(),
              "default group not bound to its device (device_id ignored: no ncclCommSplit)")


def t_allreduce(c):
    g, ex = c.group("all_reduce")
    n, dev = ex.world, c.dev
    WORLD_OF[0] = n
    done, refused = [], set()
    for name, elem, per in DTYPES:
        dt = tdtype(name)
        if dt is None:
            continue
        for op in OPS:
            if op == "PREMUL_SUM" and not (is_float(dt) and not name.startswith("float8")):
                continue
            if op == "AVG" and dt == torch.bool:
                continue  # PyTorch refuses AVG on bool
            # Every plan boundary for float32/bfloat16 SUM (the user's case); a planned and an
            # NCCL size for the others, to keep the run short.
            full = op == "SUM" and name in ("float32", "bfloat16")
            sizes = c.table.sizes("AllReduce", n, ex.rpn, True, elem * per)
            if not full:
                planned = [b for b in sizes if c.table.predict("AllReduce", n, ex.rpn, True,
                                                               b // elem, elem)[0] == "plan"]
                sizes = sorted(set(planned[:1] + [3 * elem * per, 1 << 20]))
            for nbytes in sizes:
                count = nbytes // (elem * per)
                x = make(dt, op, count, RANK % n, dev).clone()
                try:
                    dist.all_reduce(x, op=reduce_op(op, dev), group=g)
                except Exception as e:  # noqa: BLE001
                    must = c.nccl and name in MUST_WORK and op in MUST_WORK[name]
                    by = refused_how(e)
                    if by is not None and not must and not done_with(done, name, op):
                        refused.add("%s/%s%s" % (name, op, by))
                        break
                    raise RuntimeError("all_reduce %s %s %d elements: %s" %
                                       (name, op, count, str(e).splitlines()[0])) from e
                ex.call("AllReduce", count * per, elem, True,
                        op="premulsum" if op == "PREMUL_SUM" else op_name(op))
                want = expect(dt, op, count, n, dev)
                if op == "PREMUL_SUM" and premul_unchecked(c, n):
                    continue
                check(same(x, want), "all_reduce %s %s %d elements: got %s want %s" %
                      (name, op, count, x[:8].tolist(), want[:8].tolist()))
                done.append((name, op))
        # PREMUL_SUM with a tensor factor (PyTorch keeps it on the device)
    x = make(torch.float32, "PREMUL_SUM", 4096, RANK % n, dev)
    if c.nccl:
        try:
            dist.all_reduce(x, op=reduce_op("PREMUL_SUM", dev, tensor_factor=torch.float32),
                            group=g)
        except Exception as e:  # noqa: BLE001
            raise RuntimeError("all_reduce float32 PREMUL_SUM (tensor factor) 4096 elements: %s" %
                               str(e).splitlines()[0]) from e
        ex.call("AllReduce", 4096, 4, True, op="premulsum")
        if not premul_unchecked(c, n):
            check(same(x, expect(torch.float32, "PREMUL_SUM", 4096, n, dev)),
                  "premul_sum tensor factor")
    log("all_reduce: %d (dtype, op, size) cases; torch refused %s" %
        (len(done), ", ".join(sorted(refused)) or "none"))
    c.finish(g, ex)


def done_with(done, name, op):
    return (name, op) in done


def op_name(op):
    return {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "AVG": "avg"}[op]


def t_allgather(c):
    g, ex = c.group("all_gather")
    n, dev, r = ex.world, c.dev, RANK % ex.world
    for name, elem in (("float32", 4), ("bfloat16", 2), ("int8", 1), ("int64", 8)):
        dt = tdtype(name)
        for inplace in (False, True):
            for nbytes in c.table.sizes("AllGather", n, ex.rpn, inplace, elem * n):
                count = nbytes // (elem * n)
                part = make(dt, "SUM", count, r, dev)
                want = torch.cat([make(dt, "SUM", count, q, dev) for q in range(n)])
                out = torch.empty(n * count, device=dev, dtype=dt)
                if inplace:  # NCCL's in-place: the input is this rank's slice of the output
                    out[r * count:(r + 1) * count].copy_(part)
                    dist.all_gather_into_tensor(out, out[r * count:(r + 1) * count], group=g)
                else:
                    dist.all_gather_into_tensor(out, part, group=g)
                ex.call("AllGather", count, elem, inplace)
                check(same(out, want), "all_gather_into_tensor %s %d inplace=%d" %
                      (name, count, inplace))
        # the list form: PyTorch gathers into a flat buffer, then copies out
        count = 1024
        outs = [torch.empty(count, device=dev, dtype=dt) for _ in range(n)]
        dist.all_gather(outs, make(dt, "SUM", count, r, dev), group=g)
        ex.call("AllGather", count, elem, False)
        for q in range(n):
            check(same(outs[q], make(dt, "SUM", count, q, dev)), "all_gather list %s" % name)
    # a (world, count) shaped output (NCCL accepts it; gloo wants a flat one)
    if not c.nccl:
        return c.finish(g, ex)
    out2 = torch.empty(n, 512, device=dev)
    dist.all_gather_into_tensor(out2, torch.full((512,), float(r), device=dev), group=g)
    ex.call("AllGather", 512, 4, False)
    check(torch.equal(out2, torch.arange(n, device=dev).float()[:, None].expand(n, 512)),
          "all_gather_into_tensor stacked")
    c.finish(g, ex)


def rs_call(c, ex, world, count, elem, inplace, op):
    """A reduce-scatter the stats must show, except at world size 1 through NCCL: PyTorch 2.11
    copies there without calling ncclReduceScatter (NCCL's own COLL log shows no call, one H200,
    2026-12-02), so planccl has nothing to count."""
    if world == 1 and c.nccl:
        note = "reduce_scatter at world size 1: PyTorch calls no ncclReduceScatter; not counted"
        if note not in c.notes:
            c.notes.append(note)
        return
    ex.call("ReduceScatter", count, elem, inplace, op=op)


def t_reducescatter(c):
    g, ex = c.group("reduce_scatter")
    n, dev, r = ex.world, c.dev, RANK % ex.world
    WORLD_OF[0] = n
    ops = ["SUM", "MAX", "MIN", "PRODUCT"] + (["AVG", "PREMUL_SUM"] if c.nccl else [])
    for name, elem in (("float32", 4), ("bfloat16", 2), ("int32", 4)):
        dt = tdtype(name)
        for op in ops:
            if op == "PREMUL_SUM" and not is_float(dt):
                continue
            for inplace in (False, True):
                sizes = c.table.sizes("ReduceScatter", n, ex.rpn, inplace, elem * n)
                if op != "SUM":
                    sizes = [s for s in sizes if s in (sizes[0], sizes[len(sizes) // 2], 1 << 20)]
                for nbytes in sizes:
                    count = nbytes // (elem * n)
                    full = make(dt, op, count * n, r, dev)
                    want = expect(dt, op, count * n, n, dev)[r * count:(r + 1) * count]
                    rop = reduce_op(op, dev)
                    try:
                        if inplace:
                            buf = full.clone()
                            dist.reduce_scatter_tensor(buf[r * count:(r + 1) * count], buf, op=rop,
                                                       group=g)
                            got = buf[r * count:(r + 1) * count]
                        else:
                            got = torch.empty(count, device=dev, dtype=dt)
                            dist.reduce_scatter_tensor(got, full, op=rop, group=g)
                    except Exception as e:  # noqa: BLE001
                        if not c.nccl and refused_by_torch(e):
                            raise Skip("reduce_scatter_tensor %s on %s: %s" % (op, c.a.backend, e))
                        raise
                    rs_call(c, ex, n, count, elem, inplace,
                            "premulsum" if op == "PREMUL_SUM" else op_name(op))
                    if op == "PREMUL_SUM" and premul_unchecked(c, n):
                        continue
                    check(same(got, want), "reduce_scatter_tensor %s %s %d inplace=%d" %
                          (name, op, count, inplace))
    count = 1024
    ins = [make(torch.float32, "SUM", count * n, r, dev)[q * count:(q + 1) * count]
           for q in range(n)]
    out = torch.empty(count, device=dev)
    dist.reduce_scatter(out, ins, group=g)
    rs_call(c, ex, n, count, 4, False, "sum")
    check(same(out, expect(torch.float32, "SUM", count * n, n, dev)[r * count:(r + 1) * count]),
          "reduce_scatter list")
    c.finish(g, ex)


def t_broadcast_reduce(c):
    g, ex = c.group("broadcast_reduce")
    n, dev, r = ex.world, c.dev, RANK % ex.world
    for root in range(n):
        groot = dist.get_global_rank(g, root) if WORLD > 1 else root
        for nbytes in c.table.sizes("Broadcast", n, ex.rpn, True, 4):
            count = nbytes // 4
            want = make(torch.float32, "SUM", count, 100 + root, dev)
            b = want.clone() if r == root else torch.zeros(count, device=dev)
            dist.broadcast(b, src=groot, group=g)
            ex.call("Broadcast", count, 4, True, root=root)
            check(torch.equal(b, want), "broadcast from root %d, %d elements" % (root, count))
        for op in ("SUM", "MAX"):
            for count in (1024, 1 << 18):
                x = make(torch.float32, op, count, r, dev)
                dist.reduce(x, dst=groot, op=getattr(dist.ReduceOp, op), group=g)
                ex.call("Reduce", count, 4, True, op=op_name(op), root=root)
                if r == root:
                    check(torch.equal(x, expect(torch.float32, op, count, n, dev)),
                          "reduce %s to root %d" % (op, root))
    c.finish(g, ex)


def t_alltoall(c):
    g, ex = c.group("all_to_all")
    ex.free |= {"AlltoAll", "Send", "Recv"}
    n, dev, r = ex.world, c.dev, RANK % ex.world
    for k in (4, 4096):
        a_in = torch.arange(n * k, device=dev, dtype=torch.float32) + 1000 * r
        a_out = torch.empty_like(a_in)
        dist.all_to_all_single(a_out, a_in, group=g)
        want = torch.cat([torch.arange(r * k, (r + 1) * k, device=dev, dtype=torch.float32) +
                          1000 * q for q in range(n)])
        check(torch.equal(a_out, want), "all_to_all_single equal split %d" % k)
    # uneven splits: rank r sends q+1 elements to rank q
    in_splits = [q + 1 for q in range(n)]
    out_splits = [r + 1] * n
    a_in = torch.cat([torch.full((q + 1,), float(r * 10 + q), device=dev) for q in range(n)])
    a_out = torch.empty(sum(out_splits), device=dev)
    dist.all_to_all_single(a_out, a_in, out_splits, in_splits, group=g)
    want = torch.cat([torch.full((r + 1,), float(q * 10 + r), device=dev) for q in range(n)])
    check(torch.equal(a_out, want), "all_to_all_single uneven")
    ins = [torch.full((8,), float(r * 10 + q), device=dev) for q in range(n)]
    outs = [torch.empty(8, device=dev) for _ in range(n)]
    try:
        dist.all_to_all(outs, ins, group=g)
        for q in range(n):
            check(torch.all(outs[q] == q * 10 + r).item(), "all_to_all list")
    except Exception as e:  # noqa: BLE001
        if c.nccl or not refused_by_torch(e):
            raise
        c.notes.append("all_to_all list: %s refuses it" % c.a.backend)
    c.finish(g, ex)


def t_p2p(c):
    if WORLD < 2:
        raise Skip("send/recv need 2 ranks")
    g, ex = c.group("p2p")
    ex.free |= {"Send", "Recv"}
    dev, nxt, prv = c.dev, (RANK + 1) % WORLD, (RANK - 1) % WORLD
    n = 1 << 16
    if RANK < 2:
        t = torch.full((n,), 7.0, device=dev) if RANK == 0 else torch.empty(n, device=dev)
        if RANK == 0:
            dist.send(t, dst=1, group=g)
        else:
            dist.recv(t, src=0, group=g)
            check(torch.all(t == 7.0).item(), "send/recv")
    s = torch.full((n,), float(RANK), device=dev)
    rr = torch.empty(n, device=dev)
    reqs = [dist.isend(s, nxt, group=g), dist.irecv(rr, prv, group=g)]
    for q in reqs:
        q.wait()
    check(torch.all(rr == prv).item(), "isend/irecv ring")
    for k in (16, 1 << 20):
        s = torch.full((k,), float(RANK * 10), device=dev)
        r1 = torch.empty(k, device=dev)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, nxt, group=g),
                                       dist.P2POp(dist.irecv, r1, prv, group=g)])
        for q in reqs:
            q.wait()
        check(torch.all(r1 == prv * 10).item(), "batch_isend_irecv %d" % k)
    c.finish(g, ex)


def t_async_barrier(c):
    g, ex = c.group("async_barrier")
    n, dev, r = ex.world, c.dev, RANK % ex.world
    works, wants = [], []
    for count in (256, 8192, 1 << 20):
        x = make(torch.float32, "SUM", count, r, dev)
        works.append((dist.all_reduce(x, group=g, async_op=True), x))
        wants.append(expect(torch.float32, "SUM", count, n, dev))
        ex.call("AllReduce", count, 4, True)
    out = torch.empty(n * 1024, device=dev)
    wag = dist.all_gather_into_tensor(out, make(torch.float32, "SUM", 1024, r, dev), group=g,
                                      async_op=True)
    ex.call("AllGather", 1024, 4, False)
    for (w, x), want in reversed(list(zip(works, wants))):
        w.wait()
        check(torch.equal(x, want), "async all_reduce %d" % x.numel())
    wag.wait()
    check(torch.equal(out, torch.cat([make(torch.float32, "SUM", 1024, q, dev) for q in range(n)])),
          "async all_gather_into_tensor")
    if c.nccl:
        dist.barrier(group=g, device_ids=[gpu_index()])
    dist.barrier(group=g)
    # barrier is a 1-element allreduce: below every plan's minimum, so it never counts as planned
    c.finish(g, ex)


def t_groups(c):
    """new_group on a subset, new_subgroups, split_group and a 1-rank group, each with a planned
    and an NCCL-sized all_reduce and an all_gather."""
    def exercise(g, ex, tag):
        n, r = ex.world, dist.get_rank(g)
        for count in (1024, 1 << 20):
            x = torch.full((count,), float(r + 1), device=c.dev)
            dist.all_reduce(x, group=g)
            ex.call("AllReduce", count, 4, True)
            check(torch.all(x == n * (n + 1) / 2).item(), "%s all_reduce" % tag)
        out = torch.empty(n * 512, device=c.dev)
        dist.all_gather_into_tensor(out, torch.full((512,), float(r), device=c.dev), group=g)
        ex.call("AllGather", 512, 4, False)
        check(torch.equal(out, torch.arange(n, device=c.dev).float().repeat_interleave(512)),
              "%s all_gather" % tag)

    evens = list(range(0, WORLD, 2))
    g, ex = c.group("new_group(evens)", evens)
    if RANK in evens:
        exercise(g, ex, "new_group evens")
    c.finish(g, ex, member=RANK in evens)

    solo, ex1 = c.group("new_group([0])", [0])
    if RANK == 0:
        exercise(solo, ex1, "1-rank group")
    c.finish(solo, ex1, member=RANK == 0)

    if WORLD >= 2 and WORLD % 2 == 0:
        sub, subs = dist.new_subgroups(group_size=WORLD // 2)
        ex2 = pe.Expect("new_subgroups", c.table, WORLD // 2, min(WORLD // 2, LOCAL_WORLD))
        exercise(sub, ex2, "new_subgroups")
        if c.nccl:
            torch.cuda.synchronize()
        for s in subs:
            if s is not None and s != dist.GroupMember.NON_GROUP_MEMBER:
                dist.destroy_process_group(s)
        del sub, subs
        gc.collect()
        c.verify([ex2])

    if hasattr(dist, "split_group") and c.nccl:
        half = WORLD // 2 if WORLD >= 2 else 1
        splits = [list(range(half)), list(range(half, WORLD))] if WORLD >= 2 else [[0]]
        mine = [s for s in splits if RANK in s][0]
        sg = dist.split_group(split_ranks=splits)
        ex3 = pe.Expect("split_group", c.table, len(mine), min(len(mine), LOCAL_WORLD))
        exercise(sg, ex3, "split_group")
        c.finish(sg, ex3)


def t_nonblocking(c):
    """A communicator created non-blocking (ncclCommInitRankConfig / split with blocking=0):
    PyTorch polls ncclCommGetAsyncError until planccl's setup is done."""
    if not c.nccl:
        raise Skip("NCCL options only")
    P = dist.ProcessGroupNCCL
    opts = P.Options()
    if not hasattr(opts, "config") or not hasattr(opts.config, "blocking"):
        raise Skip("this torch has no ProcessGroupNCCL.Options.config.blocking")
    opts.config.blocking = 0
    g, ex = c.group("nonblocking", pg_options=opts)
    for count in (2048, 1 << 20):
        x = torch.full((count,), float(RANK + 1), device=c.dev)
        dist.all_reduce(x, group=g)
        ex.call("AllReduce", count, 4, True)
        check(torch.all(x == WORLD * (WORLD + 1) / 2).item(), "nonblocking all_reduce")
    c.finish(g, ex)


def t_cuda_graph(c):
    if not c.nccl:
        raise Skip("CUDA graphs need CUDA")
    g, ex = c.group("cuda_graph")
    n, dev, r = ex.world, c.dev, RANK % ex.world
    sizes = [1024, 16384, 1 << 20]  # planned where a plan fits, NCCL's above
    ins = [torch.zeros(k, device=dev) for k in sizes]
    ag_in = torch.zeros(2048, device=dev)
    ag_out = torch.empty(n * 2048, device=dev)

    def step():
        for t in ins:
            dist.all_reduce(t, group=g)
            ex.call("AllReduce", t.numel(), 4, True)
        dist.all_gather_into_tensor(ag_out, ag_in, group=g)
        ex.call("AllGather", 2048, 4, False)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up, as PyTorch recommends before capture
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for it in range(3):
        for t in ins:
            t.copy_(make(torch.float32, "SUM", t.numel(), r + 10 * it, dev))
        ag_in.copy_(make(torch.float32, "SUM", 2048, r + 10 * it, dev))
        graph.replay()
        torch.cuda.synchronize()
        for t in ins:
            want = sum(make(torch.float32, "SUM", t.numel(), q + 10 * it, dev).double()
                       for q in range(n)).float()
            check(torch.equal(t, want), "graph replay %d all_reduce %d" % (it, t.numel()))
        want = torch.cat([make(torch.float32, "SUM", 2048, q + 10 * it, dev) for q in range(n)])
        check(torch.equal(ag_out, want), "graph replay %d all_gather_into_tensor" % it)
    del graph
    c.finish(g, ex)


class MLP(torch.nn.Module):
    # 17616 parameters: one fp32 bucket of 70464 bytes, a multiple of 16 inside the default
    # 2-rank plans (16 B - 128 KiB), so DDP's gradient all_reduce is planned at 2 ranks.
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                       torch.nn.Linear(128, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 16))

    def forward(self, x):
        return self.net(x)


def t_ddp(c):
    g, ex = c.group("ddp")
    dev, steps = c.dev, 20
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(1234)
        model = MLP().to(dev)
        nparam = sum(p.numel() for p in model.parameters())
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[gpu_index()] if c.nccl else None, process_group=g)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        gen = torch.Generator(device="cpu").manual_seed(99 + RANK)
        losses = []
        for _ in range(steps):
            x = torch.randn(32, 64, generator=gen).to(dev)
            y = torch.randn(32, 16, generator=gen).to(dev)
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if c.nccl:
            torch.cuda.synchronize()
    finally:
        torch.use_deterministic_algorithms(False)
    # DDP's own calls (parameter broadcast, shape checks, bucket rebuild) are PyTorch's business:
    # only the per-step gradient all_reduce is asserted, as a minimum.
    kind = c.table.predict("AllReduce", ex.world, ex.rpn, True, nparam, 4)[0]
    ex.lenient["AllReduce"] = steps if kind == "plan" else 0
    ex.ignore |= {"Broadcast", "AllGather", "Reduce", "ReduceScatter"}
    del ddp, model, opt
    tag = "planccl" if c.planccl else "ref"
    res = {"losses": [v.hex() for v in losses], "world": WORLD, "backend": c.a.backend}
    os.makedirs(c.a.results, exist_ok=True)
    with open(os.path.join(c.a.results, "ddp_%s_rank%d.json" % (tag, RANK)), "w") as f:
        json.dump(res, f)
    if c.a.ddp_reference:
        path = os.path.join(c.a.ddp_reference, "ddp_ref_rank%d.json" % RANK)
        with open(path) as f:
            ref = [float.fromhex(v) for v in json.load(f)["losses"]]
        if WORLD <= 2:
            # Two-rank sums are a+b in either order: IEEE addition commutes, so bitwise.
            check(ref == losses, "DDP losses differ from the run without planccl (bitwise at %d "
                  "ranks): %s vs %s" % (WORLD, losses[:4], ref[:4]))
            how = "bitwise"
        else:
            # More ranks: NCCL's ring and planccl's plan add in different orders.
            worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref))
            check(worst <= 1e-4, "DDP losses differ from the run without planccl by %.3g "
                  "(relative; tolerance 1e-4)" % worst)
            how = "within 1e-4 (max %.2g)" % worst
        log("ddp: %d steps, losses equal the run without planccl %s" % (steps, how))
    c.finish(g, ex)


def t_mem_registration(c):
    """User-buffer registration: tensors from PyTorch's NCCL MemPool (ncclMemAlloc) registered
    with register_mem_pool (ncclCommRegister; symm=True: ncclCommWindowRegister)."""
    if not c.nccl:
        raise Skip("NCCL only")
    if not hasattr(torch.cuda, "MemPool"):
        raise Skip("this torch has no torch.cuda.MemPool")
    g, ex = c.group("mem_registration")
    backend = g._get_backend(c.dev)
    try:
        has = hasattr(backend, "register_mem_pool") and hasattr(backend, "mem_allocator")
    except RuntimeError as e:
        # The property raises PyTorch's own refusal, before any NCCL call: PyTorch 2.11 says "NCCL
        # mem allocator is not supported in this NCCL version" without planccl too.
        c.finish(g, ex)
        raise Skip("this torch's NCCL mem allocator: %s" % e)
    if not has:
        c.finish(g, ex)
        raise Skip("this torch has no ProcessGroupNCCL.register_mem_pool")
    n = ex.world
    for symm in (False, True):
        pool = torch.cuda.MemPool(backend.mem_allocator)
        with torch.cuda.use_mem_pool(pool):
            small = torch.full((4096,), float(RANK + 1), device=c.dev)
            big = torch.full((1 << 20,), float(RANK + 1), device=c.dev)
        try:
            backend.register_mem_pool(pool, symm) if symm else backend.register_mem_pool(pool)
        except TypeError:
            if symm:
                del small, big, pool
                c.notes.append("register_mem_pool(symm=True) not in this torch")
                continue
            raise
        for t in (small, big):
            dist.all_reduce(t, group=g)
            ex.call("AllReduce", t.numel(), 4, True)
            check(torch.all(t == n * (n + 1) / 2).item(), "all_reduce on registered memory "
                  "(symm=%d)" % symm)
        torch.cuda.synchronize()
        backend.deregister_mem_pool(pool)
        del small, big, pool
    c.finish(g, ex)


def t_symm_mem(c):
    """torch symmetric memory (CUDA backend, peer mapping without multicast: run.sh sets
    TORCH_SYMM_MEM_DISABLE_MULTICAST=1): it must coexist with planccl; no NCCL call is asserted."""
    if not c.nccl:
        raise Skip("CUDA only")
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError:
        raise Skip("this torch has no torch.distributed._symmetric_memory")
    if WORLD < 2:
        raise Skip("needs 2 ranks")
    want = c.a.symm_backend
    try:
        symm_mem.set_backend(want)  # process-global, before the first allocation
    except Exception as e:  # noqa: BLE001
        raise Skip("symmetric-memory backend %s unavailable: %s" % (want, e))
    g, ex = c.group("symm_mem_" + want.lower())
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        try:
            symm_mem.enable_symm_mem_for_group(g.group_name)  # needed before 2.7, a no-op later
        except Exception:  # noqa: BLE001
            pass
    n = 4096
    t = symm_mem.empty(n, device=c.dev, dtype=torch.float32)
    t.fill_(float(RANK + 1))
    hdl = symm_mem.rendezvous(t, g)
    hdl.barrier()
    peer = (hdl.rank + 1) % hdl.world_size
    pt = hdl.get_buffer(peer, (n,), torch.float32)
    check(torch.all(pt == float(dist.get_global_rank(g, peer) + 1)).item(),
          "symmetric memory: peer buffer")
    hdl.barrier()
    if hasattr(torch.ops.symm_mem, "one_shot_all_reduce"):
        try:
            out = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", g.group_name)
            torch.cuda.synchronize()
            check(torch.all(out == WORLD * (WORLD + 1) / 2).item(),
                  "symm_mem one_shot_all_reduce")
        except (NotImplementedError, RuntimeError) as e:
            if "not" not in str(e).lower() or "support" not in str(e).lower():
                raise
            c.notes.append("one_shot_all_reduce on the %s backend: %s" % (want, str(e)[:120]))
    x = torch.full((2048,), 1.0, device=c.dev)
    dist.all_reduce(x, group=g)  # an ordinary planned call on the same group, after rendezvous
    ex.call("AllReduce", 2048, 4, True)
    check(torch.all(x == WORLD).item(), "all_reduce after symmetric memory")
    torch.cuda.synchronize()
    del hdl, pt, t
    c.finish(g, ex)


TESTS = [("basic", t_basic), ("all_reduce", t_allreduce), ("all_gather", t_allgather),
         ("reduce_scatter", t_reducescatter), ("broadcast_reduce", t_broadcast_reduce),
         ("all_to_all", t_alltoall), ("p2p", t_p2p), ("async_barrier", t_async_barrier),
         ("groups", t_groups), ("nonblocking", t_nonblocking), ("cuda_graph", t_cuda_graph),
         ("ddp", t_ddp), ("mem_registration", t_mem_registration), ("symm_mem", t_symm_mem)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=os.environ.get("PCL_TORCH_BACKEND", "nccl"),
                    choices=("nccl", "gloo"))
    ap.add_argument("--prefix", default=os.environ.get("PCL_PREFIX", ""),
                    help="install prefix whose share/planccl/plans the expectations read")
    ap.add_argument("--results", default=os.environ.get("PCL_TORCH_RESULTS", "/tmp/pcl_torch"))
    ap.add_argument("--only", default="", help="comma list of tests")
    ap.add_argument("--skip", default="", help="comma list of tests")
    ap.add_argument("--expect-planccl", type=int, default=-1,
                    help="1: fail unless libplanccl.so is loaded; 0: fail if it is")
    ap.add_argument("--ddp-reference", default="", help="dir with ddp_ref_rank<r>.json to match")
    ap.add_argument("--fake-stats", action="store_true",
                    help="dry run: feed predicted stats through the checker (no planccl)")
    ap.add_argument("--symm-backend", default="CUDA", choices=("CUDA", "NCCL", "NVSHMEM"),
                    help="torch symmetric-memory backend for the symm_mem test (NCCL: the "
                         "device-API user: ncclMemAlloc, window registration, peer pointers)")
    ap.add_argument("--lenient-stats", action="store_true",
                    help="check exactly only AllReduce (another NCCL backend, e.g. torchcomms)")
    a = ap.parse_args()
    c = Ctx(a)
    with open("/proc/self/maps") as f:
        c.planccl = "libplanccl.so" in f.read()
    if a.expect_planccl == 1 and not c.planccl:
        log("FAIL: libplanccl.so is not loaded (LD_PRELOAD missing?)")
        return 1
    if a.expect_planccl == 0 and c.planccl:
        log("FAIL: libplanccl.so is loaded in the reference run")
        return 1
    if a.lenient_stats:
        c.strict = {"AllReduce"}
    if c.want_stats() and not c.fake:
        c.tee = pe.StderrTee()
    if c.nccl:
        torch.cuda.set_device(gpu_index())
        # device_id: eager init; PyTorch then makes every new_group an ncclCommSplit of it.
        dist.init_process_group("nccl", device_id=c.dev)
    else:
        dist.init_process_group("gloo")
    c.default_ex = pe.Expect("default", c.table, WORLD, min(WORLD, LOCAL_WORLD))
    only = set(filter(None, a.only.split(",")))
    skip = set(filter(None, a.skip.split(",")))
    ran, skipped = [], []
    for name, fn in TESTS:
        if (only and name not in only) or name in skip:
            continue
        t0 = time.time()
        nfail = len(c.failures)
        try:
            fn(c)
            ok = len(c.failures) == nfail
            ran.append(name)
            log("%-16s %s (%.1f s)" % (name, "ok" if ok else "STATS MISMATCH", time.time() - t0))
        except Skip as e:
            skipped.append("%s (%s)" % (name, e))
            log("%-16s skipped: %s" % (name, e))
        except Exception as e:  # noqa: BLE001
            c.failures.append("%s: %s" % (name, e))
            log("%-16s FAILED: %s\n%s" % (name, e, traceback.format_exc()))
            if isinstance(e, getattr(dist, "DistBackendError", ())):
                break  # the communicators are gone; later tests would only hang
    if c.nccl:
        torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    gc.collect()
    c.final = True
    c.verify([c.default_ex])
    for n_ in c.notes:
        log("note: " + n_)
    if c.tee:
        c.tee.close()
    if c.failures:
        for f_ in c.failures:
            log("FAIL " + f_)
        log("%d failure(s); ran %s" % (len(c.failures), ",".join(ran)))
        return 1
    log("passed: %d tests (%s)%s; planccl %s, stats %s" %
        (len(ran), ",".join(ran), "; skipped " + "; ".join(skipped) if skipped else "",
         "loaded" if c.planccl else "not loaded",
         "checked" if c.want_stats() else "not checked"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
