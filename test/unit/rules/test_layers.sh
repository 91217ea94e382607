#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/check_rules.sh's layers rule (PCL_RULES_ONLY=layers) on a copy of the tracked files: the
# tree passes; an include of a higher folder's header (the executor's from common/) fails and is
# named by file and line; a header allowed alone ("folder:header") passes while its folder's
# other headers stay refused.
# Usage: test_layers.sh <source dir>
# shellcheck source=test/unit/rules/rules_repo.sh
source "$(dirname "$0")/rules_repo.sh"
rules() { PCL_RULES_ONLY=layers bash scripts/check_rules.sh >"$tmp/out" 2>&1; }

rules || {
  cat "$tmp/out"
  fail "the tree as it stands breaks the layering"
}

# common/ is the lowest layer: the executor's header is out of its reach.
printf '/* SPDX-License-Identifier: MIT */\n#include <stdio.h>\n#include "exec.h"\n' \
  >common/planted.c
git add common/planted.c
if rules; then
  cat "$tmp/out"
  fail "common/ including exec.h passed the check"
fi
grep -q '^common/planted\.c:3: includes exec\.h (executor/exec)' "$tmp/out" || {
  cat "$tmp/out"
  fail "the check failed without naming common/planted.c:3"
}
git rm -q --cached common/planted.c && rm common/planted.c

# shim/comm/ may include dispatch.h alone of shim/dispatch/: plans_search.h stays refused.
printf '/* SPDX-License-Identifier: MIT */\n#include "dispatch.h"\n' >shim/comm/planted.c
git add shim/comm/planted.c
rules || {
  cat "$tmp/out"
  fail "shim/comm/ including dispatch.h, which layers.txt allows, was refused"
}
printf '#include "plans_search.h"\n' >>shim/comm/planted.c
git add shim/comm/planted.c
rules && fail "shim/comm/ including plans_search.h passed the check"
grep -q '^shim/comm/planted\.c:3: includes plans_search\.h' "$tmp/out" || {
  cat "$tmp/out"
  fail "the check failed without naming shim/comm/planted.c:3"
}
echo "check_rules layers rule: the tree passes, an include against the layering fails and is named"
