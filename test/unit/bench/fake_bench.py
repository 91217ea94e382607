#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A stand-in for planccl-bench in planccl-tune's test: takes the options planccl-tune passes,
# follows the tuning file (PLANCCL_TUNE_FILE) as planccl would (a named plan where its own size
# range holds the size, else the untuned choice), and writes planccl-bench's CSV with times from
# a fixed model, so the test knows every winner. PLANCCL_TUNE_IDENTITY: writes an identity.
import argparse
import json
import os
import signal
import sys

IDENTITY = {"gpu": "Fake GPU", "driver": "1.0", "cuda": "13.0", "planccl": "0.1.0",
            "nccl": "2.30.7", "gpus": 1, "link": "shared", "plans_digest": "00000000000000ab"}


def time_of(path, n):
    if path == "nccl":
        return 10 + n / 1e5
    if path == "plan:allreduce_a_small":
        return 2 + n / 1e3
    if path == "plan:allreduce_b_big":
        return 5 + n / 2e4
    return 50.0


def main():
    ap = argparse.ArgumentParser()
    for o in ("--lib", "--model", "--coll", "--place", "--csv", "-b", "-e", "-f", "-g", "-w",
              "-n", "-G", "--repeat"):
        ap.add_argument(o)
    ap.add_argument("--share-gpu", action="store_true")
    a = ap.parse_args()
    count = os.environ.get("FAKE_COUNT")
    if count:
        with open(count, "a") as f:
            f.write(a.lib + "\n")
        with open(count) as f:
            n = len(f.readlines())
        if str(n) == os.environ.get("FAKE_INTERRUPT_AT"):
            os.kill(os.getppid(), signal.SIGTERM)
            return 1
    if os.environ.get("PLANCCL_TUNE_IDENTITY"):
        with open(os.environ["PLANCCL_TUNE_IDENTITY"], "w") as f:
            json.dump(IDENTITY, f)
    plans = {}
    for f in os.listdir(os.environ["FAKE_PLANS"]):
        with open(os.path.join(os.environ["FAKE_PLANS"], f)) as fh:
            p = json.load(fh)
        plans[p["name"]] = (p["min_message_size"], p["max_message_size"])
    tune = os.environ.get("PLANCCL_TUNE_FILE", "none")
    entries = []
    if tune != "none":
        with open(tune) as f:
            entries = json.load(f)["entries"]
    label = a.lib.split("=")[0]
    rows = []
    size = int(a.b)
    while size <= int(a.e):
        for place in (("out", "in") if a.place == "both" else (a.place,)):
            covering = sorted(k for k, (lo, hi) in plans.items() if lo <= size <= hi)
            path = "plan:" + covering[0] if covering else "nccl"
            for e in entries:
                if e["inplace"] != (place == "in") or e["collective"] != "allreduce":
                    continue
                for r in e["ranges"]:
                    if r["min"] <= size <= r["max"]:
                        if r["path"] == "nccl":
                            path = "nccl"
                        elif r["path"] in plans and plans[r["path"]][0] <= size <= plans[r["path"]][1]:
                            path = "plan:" + r["path"]
            t = time_of(path, size)
            for mode in ("eager", "graph"):
                rows.append("%s,allreduce,%s,%s,%d,%d,float,sum,-1,%s,%s,%.3f,1,1,0,,%s" %
                            (label, a.model, a.g, size, size // 4, place, mode, t, path))
        size *= int(a.f)
    with open(a.csv, "w") as f:
        f.write("lib,coll,model,ngpus,bytes,count,type,redop,root,place,mode,time_us,algbw_gbs,"
                "busbw_gbs,wrong,speedup,path\n")
        f.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
