# SPDX-License-Identifier: MIT
# What a PyTorch user sees of each collective: torch.distributed all_reduce,
# all_gather_into_tensor and reduce_scatter_tensor, eager and captured in a CUDA graph, us per
# call, on NCCL alone and on one or more planccl installs preloaded over it, alternating runs.
#   driver:  python3 bench/torch_coll.py --nproc 2 --lib planccl=build/install [--lib old=DIR]
#            [--nccl /path/libnccl.so.2] [--extra] [--runs 3]
#   worker:  (started by the driver under torchrun) ... --worker --out FILE
# Bytes are the message as planccl's registry counts it: all_reduce the tensor, all_gather the
# whole output, reduce_scatter the whole input. Ranks may share a GPU (run the driver under
# scripts/mps_run.sh, which also lets NCCL >= 2.30 take several ranks on one GPU).
import json
import os
import statistics
import sys
import tempfile

from torch_bed import GUARDS, main, parser, planccl_loaded, torchrun

COLLS = ("all_reduce", "all_gather", "reduce_scatter")


def worker(a):
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank)) % max(1, torch.cuda.device_count())
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    planccl = planccl_loaded()

    def buffers(coll, nbytes):
        n = nbytes // 4
        if coll == "all_reduce":
            return torch.zeros(n, device=dev), None
        if coll == "all_gather":
            return torch.zeros(n // world, device=dev), torch.zeros(n, device=dev)
        return torch.zeros(n, device=dev), torch.zeros(n // world, device=dev)

    def call(coll, x, y):
        if coll == "all_reduce":
            dist.all_reduce(x)
        elif coll == "all_gather":
            dist.all_gather_into_tensor(y, x)
        else:
            dist.reduce_scatter_tensor(y, x)

    # Every rank's input is (rank + 1) * (1 + i % 7): each result element is known exactly.
    def fill(coll, x):
        i = torch.arange(x.numel(), device=dev, dtype=torch.float32)
        x.copy_((rank + 1) * (1 + i % 7))

    def check(coll, x, y, nbytes):
        n = nbytes // 4
        tot = world * (world + 1) / 2
        if coll == "all_reduce":
            i = torch.arange(n, device=dev, dtype=torch.float32)
            want, got = tot * (1 + i % 7), x
        elif coll == "all_gather":
            i = torch.arange(n // world, device=dev, dtype=torch.float32)
            want = torch.cat([(r + 1) * (1 + i % 7) for r in range(world)])
            got = y
        else:
            i = torch.arange(n, device=dev, dtype=torch.float32)[rank * (n // world):
                                                                 (rank + 1) * (n // world)]
            want, got = tot * (1 + i % 7), y
        if not torch.equal(got, want):
            raise SystemExit("rank %d: %s of %d bytes: wrong result" % (rank, coll, nbytes))

    def timed(fn, reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) * 1000.0 / reps

    results = {}
    for coll in a.colls:
        for nbytes in a.sizes:
            x, y = buffers(coll, nbytes)
            fill(coll, x)
            call(coll, x, y)
            torch.cuda.synchronize()
            check(coll, x, y, nbytes)
            x.zero_()
            for _ in range(a.warmup):
                call(coll, x, y)
            eager = timed(lambda: call(coll, x, y), a.calls)
            # The graph: a.calls calls captured once (warmed up on a side stream first, as
            # torch.cuda.graph asks), replayed a.replays times; then one more replay on a
            # checked input.
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    call(coll, x, y)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(a.calls):
                    call(coll, x, y)
            g.replay()
            graph = timed(g.replay, a.replays) / a.calls
            gc = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gc):
                call(coll, x, y)
            fill(coll, x)
            gc.replay()
            torch.cuda.synchronize()
            check(coll, x, y, nbytes)
            results["%s %d" % (coll, nbytes)] = {"eager": eager, "graph": graph}
            del g, gc
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"planccl": planccl, "results": results}, f)
    dist.destroy_process_group()


def driver(a):
    env0 = dict(os.environ, **GUARDS)
    env0.setdefault("OMP_NUM_THREADS", "2")
    if a.nccl:
        env0["PLANCCL_NCCL_LIB"] = a.nccl
    libs = [("nccl", None)]
    for spec in a.lib:
        name, _, prefix = spec.partition("=")
        lib = os.path.join(prefix, "lib", "libplanccl.so")
        if not os.path.exists(lib):
            sys.exit("no %s: build and install planccl there first" % lib)
        libs.append((name, prefix))
    tmp = tempfile.mkdtemp(prefix="pcl_torch_coll_")
    passthru = ["--calls", str(a.calls), "--replays", str(a.replays), "--warmup",
                str(a.warmup), "--colls"] + a.colls + ["--sizes"] + [str(s) for s in a.sizes]
    runs = {name: [] for name, _ in libs}
    for i in range(a.runs):
        # Rotate the order, so drift (clocks, temperature) falls on every library alike.
        for name, prefix in libs[i % len(libs):] + libs[:i % len(libs)]:
            env = dict(env0)
            env.pop("LD_PRELOAD", None)
            pre = [a.nccl] if a.nccl else []
            if prefix:
                pre.insert(0, os.path.join(prefix, "lib", "libplanccl.so"))
                env["PLANCCL_STATS"] = "1"
                if a.extra:
                    env["PLANCCL_PLAN_DIR"] = os.path.join(prefix, "share", "planccl",
                                                           "plans-extra")
            if pre:
                env["LD_PRELOAD"] = ":".join(pre)
            out = os.path.join(tmp, "%s_%d.json" % (name, i))
            r, log = torchrun(__file__, a, env, out, passthru, "%s run %d" % (name, i))
            if r["planccl"] != (prefix is not None):
                sys.exit("%s run %d: libplanccl.so %sloaded" % (name, i,
                                                              "not " if prefix else ""))
            runs[name].append(r["results"])
            if prefix and i < len(libs):
                print("%s, rank 0: %s" % (name, "; ".join(
                    ln.split("planccl stats:")[1].strip() for ln in log.splitlines()
                    if "planccl stats:" in ln and "rank 0" in ln and "plans" in ln)[:400]))
    names = [name for name, _ in libs]
    print("\ntorch.distributed, %d processes, float32, %d calls per graph x %d replays; us per "
          "call, median of %d alternating runs%s" %
          (a.nproc, a.calls, a.replays, a.runs, "; opt-in plans" if a.extra else ""))
    print("| collective | bytes | " + " | ".join("%s eager | %s graph" % (n, n) for n in names) +
          " |")
    print("|---|---:|" + "---:|" * (2 * len(names)))
    for key in runs["nccl"][0]:
        coll, nbytes = key.split()
        cells = []
        for n in names:
            for mode in ("eager", "graph"):
                cells.append("%.2f" % statistics.median(r[key][mode] for r in runs[n]))
        print("| %s | %s | %s |" % (coll, nbytes, " | ".join(cells)))
    with open(os.path.join(tmp, "runs.json"), "w") as f:
        json.dump(runs, f)
    print("raw results: %s" % tmp)


if __name__ == "__main__":
    ap = parser()
    ap.add_argument("--lib", action="append", default=[],
                    help="NAME=PREFIX of a planccl install (repeatable)")
    ap.add_argument("--nccl", default="", help="the real libnccl.so.2 (fallback and NCCL runs)")
    ap.add_argument("--extra", action="store_true", help="enable the opt-in plan set")
    ap.add_argument("--runs", type=int, default=3, help="alternating runs per library")
    ap.add_argument("--calls", type=int, default=50, help="calls timed eagerly and per graph")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--colls", nargs="+", default=list(COLLS), choices=COLLS)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 16384, 262144, 1048576])
    main(ap, worker, driver)
