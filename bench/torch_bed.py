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


def destroy_bounded(dist, limit_s=30, note=print):
    """dist.destroy_process_group(), given limit_s seconds. NCCL 2.30.7's multi-rank mode (ranks
    sharing a GPU under MPS) was seen never to return from it after a decode run whose results
    were already written; a worker whose destroy hangs says so and exits, so the run still ends."""
    import threading
    t = threading.Thread(target=dist.destroy_process_group, daemon=True)
    t.start()
    t.join(limit_s)
    if t.is_alive():
        note("destroy_process_group did not return in %d s: exiting without it" % limit_s)
        sys.stdout.flush()
        os._exit(0)


def planccl_loaded():
    with open("/proc/self/maps") as f:
        return "libplanccl.so" in f.read()


def torchrun(script, a, env, out, passthru, what):
    """One run of `script`'s workers under torchrun (a.nproc processes); returns rank 0's JSON
    and the run's output. The output goes to out's .log beside it; a failed run ends the
    driver with the log's tail and where the log is."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           str(a.nproc), os.path.abspath(script), "--worker", "--out", out] + passthru
    log = os.path.splitext(out)[0] + ".log"
    # The workers write straight into the log, so a run that hangs leaves what it printed.
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            rc = None
    with open(log) as f:
        text = f.read()
    if rc != 0:
        print(text[-4000:])
        why = "timed out after %d s" % a.timeout if rc is None else "failed (rc %d)" % rc
        sys.exit("%s %s, log %s" % (what, why, log))
    with open(out) as f:
        return json.load(f), text
