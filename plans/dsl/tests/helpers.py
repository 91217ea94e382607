# SPDX-License-Identifier: MIT
# Shared by the DSL tests: the import path, finding planccl-plan (PLANCCL_PLAN_TOOL, else a
# build tree), running `simulate` on plans written to a temporary directory.
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
DSL = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(DSL))
if DSL not in sys.path:
    sys.path.insert(0, DSL)  # planccl_dsl, algorithms, generate


def plan_tool():
    env = os.environ.get("PLANCCL_PLAN_TOOL")
    if env:
        return env if os.access(env, os.X_OK) else None
    for pattern in ("build/tools/planccl-plan", "build*/tools/planccl-plan",
                    "build*/*/tools/planccl-plan"):
        for path in sorted(glob.glob(os.path.join(REPO, pattern))):
            if os.access(path, os.X_OK):
                return path
    return None


NO_TOOL = ("planccl-plan not found: set PLANCCL_PLAN_TOOL to the binary, or build it "
           "(build/tools/planccl-plan)")


def simulate(plans, *args):
    """Writes the plan dicts to a temporary directory and runs `planccl-plan simulate` on them;
    returns (exit status, output)."""
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, p in enumerate(plans):
            path = os.path.join(d, "%03d_%s.json" % (i, p["name"]))
            with open(path, "w") as f:
                json.dump(p, f)
            paths.append(path)
        r = subprocess.run([plan_tool(), "simulate"] + paths + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return r.returncode, r.stdout
