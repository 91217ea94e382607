# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Sourced by the rule tests (test_*.sh <source dir>): fail() and a temporary directory $tmp, gone
# at exit; then the tracked files of the source tree (as its working tree has them), plus the
# rule scripts and their lists even before they are committed, copied into a fresh git
# repository at $tmp/repo, whose index is what scripts/check_rules.sh reads; the test runs there.
set -uo pipefail
src=${1:?usage: $0 <source dir>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
fail() {
  echo "FAIL: $*"
  exit 1
}
mkdir "$tmp/repo" || fail "no temporary directory"
{
  git -C "$src" ls-files -z
  printf '%s\0' scripts/check_rules.sh scripts/check_layers.py scripts/layers.txt \
    scripts/process_words.txt scripts/process_words_allow.txt
} | sort -zu | while IFS= read -r -d '' f; do [ -e "$src/$f" ] && printf '%s\0' "$f"; done |
  tar -C "$src" --null -T - -cf - | tar -C "$tmp/repo" -xf - || fail "copying the tracked files"
{ cd "$tmp/repo" && git init -q . && git add -A; } || fail "git init/add"
