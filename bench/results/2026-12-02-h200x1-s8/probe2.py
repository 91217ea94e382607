# World-size-1 probe 2: does PyTorch call ncclReduceScatter at world size 1 (run with
# NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL and count the lines), and is float8 AVG refused by NCCL?
import torch, torch.distributed as dist
dist.init_process_group("nccl")
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
x = torch.ones(1024, device=dev)
o = torch.empty(1024, device=dev)
for _ in range(3):
    dist.reduce_scatter_tensor(o, x)
print("PROBE2 reduce_scatter_tensor x3 done", flush=True)
for _ in range(2):
    dist.all_gather_into_tensor(o, x)
print("PROBE2 all_gather_into_tensor x2 done", flush=True)
for dt in ("float8_e4m3fn", "float8_e5m2"):
    t = torch.ones(3, device=dev).to(getattr(torch, dt))
    for op in ("AVG", "SUM"):
        try:
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op)); torch.cuda.synchronize()
            print("PROBE2 all_reduce %s %s: ok" % (dt, op), flush=True)
        except Exception as e:
            print("PROBE2 all_reduce %s %s: ERROR %s" % (dt, op, str(e).splitlines()[0][:100]), flush=True)
dist.destroy_process_group()
