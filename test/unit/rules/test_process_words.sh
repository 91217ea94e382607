#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/check_rules.sh's words rule (PCL_RULES_ONLY=words) on a copy of the tracked files in a
# repository of its own: a line that speaks of how the work was done fails the check and is named
# by file and line; a product phrase of scripts/process_words_allow.txt passes, and allows only
# itself, not a process word beside it on the same line.
# Usage: test_process_words.sh <source dir>
# shellcheck source=test/unit/rules/rules_repo.sh
source "$(dirname "$0")/rules_repo.sh"
rules() { PCL_RULES_ONLY=words bash scripts/check_rules.sh >"$tmp/out" 2>&1; }

# What the tree reports as it stands: ./test.sh's own run of the rule requires it clean; here
# only what the planted files change counts.
rules
base=$(grep -c '^[^ ]*:[0-9]*: ' "$tmp/out")

# A process word in a C comment. The phrase is assembled here so that this file does not carry it.
word=$(printf 'ses%s' sion)
mkdir -p planted
printf '/* SPDX-License-Identifier: MIT */\n/* measured in %s 12, %s 4 */\nint x;\n' \
  "$word" "call" >planted/diary.c
git add planted/diary.c
if rules; then
  cat "$tmp/out"
  fail "a process word in planted/diary.c passed the check"
fi
grep -q '^planted/diary\.c:2: /\* measured in' "$tmp/out" || {
  cat "$tmp/out"
  fail "the check failed without naming planted/diary.c:2"
}
git rm -q --cached planted/diary.c && rm planted/diary.c

# A product phrase of the allow-list (the simulator's call index and flag) is not named.
printf '/* SPDX-License-Identifier: MIT */\n/* the simulator reports "[%s 0, flag 1]" */\nint y;\n' \
  "call" >planted/product.c
git add planted/product.c
rules
if grep -q '^planted/product\.c:' "$tmp/out"; then
  cat "$tmp/out"
  fail "the allow-listed phrase in planted/product.c was flagged"
fi
n=$(grep -c '^[^ ]*:[0-9]*: ' "$tmp/out")
[ "$n" = "$base" ] || {
  cat "$tmp/out"
  fail "the allow-listed phrase changed the hits ($base before, $n after)"
}

# The allowed phrase blanks only itself: a process word on the same line is still found.
printf '/* "[%s 0, flag 1]", as measured in %s 12 */\n' "call" "$word" >>planted/product.c
git add planted/product.c
rules && fail "a process word beside an allowed phrase passed the check"
grep -q '^planted/product\.c:4: ' "$tmp/out" || {
  cat "$tmp/out"
  fail "the process word beside an allowed phrase was not named at planted/product.c:4"
}
echo "check_rules words rule: a process word fails and is named, an allowed phrase passes"
