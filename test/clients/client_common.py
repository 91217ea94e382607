# SPDX-License-Identifier: MIT
# What the NCCL client checks (cupy_nccl.py, jax_nccl.py) share: their --sizes argument, NCCL's
# version code as text, and the NCCL-like libraries a process has mapped.
import os


def add_sizes_arg(ap, per):
    ap.add_argument("--sizes", default="1024,1048576",
                    help="bytes per %s of each call, comma-separated (multiples of 4)" % per)


def parse_sizes(ap, text):
    sizes = [int(v) for v in text.split(",") if v]
    if any(v <= 0 or v % 4 for v in sizes):
        ap.error("--sizes: positive multiples of 4")
    return sizes


def version_text(code):
    # NCCL's code is major*10000 + minor*100 + patch since 2.9, major*1000 + ... before.
    if code >= 10000:
        return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)
    return "%d.%d.%d" % (code // 1000, code // 100 % 10, code % 100)


def nccl_libraries():
    """The NCCL-like libraries mapped into this process: which library the calls can reach."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split()
                path = fields[-1] if len(fields) >= 6 else ""
                name = os.path.basename(path)
                if (name.startswith("libnccl") or name.startswith("libplanccl")) and path not in seen:
                    seen.append(path)
    except OSError:
        pass
    return seen
