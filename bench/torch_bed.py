# SPDX-License-Identifier: MIT
# What the PyTorch benchmarks share: the NVLink-multicast guards, the command line every one of
# them takes, and one torchrun launch of a worker whose rank 0 writes its results as JSON.
import argparse
import json
import os
import subprocess
import sys

GUARDS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
          "NVSHMEM_DISABLE_NVLS": "1"}


def parser():
    """The options of every driver and its workers; each benchmark adds its own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--out", default="")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=900)
    return ap


def main(ap, worker, driver):
    a = ap.parse_args()
    for k, v in GUARDS.items():
        os.environ.setdefault(k, v)
    if a.worker:
        worker(a)
    else:
        driver(a)


def planccl_loaded():
    with open("/proc/self/maps") as f:
        return "libplanccl.so" in f.read()


def torchrun(script, a, env, out, passthru, what):
    """One run of `script`'s workers under torchrun (a.nproc processes); returns rank 0's JSON
    and the run's output. The output goes to out's .log beside it; a failed run ends the
    driver with the log's tail and where the log is."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           str(a.nproc), os.path.abspath(script), "--worker", "--out", out] + passthru
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=a.timeout)
    log = os.path.splitext(out)[0] + ".log"
    with open(log, "w") as f:
        f.write(p.stdout)
    if p.returncode != 0:
        print(p.stdout[-4000:])
        sys.exit("%s failed (rc %d), log %s" % (what, p.returncode, log))
    with open(out) as f:
        return json.load(f), p.stdout
