# World-size-1 PREMUL_SUM probe: which (dtype, count, factor kind) calls fail or return wrong
# values, run with and without planccl preloaded.
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
    for n in (3, 1024, 262144):
        for kind in ("scalar", "tensor"):
            x = torch.arange(n, device=dev, dtype=torch.float32).remainder(8).to(dt)
            want = x * 0.5
            f = torch.tensor([0.5], device=dev, dtype=dt) if kind == "tensor" else 0.5
            try:
                dist.all_reduce(x, op=dist._make_nccl_premul_sum(f))
                torch.cuda.synchronize()
                ok = torch.equal(x.float(), want.float())
                print("PROBE %s %d %s: %s %s" % (dt, n, kind, "ok" if ok else "WRONG", x[:4].tolist()), flush=True)
            except Exception as e:
                print("PROBE %s %d %s: ERROR %s" % (dt, n, kind, str(e).splitlines()[0][:120]), flush=True)
x = torch.ones(4, device=dev); dist.all_reduce(x); torch.cuda.synchronize()
print("PROBE after: sum ok" if torch.equal(x, torch.ones(4, device=dev)) else "PROBE after: sum WRONG", flush=True)
dist.destroy_process_group()
