# SPDX-License-Identifier: MIT
# What a PyTorch user gains from planccl: tensor-parallel transformer decode (two all_reduces per
# layer) captured in CUDA graphs, tokens/s with and without libplanccl.so preloaded, alternating runs.
#   driver:  python3 bench/torch_tp_decode.py --nproc 2 [--prefix build/install] [--runs 5]
#            [--nccl /path/libnccl.so.2]
#   worker:  (started by the driver under torchrun) ... --worker --out FILE
import json
import os
import statistics
import sys
import tempfile
import time

from torch_bed import GUARDS, destroy_bounded, main, parser, planccl_loaded, torchrun


def worker(a):
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    gpu = a.backend == "nccl"

    def note(msg):  # progress in the run's log, so a run that hangs shows where
        print("[rank %d %.1fs] %s" % (rank, time.time() - t_start, msg), flush=True)

    t_start = time.time()
    if gpu:
        local %= max(1, torch.cuda.device_count())  # ranks may share a GPU (CUDA MPS)
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=dev)
        dtype = torch.bfloat16
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
        dtype = torch.float32  # gloo has no bf16 reductions on every build
    note("process group up")
    H, F, L = a.hidden, a.ffn, a.layers
    heads = a.heads
    assert H % heads == 0 and heads % world == 0 and F % world == 0
    hd, lh, lf = H // heads, heads // world, F // world
    # Made on the device (a CPU randn of ~1e9 weights would dominate each run); each rank its shard.
    g = torch.Generator(device=dev).manual_seed(1000 + rank)

    def w(*shape):
        return (torch.randn(*shape, generator=g, device=dev) * (shape[-1] ** -0.5)).to(dtype)

    # Megatron-style shards: QKV and gate/up column-parallel, out and down row-parallel, so each
    # layer ends its attention and its MLP with one all_reduce of [batch, hidden].
    layers = [dict(qkv=w(3 * lh * hd, H), o=w(H, lh * hd), gu=w(2 * lf, H), d=w(H, lf),
                   n1=torch.ones(H, device=dev, dtype=dtype), n2=torch.ones(H, device=dev,
                                                                            dtype=dtype))
              for _ in range(L)]
    planccl = planccl_loaded()

    def rms(x, wt):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + 1e-6)).to(dtype) * wt

    results = {}
    for B in a.batches:
        ctx = a.ctx
        kc = [torch.randn(B, lh, ctx, hd, generator=g, device=dev).to(dtype) for _ in range(L)]
        vc = [torch.randn(B, lh, ctx, hd, generator=g, device=dev).to(dtype) for _ in range(L)]
        pos = torch.zeros(1, dtype=torch.long, device=dev)
        x_in = (torch.randn(B, H, generator=torch.Generator().manual_seed(7)) * 0.1).to(dev, dtype)
        x_out = torch.empty_like(x_in)

        def step():
            x = x_in
            for li, p in enumerate(layers):
                h = rms(x, p["n1"])
                q, k, v = (h @ p["qkv"].t()).view(B, 3, lh, hd).unbind(1)
                # The new token's k/v go to slot pos of a fixed-size cache (graph-safe index).
                kc[li].index_copy_(2, pos, k.unsqueeze(2))
                vc[li].index_copy_(2, pos, v.unsqueeze(2))
                att = torch.nn.functional.scaled_dot_product_attention(
                    q.unsqueeze(2), kc[li], vc[li]).reshape(B, lh * hd)
                o = att @ p["o"].t()
                dist.all_reduce(o)
                x = x + o
                h = rms(x, p["n2"])
                gt, up = (h @ p["gu"].t()).chunk(2, -1)
                m = (torch.nn.functional.silu(gt) * up) @ p["d"].t()
                dist.all_reduce(m)
                x = x + m
            x_out.copy_(x)

        note("batch %d: eager warm-up" % B)
        if gpu:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            note("batch %d: capture" % B)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            run = graph.replay
        else:
            run = step
        note("batch %d: replays" % B)
        for _ in range(a.warmup):
            run()
        times = []
        for _ in range(a.reps):
            dist.barrier()
            if gpu:
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(a.steps):
                    run()
                e1.record()
                e1.synchronize()
                ms = e0.elapsed_time(e1)
            else:
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    run()
                ms = (time.perf_counter() - t0) * 1e3
            # every rank must have finished: the slowest rank sets the pace
            t = torch.tensor([ms], dtype=torch.float64, device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            times.append(t.item())
            note("batch %d: %.3f ms per step" % (B, t.item() / a.steps))
        best = statistics.median(times)
        chk = float(x_out.float().sum().item())
        results[str(B)] = {"tok_s": B * a.steps / (best / 1e3), "ms_per_step": best / a.steps,
                           "allreduce_bytes": B * H * x_in.element_size(), "checksum": chk}
        if gpu:
            del graph
        note("batch %d: done" % B)
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"planccl": planccl, "world": world, "results": results,
                       "torch": torch.__version__}, f)
    if gpu:
        torch.cuda.synchronize()
    note("results written; destroying the process group")
    destroy_bounded(dist, note=note)
    note("process group destroyed")


def driver(a):
    lib = os.path.join(a.prefix, "lib", "libplanccl.so")
    if not os.path.exists(lib) and a.backend == "nccl":
        sys.exit("no %s: build and install planccl first" % lib)
    env0 = dict(os.environ, **GUARDS)
    env0.setdefault("OMP_NUM_THREADS", "4")
    if a.nccl:  # a real NCCL for both sides (2.30+ lets ranks share a GPU under MPS)
        env0["PLANCCL_NCCL_LIB"] = a.nccl
        env0.setdefault("NCCL_MULTI_RANK_GPU_ENABLE", "1")
    tmp = tempfile.mkdtemp(prefix="pcl_tp_decode_")
    passthru = ["--hidden", str(a.hidden), "--ffn", str(a.ffn), "--layers", str(a.layers),
                "--heads", str(a.heads), "--ctx", str(a.ctx), "--steps", str(a.steps),
                "--reps", str(a.reps), "--warmup", str(a.warmup), "--backend", a.backend,
                "--batches"] + [str(b) for b in a.batches]
    runs = {"nccl": [], "planccl": []}
    for i in range(a.runs):
        # Alternate which goes first, so drift (clocks, temperature) hits both alike.
        order = ("nccl", "planccl") if i % 2 == 0 else ("planccl", "nccl")
        for who in order:
            env = dict(env0)
            env.pop("LD_PRELOAD", None)
            pre = [a.nccl] if a.nccl else []
            if who == "planccl":
                if a.backend != "nccl":
                    env["PCL_BENCH_FAKE"] = "1"  # gloo dry run: no planccl, same code path
                else:
                    pre.insert(0, lib)
                    env["PLANCCL_STATS"] = "1"
            if pre:
                env["LD_PRELOAD"] = ":".join(pre)
            out = os.path.join(tmp, "%s_%d.json" % (who, i))
            r, log = torchrun(__file__, a, env, out, passthru, "%s run %d" % (who, i))
            if a.backend == "nccl" and r["planccl"] != (who == "planccl"):
                sys.exit("%s run %d: libplanccl.so %s loaded" % (who, i,
                                                                 "not" if r["planccl"] else ""))
            runs[who].append(r["results"])
            if who == "planccl" and i == 0:
                stats = [ln for ln in log.splitlines() if "planccl stats:" in ln and
                         ("AllReduce" in ln or "calls ran on plans" in ln)]
                print("planccl run 0, rank 0 stats:\n  " + "\n  ".join(
                    [ln for ln in stats if "rank 0" in ln or "AllReduce" in ln][:12]))
            print("run %d %-7s %s" % (i, who, "  ".join(
                "B=%s %.0f tok/s" % (b, v["tok_s"]) for b, v in r["results"].items())), flush=True)
    print("\nTP=%d decode, %d layers, hidden %d, ffn %d, %s, ctx %d, CUDA graph%s; median of %d "
          "alternating runs (each the median of %d x %d steps)" %
          (a.nproc, a.layers, a.hidden, a.ffn, "bf16" if a.backend == "nccl" else "fp32 (gloo)",
           a.ctx, "" if a.backend == "nccl" else " (none: gloo)", a.runs, a.reps, a.steps))
    print("| batch | all_reduce bytes | NCCL tok/s | planccl tok/s | speedup | same output |")
    print("|---:|---:|---:|---:|---:|:---:|")
    table = []
    for b in a.batches:
        k = str(b)
        n = statistics.median(r[k]["tok_s"] for r in runs["nccl"])
        p = statistics.median(r[k]["tok_s"] for r in runs["planccl"])
        same = len({r[k]["checksum"] for r in runs["nccl"] + runs["planccl"]}) == 1
        table.append((b, n, p))
        print("| %d | %d | %.0f | %.0f | %.3f x | %s |" %
              (b, runs["nccl"][0][k]["allreduce_bytes"], n, p, p / n, "yes" if same else "no"))
    goal = all(p / n >= 1.3 for b, n, p in table if b in (1, 8)) and \
        all(p >= n * 0.99 for b, n, p in table)
    print("goal (>= 1.3 x at batch 1 and 8, never slower than 0.99 x): %s" %
          ("met" if goal else "NOT met"))
    with open(os.path.join(tmp, "table.json"), "w") as f:
        json.dump({"runs": runs, "table": table}, f)
    print("raw results: %s" % tmp)


if __name__ == "__main__":
    ap = parser()
    ap.add_argument("--prefix", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "build", "install"))
    ap.add_argument("--backend", default="nccl", choices=("nccl", "gloo"),
                    help="gloo: CPU dry run of the script itself (no planccl, no graphs)")
    ap.add_argument("--runs", type=int, default=5, help="alternating runs per library")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions inside a run")
    ap.add_argument("--steps", type=int, default=200, help="decode steps per repetition")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=1024, help="KV-cache length attended per step")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--nccl", default="",
                    help="a real libnccl.so.2 preloaded by both sides (NCCL alone, and planccl's "
                    "PLANCCL_NCCL_LIB); with NCCL 2.30+ under MPS, ranks share one GPU")
    main(ap, worker, driver)
