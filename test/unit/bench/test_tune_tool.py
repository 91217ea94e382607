#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# planccl-tune without a GPU, over fake_bench.py (known times): the winners and merged ranges of
# the file it writes, which planccl's own reader accepts (planccl-plan tune); the table; resuming
# after an interruption; the budget; and --confirm, which passes on the file and fails on a worse
# one. Usage: test_tune_tool.py <bench/planccl_tune.py> <planccl-plan>
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL, PLAN_TOOL = sys.argv[1], sys.argv[2]
PLANS = os.path.join(HERE, "data", "tune_plans")


def tune(tmp, *extra, env=None, check=True, ranks=("-g", "2", "--share-gpu")):
    cmd = [sys.executable, TOOL, "--bench", os.path.join(HERE, "fake_bench.py"), "--lib",
           "/nonexistent/libplanccl.so", "--plans", PLANS] + list(ranks) + [
           "--coll", "allreduce", "-b", "1K", "-e", "1M", "-f", "4", "--rounds", "2",
           "--out", os.path.join(tmp, "tune.json")] + list(extra)
    e = dict(os.environ, FAKE_PLANS=PLANS, FAKE_COUNT=os.path.join(tmp, "count"))
    e.pop("PLANCCL_PLAN_DIR", None)
    e.update(env or {})
    r = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if check and r.returncode != 0:
        sys.exit("planccl-tune failed (%d):\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
    return r


def runs(tmp):
    with open(os.path.join(tmp, "count")) as f:
        return len(f.readlines())


def expect(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        r = tune(tmp, "--csv", os.path.join(tmp, "out.csv"))
        with open(os.path.join(tmp, "tune.json")) as f:
            t = json.load(f)
        expect(t["identity"]["gpu"] == "Fake GPU", "the identity is the library's")
        shapes = {(e["collective"], e["inplace"]): e for e in t["entries"]}
        out = shapes[("allreduce", False)]
        expect(out["world"] == 2 and out["ranks_per_gpu"] == 2 and
               out["process_model"] == "threads" and out["registered"] is False, "the shape")
        got = [(g["min"], g["max"], g["path"]) for g in out["ranges"]]
        want = [(1, 1024, "allreduce_a_small"), (1025, 65536, "allreduce_b_big"),
                (65537, 1048576, "nccl")]
        expect(got == want, "ranges %s, want %s" % (got, want))
        expect(out["ranges"][0]["runner_up"] == "nccl", "runner-up of 1K")
        expect(abs(out["ranges"][2]["us"] - (10 + 1048576 / 1e5)) < 0.01, "the winner's time")
        inp = shapes[("allreduce", True)]  # no in-place plan: NCCL alone, one range
        expect([(g["min"], g["max"], g["path"]) for g in inp["ranges"]] ==
               [(1, 1048576, "nccl")], "in-place ranges")
        expect("gain over untuned" in r.stdout and " b_big " in r.stdout and "(was a_small)" in r.stdout,
               "the table: " + r.stdout)
        expect(os.path.exists(os.path.join(tmp, "out.csv")), "the CSV")
        c = subprocess.run([PLAN_TOOL, "tune", os.path.join(tmp, "tune.json")],
                           stdout=subprocess.PIPE, universal_newlines=True)
        expect(c.returncode == 0 and c.stdout.startswith("OK"), "planccl accepts it: " + c.stdout)
        # 1 identity run + 2 rounds x (untuned + 3 candidates: nccl, a_small, b_big).
        expect(runs(tmp) == 9, "runs made: %d" % runs(tmp))

        # Interrupted at the 5th bench process (the 4th measuring run), then resumed.
        os.unlink(os.path.join(tmp, "count"))
        os.unlink(os.path.join(tmp, "tune.json"))
        r = tune(tmp, env={"FAKE_INTERRUPT_AT": "5"}, check=False)
        expect(r.returncode != 0 and not os.path.exists(os.path.join(tmp, "tune.json")),
               "an interrupted run writes no file")
        expect(os.path.exists(os.path.join(tmp, "tune.json.g2.partial")), "its state is kept")
        r = tune(tmp)
        expect("resuming, 3 runs already measured" in r.stderr, "resumed: " + r.stderr)
        expect(runs(tmp) == 5 + 1 + 5, "runs after resuming: %d" % runs(tmp))
        with open(os.path.join(tmp, "tune.json")) as f:
            expect(json.load(f) == t, "the resumed file is the same")
        expect(not os.path.exists(os.path.join(tmp, "tune.json.g2.partial")), "state removed")

        # A budget smaller than one run: one round, then stop.
        r = tune(tmp, "--budget-s", "0.001", "--fresh")
        expect("budget reached after 1 of 2 rounds" in r.stderr, "budget: " + r.stderr)

        # Which shapes: by default every rank count the plans offer (2 here), sharing the GPU
        # only when asked; registered buffers on request.
        r = tune(tmp, "--dry-run", "--registered", "both", ranks=("--share-gpu",))
        expect("# 2 ranks\n" in r.stdout and "# 2 ranks, registered\n" in r.stdout,
               "shapes: " + r.stdout)
        r = tune(tmp, "--dry-run", ranks=(), check=False)
        expect(r.returncode == 2 and "no rank count to tune" in r.stderr, "one GPU: " + r.stderr)
        r = tune(tmp, "--registered", "yes", "--out", os.path.join(tmp, "reg.json"))
        with open(os.path.join(tmp, "reg.json")) as f:
            reg = json.load(f)["entries"]
        expect(reg and all(e["registered"] for e in reg), "registered entries")

        # --confirm: the file holds; one that sends every size to NCCL does not.
        r = tune(tmp, "--confirm", os.path.join(tmp, "tune.json"))
        expect("confirmed at 12 of 12 sizes" in r.stdout, "confirm: " + r.stdout)
        worse = dict(t, entries=[dict(out, ranges=[{"min": 1, "max": 1 << 30, "path": "nccl",
                                                    "us": 1}])])
        with open(os.path.join(tmp, "worse.json"), "w") as f:
            json.dump(worse, f)
        r = tune(tmp, "--confirm", os.path.join(tmp, "worse.json"), check=False)
        expect(r.returncode == 1 and "not confirmed: allreduce out 1K" in r.stdout,
               "a worse file is caught: " + r.stdout)
    print("test_tune_tool: passed")


if __name__ == "__main__":
    main()
