#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates planccl's opt-in single-node LL plans for 4 and 8 GPUs (plans/extra/<collective>/
<N>gpu_*.json) with pclgen.py. Standard library only. Run from anywhere:

    python3 plans/dsl/gen_ngpu.py            # rewrites plans/extra/*/{4,8}gpu_*.json
    python3 plans/dsl/gen_ngpu.py --check    # exit 1 if the files on disk differ (for CI)

All of them are one-phase LL plans (every rank packs straight into every peer's scratch; packet
flags are the only synchronisation), each op sliced over all blocks with tbg_info:
- allreduce (ll1): any multiple of 16 bytes; every rank reduces in rank order, so all ranks get
  bit-identical results (checked here symbolically: pclgen.reduction_exprs);
- allgather (ll): total output a multiple of 16 * N (whole 16-byte units per rank);
- reducescatter (ll): total input a multiple of 16 * N.
Other sizes are not runnable and fall back to NCCL.

NOT TUNED: the constants below are first guesses (the 2-GPU values); these plans are simulated
in CI but have not run on GPUs yet. They ship in the opt-in set (share/planccl/plans-extra).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (CI runs this from there)
import pclgen  # noqa: E402
from pclgen import KIB  # noqa: E402

NRANKS = (4, 8)

AR_BLOCKS, AR_THREADS = 8, 512
AR_MIN, AR_MAX = 16, 64 * KIB             # message bytes
AG_BLOCKS, AG_THREADS = 8, 512
AG_MAX = 256 * KIB                        # total output bytes; min 16 * N (one unit per rank)
RS_BLOCKS, RS_THREADS = 8, 512
RS_MAX = 256 * KIB                        # total input bytes; min 16 * N


def same_order(p):
    """Refuses an allreduce plan whose ranks would reduce in different orders (float results
    differing between ranks): see pclgen.allreduce_ll1."""
    exprs = pclgen.reduction_exprs(p)
    if any(e != exprs[0] for e in exprs):
        raise SystemExit("%s: ranks reduce in different orders: %r" % (p["name"], exprs))
    return p


def outputs():
    for n in NRANKS:
        for ip in (True, False):
            k = pclgen.kind(ip)
            yield (os.path.join("extra", "allreduce", "%dgpu_ll1_%s.json" % (n, k)),
                   same_order(pclgen.allreduce_ll1(n, ip, AR_BLOCKS, AR_THREADS, AR_MIN, AR_MAX,
                                                   0, "allreduce_%dgpu_ll1_%s" % (n, k))))
            yield (os.path.join("extra", "allgather", "%dgpu_ll_%s.json" % (n, k)),
                   pclgen.allgather_ll(n, ip, AG_BLOCKS, AG_THREADS, 16 * n, AG_MAX, 0,
                                       "allgather_%dgpu_ll_%s" % (n, k)))
            yield (os.path.join("extra", "reducescatter", "%dgpu_ll_%s.json" % (n, k)),
                   pclgen.reducescatter_ll(n, ip, RS_BLOCKS, RS_THREADS, 16 * n, RS_MAX, 0,
                                           "reducescatter_%dgpu_ll_%s" % (n, k)))


if __name__ == "__main__":
    sys.exit(pclgen.main(sys.argv[1:], outputs(), "gen_ngpu.py"))
