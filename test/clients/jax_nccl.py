# SPDX-License-Identifier: MIT
# JAX as an NCCL client: one process of a multi-process JAX job whose cross-process collectives XLA
# runs on NCCL, each result checked against numpy (test/clients/run.sh starts the processes).
import argparse
import ctypes
import importlib.util
import os
import sys
import threading
import traceback

from client_common import add_sizes_arg, nccl_libraries, parse_sizes, version_text

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "2"))
SKIP = 77
# Several processes on one GPU: XLA's default takes most of the GPU's memory for the first one.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
CUDA_PLUGINS = ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12", "jax_cuda13_plugin",
                "jax_cuda12_plugin")


def log(msg):
    print("[proc %d] %s" % (RANK, msg), flush=True)


def finish(code):
    # os._exit: JAX's exit hook waits on the other processes, which may be the ones that failed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def report(where, e):
    """The exception's whole text on prefixed lines: a refusal by XLA or NCCL must show as said."""
    text = "".join(traceback.format_exception_only(type(e), e)).rstrip("\n").split("\n")
    log("FAIL %s: %s" % (where, text[0]))
    for line in text[1:]:
        log("FAIL | %s" % line)
    traceback.print_exc()


def global_nccl_version():
    # What an ncclGetVersion in the global scope says (a preloaded planccl or NCCL); XLA may hold
    # its NCCL privately, which this does not see.
    try:
        fn = ctypes.CDLL(None).ncclGetVersion
    except AttributeError:
        return "no ncclGetVersion in the global scope"
    v = ctypes.c_int(0)
    rc = fn(ctypes.byref(v))
    code = v.value
    if rc != 0:
        return "ncclGetVersion returned %d" % rc
    return "%s (%d)" % (version_text(code), code)


def has_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def shard_mapper(jax):
    """shard_map with the replication check off (outputs of psum, pmax and all_gather are stated
    replicated by out_specs): jax.shard_map where it exists, the experimental one before."""
    if hasattr(jax, "shard_map"):
        def make(f, mesh, in_specs, out_specs):
            return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=False)
        return make
    from jax.experimental.shard_map import shard_map

    def make_old(f, mesh, in_specs, out_specs):
        return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)
    return make_old


class Checker:
    def __init__(self, jax, np, mesh):
        self.jax, self.np, self.mesh = jax, np, mesh
        self.smap = shard_mapper(jax)
        self.passed = 0
        self.failed = 0
        self.current = "setup"

    def spec(self, *names):
        return self.jax.sharding.PartitionSpec(*names)

    def sharded(self, host):
        """A global (W, k) array, row r on the mesh's device r, made of the host array that every
        process computes alike."""
        jax = self.jax
        sh = jax.sharding.NamedSharding(self.mesh, self.spec("x", None))
        return jax.make_array_from_callback(host.shape, sh, lambda idx: host[idx])

    # Small integers (negative ones too): every sum of a few rows is exact in float32, whatever
    # order XLA and NCCL reduce in.
    def rows(self, k, dtype):
        np = self.np
        r = np.arange(WORLD, dtype=np.int64)[:, None]
        i = np.arange(k, dtype=np.int64)[None, :]
        if dtype == "float32":
            return ((i % 8191) - 4000 + 3 * r).astype(np.float32)
        return (((i * 37 + r * 101) % 1000) - 500).astype(np.int32)

    def verify(self, what, out, want):
        np = self.np
        for shard in out.addressable_shards:
            got = np.asarray(shard.data)
            exp = want[shard.index]
            if got.shape == exp.shape and np.array_equal(got, exp):
                continue
            self.failed += 1
            if got.shape != exp.shape:
                log("FAIL %s: got shape %s, want %s" % (what, got.shape, exp.shape))
                return
            g, e = got.ravel(), exp.ravel()
            bad = np.flatnonzero(g != e)
            i = int(bad[0])
            log("FAIL %s: %d of %d elements differ, first mismatch at %d: got %r want %r"
                % (what, bad.size, g.size, i, g[i].item(), e[i].item()))
            return
        self.passed += 1
        log("ok %s" % what)

    def check(self, what, compute, want):
        self.current = what
        self.verify(what, compute(), want)

    def run(self, nbytes):
        jax, np, mesh, smap, P = self.jax, self.np, self.mesh, self.smap, self.spec
        jnp = jax.numpy
        lax = jax.lax
        n = nbytes // 4
        size = "%d B" % nbytes
        f32 = self.rows(n, "float32")
        i32 = self.rows(n, "int32")
        xf, xi = self.sharded(f32), self.sharded(i32)
        rows = P("x", None)

        # Plain jit over a sharded array: XLA's partitioner picks the collective.
        replicated = jax.sharding.NamedSharding(mesh, P())
        self.check("jit sum float32 %s" % size,
                   lambda: jax.jit(lambda v: jnp.sum(v, axis=0), out_shardings=replicated)(xf),
                   f32.sum(axis=0))

        self.check("psum float32 %s" % size,
                   lambda: jax.jit(smap(lambda b: lax.psum(b, "x"), mesh, rows, P()))(xf),
                   f32.sum(axis=0, keepdims=True))

        self.check("pmax int32 %s" % size,
                   lambda: jax.jit(smap(lambda b: lax.pmax(b, "x"), mesh, rows, P()))(xi),
                   i32.max(axis=0, keepdims=True))

        gather = smap(lambda b: lax.all_gather(b, "x", axis=0, tiled=True), mesh, rows, P())
        self.check("all_gather float32 %s" % size, lambda: jax.jit(gather)(xf), f32)

        # Each process's row holds WORLD chunks; process r keeps the sum of everyone's chunk r.
        m = max(1, n // WORLD)
        wide = self.rows(m * WORLD, "float32")
        scatter = smap(lambda b: lax.psum_scatter(b, "x", scatter_dimension=1, tiled=True), mesh,
                       rows, P(None, "x"))
        self.check("psum_scatter float32 %s" % size, lambda: jax.jit(scatter)(self.sharded(wide)),
                   wide.sum(axis=0, keepdims=True))

        # Process r's row goes to process r+1: XLA's collective-permute, NCCL's send/recv.
        perm = [(r, (r + 1) % WORLD) for r in range(WORLD)]
        shift = smap(lambda b: lax.ppermute(b, "x", perm), mesh, rows, rows)
        self.check("ppermute float32 %s" % size, lambda: jax.jit(shift)(xf),
                   np.roll(f32, 1, axis=0))


def teardown(jax):
    """Release the GPU client, which destroys XLA's NCCL communicators (planccl prints its stats
    then), and leave the distributed job; what it could not do is said, not failed."""
    try:
        from jax.extend.backend import clear_backends
    except ImportError:
        clear_backends = getattr(jax, "clear_backends", None)
    try:
        jax.clear_caches()
        if clear_backends is not None:
            clear_backends()
    except Exception as e:
        log("note: releasing the backend failed: %s: %s" % (type(e).__name__, e))
    try:
        jax.distributed.shutdown()
    except Exception as e:
        log("note: jax.distributed.shutdown failed: %s: %s" % (type(e).__name__, e))


def main():
    ap = argparse.ArgumentParser(description="one process of the JAX NCCL client check")
    ap.add_argument("--port", type=int, default=29511, help="coordinator port on 127.0.0.1")
    ap.add_argument("--local-device", type=int, default=0, help="this process's GPU")
    add_sizes_arg(ap, "process")
    ap.add_argument("--cpu", action="store_true",
                    help="JAX's CPU backend with gloo collectives: a dry run of the checks, no NCCL")
    ap.add_argument("--teardown-s", type=float, default=60.0,
                    help="how long to wait for the backend's release after the checks")
    a = ap.parse_args()
    sizes = parse_sizes(ap, a.sizes)

    try:
        import numpy as np
        import jax
        import jax.lax  # noqa: F401
        import jax.numpy  # noqa: F401
        import jax.sharding  # noqa: F401
    except Exception as e:
        log("skipped: jax (or numpy) not importable: %s: %s" % (type(e).__name__, e))
        sys.exit(SKIP)
    found = ["cpu"] if a.cpu else [p for p in CUDA_PLUGINS if has_module(p)]
    if a.cpu:
        # JAX read JAX_PLATFORMS at import: the setting itself must change.
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if not found:
        log("skipped: jax %s has no CUDA plugin (looked for %s)" % (jax.__version__,
                                                                     ", ".join(CUDA_PLUGINS)))
        sys.exit(SKIP)

    chk = None
    try:
        jax.distributed.initialize(coordinator_address="127.0.0.1:%d" % a.port,
                                   num_processes=WORLD, process_id=RANK,
                                   local_device_ids=None if a.cpu else [a.local_device])
        backend = jax.default_backend()
        if backend != ("cpu" if a.cpu else "gpu"):
            log("skipped: JAX's backend is %s, not gpu (JAX_PLATFORMS=%s; JAX's warning above "
                "says why the GPU backend did not start)"
                % (backend, os.environ.get("JAX_PLATFORMS", "")))
            finish(SKIP)
        log("jax %s, plugin %s, backend %s, %d devices (%d here: %s), world %d"
            % (jax.__version__, found[0], backend, jax.device_count(), jax.local_device_count(),
               jax.local_devices()[0], WORLD))
        if jax.device_count() != WORLD or jax.local_device_count() != 1:
            raise RuntimeError("JAX sees %d devices, %d of them here: want %d, one per process"
                               % (jax.device_count(), jax.local_device_count(), WORLD))
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
        chk = Checker(jax, np, mesh)
        for nbytes in sizes:
            chk.run(nbytes)
    except Exception as e:
        report(chk.current if chk is not None else "setup", e)
        finish(1)

    log("NCCL in the global scope: %s" % global_nccl_version())
    log("libraries: %s" % (", ".join(nccl_libraries()) or "none found in /proc/self/maps"))
    passed, failed = chk.passed, chk.failed
    # The arrays and executables hold the client, and with it XLA's communicators.
    del chk, mesh
    t = threading.Thread(target=teardown, args=(jax,), daemon=True)
    t.start()
    t.join(a.teardown_s)
    if t.is_alive():
        log("note: the backend's release still runs after %.0f s: planccl's stats (printed when "
            "XLA destroys its communicators) may be missing" % a.teardown_s)
    if failed:
        log("FAILED %d of %d checks" % (failed, failed + passed))
        finish(1)
    log("passed %d checks" % passed)
    finish(0)


if __name__ == "__main__":
    main()
