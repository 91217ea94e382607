#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# planccl-tune: measures, on this machine, every candidate path of each call shape (each plan that
# serves it, and the real NCCL) with planccl-bench, alternating, checked, and writes the tuning
# file planccl reads (docs/tuning.md): per shape and size range the fastest path.
"""planccl-tune: choose planccl's path per call shape and size by measuring this machine.

Each candidate runs in its own planccl-bench process with a tuning file that forces it (a plan by
name, or "nccl") for every size; the path planccl-bench reports must be the candidate's, else the
cell is dropped (the plan cannot take that size). Candidates alternate within a round and the
order reverses every round; the time of a candidate at a size is its median over the rounds.
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

COLLS = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce")
NCCL = "nccl"
UNTUNED = "untuned"  # planccl without a tuning file: the gain is measured against it
TUNED = "tuned"  # --confirm: planccl with the file under test
BIG = 1 << 50  # the forced file's one range covers every size a run can ask


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    if s and s[-1] in units:
        return int(s[:-1]) * units[s[-1]]
    return int(s)


def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def default_out():
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if xdg.startswith("/") else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "planccl", "tune.json")


def plan_dirs(args):
    """The directories planccl loads plans from, as the library finds them for an install."""
    dirs = [d for d in os.environ.get("PLANCCL_PLAN_DIR", "").split(":") if d]
    if args.plans:
        return dirs + args.plans
    share = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.lib))), "share",
                         "planccl")
    return dirs + [os.path.join(share, "plans"), os.path.join(share, "plans-extra")]


def load_plans(dirs):
    """Every plan file below dirs: name, collective, ranks, ranks per node, placement, sizes."""
    plans = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith(".json"):
                    continue
                try:
                    with open(os.path.join(root, f)) as fh:
                        p = json.load(fh)
                    plans.setdefault(p["name"], {
                        "name": p["name"], "collective": p["collective"],
                        "world": len(p["gpus"]), "rpn": p.get("nranks_per_node", len(p["gpus"])),
                        "inplace": bool(p.get("inplace", False)),
                        "outofplace_ok": bool(p.get("outofplace_ok", False)),
                        "min": int(p.get("min_message_size", 0)),
                        "max": int(p.get("max_message_size", 1 << 62))})
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # planccl refuses it too, with the reason, at load
    return list(plans.values())


def candidates(plans, coll, world, place, lo, hi):
    """Plans that serve (coll, world on one host, placement) somewhere in [lo, hi], by name."""
    out = []
    for p in plans:
        if p["collective"] != coll or p["world"] != world or p["rpn"] != world:
            continue
        if place == "in" and not p["inplace"]:
            continue
        if place == "out" and p["inplace"] and not p["outofplace_ok"]:
            continue
        if p["max"] < lo or p["min"] > hi:
            continue
        out.append(p["name"])
    return sorted(out)


def sizes_of(args):
    s, out = args.b, []
    while s <= args.e:
        out.append(s)
        s *= args.f
    return out


def shape(args, ident, coll, place):
    gpus = max(1, ident.get("gpus", 1))
    return {"collective": coll, "world": args.g, "ranks_per_node": args.g,
            "ranks_per_gpu": -(-args.g // gpus) if args.share_gpu else 1,
            "process_model": "threads" if args.model == "thread" else "processes",
            "inplace": place == "in", "registered": bool(args.reg)}


def write_tune_file(ident, entries, path):
    with open(path, "w") as f:
        json.dump({"planccl_tune": 1, "identity": ident, "entries": entries}, f)


class Bench:
    """planccl-bench runs of planccl, one process each, with a tuning file per run."""

    def __init__(self, args, tmp):
        self.args, self.tmp, self.n = args, tmp, 0

    def run(self, label, tune_file, extra_env=None):
        a = self.args
        self.n += 1
        csv = os.path.join(self.tmp, "run%d.csv" % self.n)
        lib = a.lib + (":symm" if getattr(a, "reg", False) else "")
        cmd = [a.bench, "--lib", "%s=%s" % (label, lib), "-g", str(a.g), "--model", a.model,
               "--coll", ",".join(a.coll), "-b", str(a.b), "-e", str(a.e), "-f", str(a.f),
               "--place", a.place, "--repeat", "1", "-w", str(a.w), "-n", str(a.n),
               "-G", str(a.G), "--csv", csv]
        if a.share_gpu:
            cmd.append("--share-gpu")
        env = dict(os.environ, PLANCCL_TUNE_FILE=tune_file)
        if a.nccl:
            env["PLANCCL_NCCL_LIB"] = a.nccl
        env.update(extra_env or {})
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        rows = []
        if os.path.exists(csv):
            with open(csv) as f:
                head = f.readline().strip().split(",")
                for line in f:
                    rows.append(dict(zip(head, line.rstrip("\n").split(","))))
            os.unlink(csv)
        if r.returncode not in (0, 1) or not rows:
            sys.stderr.write("planccl-tune: %s failed (exit %d): %s\n" %
                             (label, r.returncode, r.stderr.strip().splitlines()[-1:]))
        return rows


def identity(args, bench):
    """The identity the library computes (PLANCCL_TUNE_IDENTITY), from a one-call run."""
    path = os.path.join(bench.tmp, "identity.json")
    a = argparse.Namespace(**vars(args))
    a.coll, a.b, a.e, a.w, a.n, a.G, a.place = ["allreduce"], 1024, 1024, 0, 1, 0, "out"
    a.g, a.share_gpu, a.reg = 1, False, False  # one rank: any machine has its GPU
    Bench(a, bench.tmp).run("identity", "none", {"PLANCCL_TUNE_IDENTITY": path})
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        sys.exit("planccl-tune: the library wrote no identity (is --lib planccl, and "
                 "planccl-bench at --bench?)")


def places_of(args):
    return ("out", "in") if args.place == "both" else (args.place,)


def plan_runs(args, plans):
    """The runs of one round: each a label and, per (coll, place), the path it forces."""
    lo, hi = args.b, args.e
    per = {}
    for coll in args.coll:
        for place in places_of(args):
            c = ([] if args.no_nccl else [NCCL]) + candidates(plans, coll, args.g, place, lo, hi)
            per[(coll, place)] = c
    n = max([len(c) for c in per.values()] + [0])
    runs = []
    for i in range(n):
        force = {k: c[i] for k, c in per.items() if i < len(c)}
        runs.append(("cand%d" % i, force))
    return runs, per


def record(meas, rows, mode, force, label):
    """Keeps each row whose path is the forced one (a plan by name, or NCCL) and was right; one
    line per run names the cells left out for wrong results."""
    wrong = []
    for r in rows:
        if r.get("mode") != mode:
            continue
        key = (r["coll"], r["place"], int(r["bytes"]))
        path = r.get("path", "")
        if label in (UNTUNED, TUNED):
            name = label
        else:
            name = force.get((r["coll"], r["place"]))
            want = "nccl" if name == NCCL else "plan:%s" % name
            if name is None or path != want:
                continue
        if int(r.get("wrong", "0") or 0) != 0:
            wrong.append("%s %s %s (%s)" % (r["coll"], r["place"], human(key[2]), name))
            continue
        meas.setdefault(key, {}).setdefault(name, []).append((float(r["time_us"]), path))
    if wrong:
        sys.stderr.write("planccl-tune: %s: wrong results, left out: %s%s\n" %
                         (label, ", ".join(wrong[:4]), " and %d more" % (len(wrong) - 4)
                          if len(wrong) > 4 else ""))


def stats(samples):
    t = sorted(x for x, _ in samples)
    med = statistics.median(t)
    return med, (t[-1] - t[0]) / med if med > 0 else 0.0


def decide(meas, key):
    """(winner, its median, runner-up, its median, spread of the winner) for one cell."""
    cands = [(stats(v)[0], n) for n, v in meas.get(key, {}).items() if n not in (UNTUNED, TUNED)]
    cands.sort()
    if not cands:
        return None
    win = cands[0]
    ru = cands[1] if len(cands) > 1 else (None, None)
    return win[1], win[0], ru[1], ru[0], stats(meas[key][win[1]])[1]


def ranges(meas, coll, place, sizes):
    """Consecutive measured sizes with the same winner become one range; a range ends at its
    last measured size and starts after the previous range's end."""
    out, prev_end = [], 0
    for s in sizes:
        d = decide(meas, (coll, place, s))
        if d is None:
            continue
        win, us, ru, ru_us, _ = d
        if out and out[-1]["path"] == win and out[-1]["max"] == prev_end:
            g = out[-1]
            g["max"], g["us"] = s, round(us, 3)
            if ru is not None:
                g["runner_up"], g["runner_up_us"] = ru, round(ru_us, 3)
        else:
            g = {"min": prev_end + 1, "max": s, "path": win, "us": round(us, 3)}
            if ru is not None:
                g["runner_up"], g["runner_up_us"] = ru, round(ru_us, 3)
            out.append(g)
        prev_end = s
    return out


def short(name, coll, world):
    """A plan's name without what the table's heading says: allreduce_2gpu_ll1_inplace -> ll1."""
    for pre in ("%s_%dgpu_" % (coll, world), coll + "_"):
        if name.startswith(pre):
            name = name[len(pre):]
            break
    for suf in ("_inplace", "_outofplace"):
        if name.endswith(suf):
            name = name[:-len(suf)]
    return name


def table(args, meas, per, sizes, out=sys.stdout):
    for (coll, place), cands in sorted(per.items()):
        names = cands + [UNTUNED] + ([TUNED] if args.confirm else [])
        cols = [short(n, coll, args.g) for n in names]
        w = max([10] + [len(c) for c in cols])
        out.write("\n# %s, %s, %d ranks%s, %s times (us, median of rounds)\n" %
                  (coll, "in place" if place == "in" else "out of place", args.g,
                   " sharing GPUs" if args.share_gpu else "", args.mode))
        out.write("%10s  %s  %-12s %s\n" % ("bytes", "  ".join("%*s" % (w, c) for c in cols),
                                             "winner", "gain over untuned"))
        for s in sizes:
            cell = meas.get((coll, place, s), {})
            d = decide(meas, (coll, place, s))
            if d is None:
                continue
            times = ["%*.2f" % (w, stats(cell[n])[0]) if n in cell else "%*s" % (w, "-")
                     for n in names]
            gain = ""
            if UNTUNED in cell:
                was = cell[UNTUNED][0][1] or "?"
                was = short(was[5:], coll, args.g) if was.startswith("plan:") else was
                gain = "%.2fx (was %s)" % (stats(cell[UNTUNED])[0] / d[1], was)
            out.write("%10s  %s  %-12s %s\n" % (human(s), "  ".join(times),
                                                 short(d[0], coll, args.g), gain))


def write_csv(path, shapes):
    """The medians of every (args, measurements) pair, one planccl-bench CSV."""
    with open(path, "w") as f:
        f.write("lib,coll,model,ngpus,bytes,count,type,redop,root,place,mode,time_us,algbw_gbs,"
                "busbw_gbs,wrong,speedup,path\n")
        for args, meas in shapes:
            for (coll, place, s), cell in sorted(meas.items()):
                for name, v in sorted(cell.items()):
                    med, _ = stats(v)
                    f.write("%s,%s,%s,%d,%d,%d,float,%s,%d,%s,%s,%.3f,%.4f,,0,,%s\n" %
                            (name, coll, args.model, args.g, s, s // 4,
                             "sum" if coll in ("allreduce", "reducescatter", "reduce") else "none",
                             0 if coll in ("broadcast", "reduce") else -1, place, args.mode, med,
                             s / med / 1e3 if med > 0 else 0, v[0][1]))


def confirm_report(meas):
    """Per cell: the tuned run took the fastest candidate's path, or came within 3% of its time,
    or within the spread across rounds (of either) where that is larger."""
    ok = bad = 0
    for (coll, place, s), cell in sorted(meas.items()):
        d = decide(meas, (coll, place, s))
        if d is None or TUNED not in cell:
            continue
        tuned, spread = stats(cell[TUNED])
        fastest_path = cell[d[0]][0][1]
        tol = max(0.03, d[4], spread)
        if cell[TUNED][0][1] == fastest_path or tuned <= d[1] * (1 + tol):
            ok += 1
        else:
            bad += 1
            print("not confirmed: %s %s %s: tuned %.2f us (%s), fastest %s %.2f us "
                  "(tolerance %.1f%%)" % (coll, place, human(s), tuned, cell[TUNED][0][1], d[0],
                                          d[1], 100 * tol))
    print("confirmed at %d of %d sizes" % (ok, ok + bad))
    return bad == 0


def measure(args, ident, plans, bench, start):
    """One world shape (args.g ranks, args.reg registered or not): every candidate, every round.
    Returns (measurements, entries of the file, confirmed)."""
    runs, per = plan_runs(args, plans)
    labels = [UNTUNED] + [r[0] for r in runs] + ([TUNED] if args.confirm else [])
    sizes = sizes_of(args)
    what = "%d ranks%s" % (args.g, ", registered" if args.reg else "")
    if args.dry_run:
        print("# %s" % what)
        for (coll, place), c in sorted(per.items()):
            print("%s %s: %s" % (coll, place, ", ".join(c) or "(none)"))
        print("%d runs per round, %d rounds" % (len(labels), args.rounds))
        return {}, [], True
    # Forced files, one per run; the state of an interrupted run of the same configuration.
    files = {UNTUNED: "none", TUNED: args.confirm}
    for label, force in runs:
        entries = [dict(shape(args, ident, coll, place),
                        ranges=[{"min": 1, "max": BIG, "path": path, "us": 0}])
                   for (coll, place), path in sorted(force.items())]
        files[label] = os.path.join(bench.tmp, "g%d%s-%s.json" % (args.g, "r" * args.reg, label))
        write_tune_file(ident, entries, files[label])
    force_of = dict(runs)
    config = hashlib.sha256(json.dumps([ident, sorted(per.items()), labels, sizes, args.mode,
                                        args.model, args.g, args.reg, args.share_gpu,
                                        args.confirm, args.w, args.n, args.G]).encode()).hexdigest()
    state_path = "%s%s.g%d%s.partial" % (args.out, ".confirm" if args.confirm else "", args.g,
                                         "r" if args.reg else "")
    done = {}
    if os.path.exists(state_path) and not args.fresh:
        with open(state_path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        if lines and lines[0].get("config") == config:
            done = {(x["round"], x["label"]): x["rows"] for x in lines[1:]}
            sys.stderr.write("planccl-tune: %s: resuming, %d runs already measured\n" %
                             (what, len(done)))
    os.makedirs(os.path.dirname(os.path.abspath(state_path)), exist_ok=True)
    if not done:
        with open(state_path, "w") as f:
            f.write(json.dumps({"config": config}) + "\n")
    meas, ran, t0 = {}, 0, time.time()
    total = len(labels) * args.rounds
    for rnd in range(args.rounds):
        order = labels if rnd % 2 == 0 else labels[::-1]
        for label in order:
            rows = done.get((rnd, label))
            if rows is None:
                elapsed = time.time() - start
                per_run = (time.time() - t0) / ran if ran else 0
                if args.budget_s and ran and rnd > 0 and elapsed + per_run > args.budget_s:
                    sys.stderr.write("planccl-tune: %s: budget reached after %d of %d rounds\n" %
                                     (what, rnd, args.rounds))
                    break
                rows = bench.run(label, files[label])
                ran += 1
                with open(state_path, "a") as f:
                    f.write(json.dumps({"round": rnd, "label": label, "rows": rows}) + "\n")
                left = (time.time() - t0) / ran * (total - len(done) - ran)
                sys.stderr.write("planccl-tune: %s [%d/%d] round %d %s done, %d:%02d left\n" %
                                 (what, len(done) + ran, total, rnd + 1, label, left // 60,
                                  left % 60))
            record(meas, rows, args.mode, force_of.get(label, {}), label)
        else:
            continue
        break
    table(args, meas, per, sizes)
    good = confirm_report(meas) if args.confirm else True
    entries = []
    for coll in args.coll:
        for place in places_of(args):
            rg = ranges(meas, coll, place, sizes)
            if rg:
                entries.append(dict(shape(args, ident, coll, place), ranges=rg))
    os.unlink(state_path)
    return meas, entries, good


def worlds_of(args, ident, plans):
    """-g's list, else every rank count (2 or more) the plans offer on one host, up to the GPUs
    present unless the ranks share them."""
    if args.g:
        return [int(x) for x in args.g.split(",")]
    offered = sorted({p["world"] for p in plans if p["rpn"] == p["world"] and p["world"] >= 2})
    return [w for w in offered if args.share_gpu or w <= ident.get("gpus", 0)]


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(prog="planccl-tune", description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=os.path.join(here, "..", "lib", "libplanccl.so"))
    ap.add_argument("--bench", default=os.path.join(here, "planccl-bench"))
    ap.add_argument("--nccl", help="the real libnccl.so.2 planccl forwards to (PLANCCL_NCCL_LIB)")
    ap.add_argument("--no-nccl", action="store_true", help="do not measure NCCL as a candidate")
    ap.add_argument("-g", default="", help="rank counts, e.g. 2,4,8 (default: every one the "
                    "plans offer on the GPUs present)")
    ap.add_argument("--share-gpu", action="store_true", help="ranks share the GPUs there are")
    ap.add_argument("--model", choices=("thread", "proc"), default="thread")
    ap.add_argument("--registered", choices=("no", "yes", "both"), default="no",
                    help="buffers in symmetric windows (zero-copy plans are candidates then)")
    ap.add_argument("--coll", default=",".join(COLLS))
    ap.add_argument("-b", default="1K")
    ap.add_argument("-e", default="64M")
    ap.add_argument("-f", type=int, default=4)
    ap.add_argument("--place", choices=("both", "in", "out"), default="both")
    ap.add_argument("--mode", choices=("graph", "eager"), default="graph",
                    help="the times that decide: CUDA graph replays or eager calls")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-w", type=int, default=10)
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("-G", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=0, help="stop starting runs after this")
    ap.add_argument("--plans", action="append", help="plan directories (default: the install's)")
    ap.add_argument("--out", default=default_out())
    ap.add_argument("--csv", help="the medians, in planccl-bench's CSV form (bench/plot.py)")
    ap.add_argument("--confirm", metavar="FILE", help="measure FILE against every candidate")
    ap.add_argument("--fresh", action="store_true", help="ignore an interrupted run's state")
    ap.add_argument("--dry-run", action="store_true", help="list the runs and stop")
    args = ap.parse_args(argv)
    args.coll = [c for c in args.coll.split(",") if c]
    if any(c not in COLLS for c in args.coll):
        ap.error("--coll: expected a comma list of %s" % ", ".join(COLLS))
    if args.g and not all(x.isdigit() and int(x) >= 1 for x in args.g.split(",")):
        ap.error("-g: expected rank counts, e.g. 2 or 2,4,8")
    args.b, args.e = parse_size(args.b), parse_size(args.e)
    if args.f < 2 or args.b < 1 or args.e < args.b or args.rounds < 1:
        ap.error("need -b >= 1, -e >= -b, -f >= 2, --rounds >= 1")
    tmp = tempfile.mkdtemp(prefix="planccl-tune-")
    # Terminated, it still removes its scratch files (the measured runs stay in the state file).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return tune(ap, args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tune(ap, args, tmp):
    """Every world shape asked, then the table, the CSV and the file (or the confirmation)."""
    ident = identity(args, Bench(args, tmp))
    plans = load_plans(plan_dirs(args))
    worlds = worlds_of(args, ident, plans)
    if not worlds:
        ap.error("no rank count to tune: %d GPU(s) here; give -g, with --share-gpu to let ranks "
                 "share them" % ident.get("gpus", 0))
    regs = {"no": [False], "yes": [True], "both": [False, True]}[args.registered]
    entries, good, start, csv_rows = [], True, time.time(), []
    for g in worlds:
        for reg in regs:
            a = argparse.Namespace(**vars(args))
            a.g, a.reg = g, reg
            meas, got, ok = measure(a, ident, plans, Bench(a, tmp), start)
            entries += got
            good &= ok
            csv_rows.append((a, meas))
    if args.dry_run:
        return 0
    if args.csv:
        write_csv(args.csv, csv_rows)
        print("\nCSV: %s (plot: python3 bench/plot.py %s)" % (args.csv, args.csv))
    if args.confirm:
        return 0 if good else 1
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_tune_file(ident, entries, args.out)
    print("\nwrote %s: %d call shapes; undo: remove it, or PLANCCL_TUNE_FILE=none" %
          (args.out, len(entries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
