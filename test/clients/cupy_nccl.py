# SPDX-License-Identifier: MIT
# CuPy as an NCCL client: one rank of a job that checks cupy.cuda.nccl's collectives and send/recv
# against numpy on the host (test/clients/run.sh starts the ranks, with and without planccl).
import argparse
import json
import os
import sys
import time
import traceback

from client_common import add_sizes_arg, nccl_libraries, parse_sizes, version_text

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "2"))
LOCAL = int(os.environ.get("LOCAL_RANK", str(RANK)))
SKIP = 77
UID_FILE = "nccl_unique_id.json"
CUDA_NO_GPU = (35, 100)  # cudaErrorInsufficientDriver, cudaErrorNoDevice


def log(msg):
    print("[rank %d] %s" % (RANK, msg), flush=True)


def skip(why):
    log("skipped: %s" % why)
    sys.exit(SKIP)


def share_unique_id(nccl, folder, timeout_s):
    """Rank 0's unique id, through a file: written whole (rename) so a reader never sees half."""
    path = os.path.join(folder, UID_FILE)
    if RANK == 0:
        if os.path.exists(path):
            raise RuntimeError("%s exists already (an earlier job's id): give an empty --rendezvous "
                               "directory" % path)
        uid = nccl.get_unique_id()
        tmp = "%s.tmp.%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            # CuPy 14 gives bytes, older CuPy a tuple of ints: the peers rebuild the same type.
            json.dump({"bytes": isinstance(uid, bytes), "values": list(uid)}, f)
        os.rename(tmp, path)
        return uid
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError("no unique id at %s after %.0f s: rank 0 did not start, failed "
                               "before writing it, or uses another --rendezvous directory"
                               % (path, timeout_s))
        time.sleep(0.05)
    with open(path) as f:
        got = json.load(f)
    return bytes(got["values"]) if got["bytes"] else tuple(got["values"])


class Checker:
    def __init__(self, cp, np, nccl, comm, stream):
        self.cp, self.np, self.nccl, self.comm, self.stream = cp, np, nccl, comm, stream
        self.passed = 0
        self.failed = 0
        self.last = None  # the last check done: an exception comes from a call after it

    # Per-rank inputs: small integers (negative ones too), so that every sum of a few ranks is
    # exact in float32 and any order of the reduction gives the same bits.
    def data(self, rank, count, dtype):
        np = self.np
        i = np.arange(count, dtype=np.int64)
        if dtype == "float32":
            return ((i % 8191) - 4000 + 3 * rank).astype(np.float32)
        return (((i * 37 + rank * 101) % 1000) - 500).astype(np.int32)

    def device(self, host):
        with self.stream:
            return self.cp.asarray(host)

    def filled(self, count, dtype, value=-7):
        # A sentinel no result holds, so that an element left unwritten shows.
        with self.stream:
            return self.cp.full(count, value, dtype=dtype)

    def verify(self, what, got_dev, want):
        self.last = what
        self.stream.synchronize()
        got = self.cp.asnumpy(got_dev)
        np = self.np
        if got.shape == want.shape and np.array_equal(got, want):
            self.passed += 1
            log("ok %s" % what)
            return
        self.failed += 1
        if got.shape != want.shape:
            log("FAIL %s: got %d elements, want %d" % (what, got.size, want.size))
            return
        bad = np.flatnonzero(got != want)
        i = int(bad[0])
        log("FAIL %s: %d of %d elements differ, first mismatch at %d: got %r want %r"
            % (what, bad.size, got.size, i, got[i].item(), want[i].item()))

    def run(self, nbytes):
        cp, np, nccl, comm = self.cp, self.np, self.nccl, self.comm
        s = self.stream.ptr
        w = WORLD
        types = {"float32": nccl.NCCL_FLOAT32, "int32": nccl.NCCL_INT32}
        n = nbytes // 4
        size = "%d B" % nbytes
        x = {t: [self.data(r, n, t) for r in range(w)] for t in types}
        mine = {t: self.device(x[t][RANK]) for t in types}

        out = self.filled(n, np.float32)
        comm.allReduce(mine["float32"].data.ptr, out.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s)
        self.verify("allreduce float32 sum %s" % size, out, np.sum(x["float32"], axis=0))

        buf = self.device(x["float32"][RANK])
        comm.allReduce(buf.data.ptr, buf.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s)
        self.verify("allreduce float32 sum in place %s" % size, buf, np.sum(x["float32"], axis=0))

        out = self.filled(n, np.int32)
        comm.allReduce(mine["int32"].data.ptr, out.data.ptr, n, nccl.NCCL_INT32, nccl.NCCL_MAX, s)
        self.verify("allreduce int32 max %s" % size, out, np.max(x["int32"], axis=0))

        out = self.filled(n, np.float32)
        comm.broadcast(mine["float32"].data.ptr, out.data.ptr, n, nccl.NCCL_FLOAT32, 0, s)
        self.verify("broadcast float32 root 0 %s" % size, out, x["float32"][0])

        root = w - 1
        buf = self.device(x["int32"][RANK])
        comm.bcast(buf.data.ptr, n, nccl.NCCL_INT32, root, s)
        self.verify("bcast int32 root %d %s" % (root, size), buf, x["int32"][root])

        # NCCL writes the result on the root only; the others' buffer must stay as it was.
        out = self.filled(n, np.float32)
        comm.reduce(mine["float32"].data.ptr, out.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0, s)
        if RANK == 0:
            self.verify("reduce float32 sum root 0 %s" % size, out, np.sum(x["float32"], axis=0))
        else:
            self.verify("reduce float32 sum root 0 %s (this rank's buffer untouched)" % size, out,
                        np.full(n, -7, dtype=np.float32))

        out = self.filled(n * w, np.float32)
        comm.allGather(mine["float32"].data.ptr, out.data.ptr, n, nccl.NCCL_FLOAT32, s)
        self.verify("allgather float32 %s" % size, out, np.concatenate(x["float32"]))

        # Every rank sends w chunks of n; rank r keeps the sum of everyone's chunk r.
        full = [self.data(r, n * w, "float32") for r in range(w)]
        send = self.device(full[RANK])
        out = self.filled(n, np.float32)
        comm.reduceScatter(send.data.ptr, out.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s)
        self.verify("reducescatter float32 sum %s" % size, out,
                    np.sum(full, axis=0)[RANK * n:(RANK + 1) * n])

        peer_to, peer_from = (RANK + 1) % w, (RANK - 1) % w
        out = self.filled(n, np.float32)
        nccl.groupStart()
        comm.send(mine["float32"].data.ptr, n, nccl.NCCL_FLOAT32, peer_to, s)
        comm.recv(out.data.ptr, n, nccl.NCCL_FLOAT32, peer_from, s)
        nccl.groupEnd()
        self.verify("sendrecv float32 to %d from %d %s" % (peer_to, peer_from, size), out,
                    x["float32"][peer_from])


def main():
    ap = argparse.ArgumentParser(description="one rank of the CuPy NCCL client check")
    ap.add_argument("--rendezvous", required=True, help="directory for rank 0's NCCL unique id")
    ap.add_argument("--rendezvous-timeout", type=float, default=60.0,
                    help="seconds the other ranks wait for rank 0's unique id")
    add_sizes_arg(ap, "rank")
    a = ap.parse_args()
    sizes = parse_sizes(ap, a.sizes)

    try:
        import numpy as np
        import cupy as cp
        from cupy.cuda import nccl
    except Exception as e:
        skip("cupy (or numpy) not importable: %s: %s" % (type(e).__name__, e))
    if not getattr(nccl, "available", False):
        skip("cupy.cuda.nccl is not available (CuPy found no libnccl.so.2)")
    try:
        ngpu = cp.cuda.runtime.getDeviceCount()
    except Exception as e:
        # No device or no driver is a machine without a GPU; any other error (the MPS daemon's,
        # say) is a GPU that failed, and must not pass for a skip.
        if getattr(e, "status", None) not in CUDA_NO_GPU:
            log("FAIL the GPU count: %s: %s" % (type(e).__name__, e))
            sys.exit(1)
        skip("no GPU: %s: %s" % (type(e).__name__, e))
    if ngpu < 1:
        skip("no GPU")

    comm = None
    chk = None
    try:
        dev = LOCAL % ngpu
        cp.cuda.Device(dev).use()
        code = nccl.get_version()
        log("cupy %s, NCCL %s (nccl.get_version() %d; cupy built with %d), world %d, GPU %d of %d"
            % (cp.__version__, version_text(code), code, nccl.get_build_version(), WORLD, dev,
               ngpu))
        uid = share_unique_id(nccl, a.rendezvous, a.rendezvous_timeout)
        comm = nccl.NcclCommunicator(WORLD, uid, RANK)
        stream = cp.cuda.Stream(non_blocking=True)
        chk = Checker(cp, np, nccl, comm, stream)
        for nbytes in sizes:
            chk.run(nbytes)
        stream.synchronize()
    except Exception as e:
        # An error in a call can leave the ranks out of step: stop, and abort rather than destroy.
        after = chk.last if chk is not None else None
        log("FAIL %s: %s%s" % (type(e).__name__, e,
                                " (after the check %s)" % after if after else " (before any check)"))
        traceback.print_exc()
        sys.stderr.flush()
        if comm is not None:
            try:
                comm.abort()
            except Exception as e2:
                log("note: abort failed too: %s: %s" % (type(e2).__name__, e2))
        sys.exit(1)
    log("libraries: %s" % (", ".join(nccl_libraries()) or "none found in /proc/self/maps"))
    # planccl prints its per-collective stats (PLANCCL_STATS=1) at this destroy.
    comm.destroy()
    if chk.failed:
        log("FAILED %d of %d checks" % (chk.failed, chk.failed + chk.passed))
        sys.exit(1)
    log("passed %d checks" % chk.passed)


if __name__ == "__main__":
    main()
