# SPDX-License-Identifier: MIT
# PyTorch through planccl (planned calls where a shipped plan fits, the real NCCL elsewhere). Run
# by run.sh as
#   LD_PRELOAD=<install>/lib/libplanccl.so torchrun --nproc_per_node=2 test_torch_passthrough.py
# Checks that planccl is loaded, then init_process_group("nccl"), all_reduce, all_gather_into_tensor,
# reduce_scatter_tensor, broadcast, all_to_all_single, barrier, send/recv, new_group and
# destroy_process_group, each result compared with its definition; then small all_reduce /
# all_gather sizes that the shipped 2-GPU plans run.
import os
import sys

import torch
import torch.distributed as dist


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    with open("/proc/self/maps") as f:
        maps = f.read()
    check("libplanccl.so" in maps, "libplanccl.so is not loaded (LD_PRELOAD missing?)")
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    # device_id makes the init eager, so new_group below is an ncclCommSplit of the world comm.
    dist.init_process_group("nccl", device_id=dev)
    n = 1 << 20

    x = torch.full((n,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    check(torch.all(x == world * (world + 1) / 2).item(), "all_reduce sum")
    y = torch.arange(n, device=dev, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    check(torch.equal(y, torch.arange(n, device=dev, dtype=torch.float32) * world), "all_reduce max")
    z = torch.full((n,), float(rank), device=dev)
    dist.all_reduce(z, op=dist.ReduceOp.AVG)
    check(torch.allclose(z, torch.full_like(z, (world - 1) / 2)), "all_reduce avg")

    part = torch.full((n,), float(rank), device=dev)
    gathered = torch.empty(world * n, device=dev)
    dist.all_gather_into_tensor(gathered, part)
    want = torch.arange(world, device=dev, dtype=torch.float32).repeat_interleave(n)
    check(torch.equal(gathered, want), "all_gather_into_tensor")

    full = torch.arange(world * n, device=dev, dtype=torch.float32) + rank
    out = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(out, full)
    base = torch.arange(rank * n, (rank + 1) * n, device=dev, dtype=torch.float32)
    check(torch.equal(out, base * world + world * (world - 1) / 2), "reduce_scatter_tensor")

    b = torch.arange(n, device=dev, dtype=torch.float32) if rank == world - 1 else torch.zeros(n, device=dev)
    dist.broadcast(b, src=world - 1)
    check(torch.equal(b, torch.arange(n, device=dev, dtype=torch.float32)), "broadcast")

    a2a_in = torch.arange(world * 4, device=dev, dtype=torch.float32) + 100 * rank
    a2a_out = torch.empty_like(a2a_in)
    dist.all_to_all_single(a2a_out, a2a_in)
    want = torch.cat([torch.arange(rank * 4, rank * 4 + 4, device=dev, dtype=torch.float32) + 100 * r
                      for r in range(world)])
    check(torch.equal(a2a_out, want), "all_to_all_single")

    dist.barrier()

    peer_next, peer_prev = (rank + 1) % world, (rank - 1) % world
    s = torch.full((n,), float(rank * 10), device=dev)
    r = torch.empty(n, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, peer_next),
                                   dist.P2POp(dist.irecv, r, peer_prev)])
    for q in reqs:
        q.wait()
    check(torch.all(r == peer_prev * 10).item(), "batch_isend_irecv")
    if world >= 2 and rank < 2:
        t = torch.full((n,), 7.0, device=dev) if rank == 0 else torch.empty(n, device=dev)
        if rank == 0:
            dist.send(t, dst=1)
        else:
            dist.recv(t, src=0)
            check(torch.all(t == 7.0).item(), "send/recv")

    # Small messages: the sizes the shipped 2-GPU plans cover (planccl runs them on its own
    # kernels; PLANCCL_STATS=1 prints the table at destroy), several dtypes and ops.
    for count in (4, 256, 4096, 65536, 262144):
        for dtype in (torch.float32, torch.bfloat16, torch.int32):
            v = torch.arange(count, device=dev).to(dtype) % 7 + rank
            want = (torch.arange(count, device=dev).to(dtype) % 7) * world + world * (world - 1) // 2
            dist.all_reduce(v)
            check(torch.equal(v, want), f"small all_reduce sum {count} {dtype}")
            m = torch.full((count,), rank + 1, device=dev, dtype=dtype)
            dist.all_reduce(m, op=dist.ReduceOp.MAX)
            check(torch.all(m == world).item(), f"small all_reduce max {count} {dtype}")
            part = torch.full((count,), rank, device=dev, dtype=dtype)
            out = torch.empty(world * count, device=dev, dtype=dtype)
            dist.all_gather_into_tensor(out, part)
            want = torch.arange(world, device=dev).repeat_interleave(count).to(dtype)
            check(torch.equal(out, want), f"small all_gather_into_tensor {count} {dtype}")
        a = torch.full((count,), float(rank), device=dev)
        dist.all_reduce(a, op=dist.ReduceOp.AVG)
        check(torch.allclose(a, torch.full_like(a, (world - 1) / 2)), f"small all_reduce avg {count}")

    g = dist.new_group(list(range(world)))
    w = torch.ones(n, device=dev)
    dist.all_reduce(w, group=g)
    check(torch.all(w == world).item(), "all_reduce on new_group")
    solo = dist.new_group([0])
    if rank == 0:
        v = torch.full((16,), 3.0, device=dev)
        dist.all_reduce(v, group=solo)
        check(torch.all(v == 3.0).item(), "all_reduce on a 1-rank group")
    dist.barrier()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"rank {rank}: torch pass-through through planccl OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
