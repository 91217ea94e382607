# SPDX-License-Identifier: MIT
# Automatic registration under PyTorch's allocator: two processes (sharing one GPU, or one each),
# libplanccl.so preloaded over a NCCL that computes nothing for what it is handed (the recording
# fake) or the real one, allreduce of 1-16 MiB tensors that come and go, and slices of one tensor
# at offsets that differ per rank. Over the fake a sum comes out right only when planccl ran the
# call registered (zero-copy plan); each rank counts its exchanges in its own log.
# Usage: LD_PRELOAD=<lib>/libplanccl.so PLANCCL_NCCL_LIB=<fake or real NCCL>
#        PLANCCL_PLAN_DIR=<dir with the 2-GPU zero-copy allreduce plans> PLANCCL_AUTO_REG=1|2
#        python3 test/torch/pcl_autoreg_torch.py [--iters N] [--logs DIR]
# (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True with level 1.) Exits 0 when every sum is right,
# 1 otherwise, 77 without torch or a GPU.
import argparse
import os
import sys

MIB = 1 << 20


def rank_main(rank, a, port, q):
    os.environ["PLANCCL_DEBUG"] = "INFO"
    os.environ["PLANCCL_DEBUG_SUBSYS"] = "SHIM"
    log = os.path.join(a.logs, "rank%d.log" % rank)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)  # planccl logs to stderr: this rank's file
    import torch
    import torch.distributed as dist

    ngpu = torch.cuda.device_count()
    dev = torch.device("cuda", rank % ngpu)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=2, device_id=dev)
    wrong, calls = 0, 0

    def reduce(t, fill):
        nonlocal wrong, calls
        t.fill_(fill(rank))
        dist.all_reduce(t)
        calls += 1
        want = fill(0) + fill(1)
        if not bool((t == want).all()):
            wrong += 1

    g = torch.Generator().manual_seed(7)  # the same sizes on both ranks
    keep = []
    for it in range(a.iters):
        # Tensors that come and go, as activations and buckets do: the caching allocator reuses
        # its segments, so later ones land in allocations already exchanged.
        n = int(torch.randint(1, 17, (1,), generator=g)) * MIB // 4
        t = torch.empty(n, dtype=torch.float32, device=dev)
        reduce(t, lambda r, it=it: float(r + 1 + it % 5))
        if it % 3 == 0:
            keep.append(t)
        if len(keep) > 4:
            keep.pop(0)
    # One tensor, each rank's slices at offsets of its own (rank 1 one MiB further in).
    big = torch.empty(32 * MIB // 4, dtype=torch.float32, device=dev)
    for k in range(8):
        off = (k + 4 * rank) % 24 * MIB // 4
        reduce(big[off:off + 2 * MIB // 4], lambda r: float(10 * r + 7))
    torch.cuda.synchronize()
    dist.destroy_process_group()
    q.put((rank, calls, wrong))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--logs", default="/tmp/pcl_autoreg_torch")
    a = p.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("pcl_autoreg_torch: no torch: skipped")
        return 77
    if not torch.cuda.is_available():
        print("pcl_autoreg_torch: no GPU: skipped")
        return 77
    os.makedirs(a.logs, exist_ok=True)
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, a, port, q)) for r in range(2)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(600)
    ok = all(pr.exitcode == 0 for pr in procs)
    res = {}
    while not q.empty():
        r, calls, wrong = q.get()
        res[r] = (calls, wrong)
    for r in range(2):
        text = open(os.path.join(a.logs, "rank%d.log" % r)).read()
        exch = text.count("registered automatically")
        drops = text.count("dropped: its memory changed")
        calls, wrong = res.get(r, (0, -1))
        print("pcl_autoreg_torch: rank %d: exit %s, %d calls, %d wrong, %d allocations exchanged, "
              "%d dropped" % (r, procs[r].exitcode, calls, wrong, exch, drops))
        ok = ok and wrong == 0 and calls > 0
    print("pcl_autoreg_torch: %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
