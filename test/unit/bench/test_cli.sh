#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# planccl-bench's command line as a user meets it, no GPU needed: bad arguments are a usage error
# with a reason (exit 2), --help prints the usage (exit 0), too few GPUs is a skip (exit 77).
set -uo pipefail
bench=$1
# A build of the unit tests alone (pcl_unit_tests) does not build the bench: skipped, not failed.
[ -x "$bench" ] || { echo "$bench not built: skipped"; exit 77; }
fail=0
expect() { # expect <status> <text in the output> <args...>
  local want=$1 text=$2 out rc
  shift 2
  out=$("$bench" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ] || [[ "$out" != *"$text"* ]]; then
    echo "FAIL: planccl-bench $*: status $rc (want $want), output lacks '$text':"
    echo "$out" | head -5
    fail=1
  fi
}
expect 2 "--bogus: unknown option" --lib a=/x --bogus 1
expect 2 "usage: planccl-bench" --lib a=/x --bogus 1
expect 2 "no library" -b 1K
expect 2 "--root 5 is not a rank of 2 GPUs" --lib a=/x --root 5
expect 2 "--dtype fp4: bad value" --lib a=/x --dtype fp4
expect 2 "--baseline b is not the label" --lib a=/x --baseline b
expect 0 "--model M" --help
# Below 8 GPUs a skip; on 8 the library that cannot load is named and the run fails.
out=$("$bench" --lib a=/nonexistent/lib.so -g 8 --model proc -e 1K 2>&1)
rc=$?
if ! { [ $rc = 77 ] && [[ "$out" == *"needs 8 GPUs"* ]]; } &&
  ! { [ $rc = 1 ] && [[ "$out" == *"a: cannot open /nonexistent/lib.so"* ]]; }; then
  echo "FAIL: a library that cannot load on 8 GPUs: status $rc: $out"
  fail=1
fi
[ $fail = 0 ] && echo "planccl-bench command line: all checks passed"
exit $fail
