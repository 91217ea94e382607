#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# scripts/check_rules.sh's "layers" rule: every #include "..." of a tracked source names a header
# of its own folder or of one scripts/layers.txt allows it; prints each breach and exits 1.
# Usage: check_layers.py [layers file]   (run from the repository's root; reads git's index)
import os
import re
import subprocess
import sys


def folder_of(path):
    """The folder a file belongs to: its directory, a private/ counting as its parent."""
    d = os.path.dirname(path)
    return d[:-len("/private")] if d.endswith("/private") else d


def main():
    table = sys.argv[1] if len(sys.argv) > 1 else "scripts/layers.txt"
    allowed = {}
    with open(table) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, rest = line.partition(":")
            if not sep:
                sys.exit("%s:%d: 'folder: allowed ...' expected" % (table, n))
            allowed[name.strip()] = set(rest.split())
    files = subprocess.check_output(["git", "ls-files", "*.c", "*.h", "*.cu", "*.cuh", "*.def"],
                                    text=True).split()
    where = {}  # header name -> the folders holding one
    for f in files:
        if f.endswith((".h", ".cuh", ".def")):
            where.setdefault(os.path.basename(f), set()).add(folder_of(f))
    breaches = 0
    for f in files:
        mine = folder_of(f)
        if mine not in allowed or not os.path.exists(f):
            continue
        with open(f, errors="replace") as src:
            for n, line in enumerate(src, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                name = os.path.basename(m.group(1))
                homes = where.get(name)
                if not homes or mine in homes:
                    continue  # not a planccl header (nccl.h, ...), or the folder's own
                ok = [h for h in homes if h in allowed[mine] or "%s:%s" % (h, name) in allowed[mine]]
                if not ok:
                    print("%s:%d: includes %s (%s), which %s/ may not (%s)" %
                          (f, n, name, " or ".join(sorted(homes)), mine, table))
                    breaches += 1
    if breaches:
        print("check_rules: %d include(s) against the layering" % breaches)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
