#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds planccl, and runs every test this machine can run: unit and
# multi-process tests everywhere, GPU tests where GPUs exist (they exit 77 = skipped elsewhere),
# then every CPU suite again under AddressSanitizer + UBSan, the threaded code's suites under
# ThreadSanitizer, and a bounded fuzzing run of every libFuzzer target.
#
# The stages overlap, so that every core stays busy (CI has two, and most of the work is one
# process per test or per CUDA file): the fuzzing run starts with the main build; the plan tests
# (label plans: the simulator's runs, minutes of CPU) start once planccl-plan is built, while the
# rest of the main build compiles the kernels; the AddressSanitizer and ThreadSanitizer builds
# start when the main build is done, and link its kernel objects (PCL_KERNELS_FROM) instead of
# compiling them again (nothing runs them there; the main build compiles the PDL paths to PTX).
# Each background stage writes its own log (build/test.sh-plans.log, build-asan/test.sh-asan.log,
# build-tsan/test.sh-tsan.log, build/fuzz.log), printed here once it is done, in this order; the
# ctest logs are build/ctest-plans.log and build/ctest.log (the main build's tests, in two parts),
# build-asan/ctest.log and build-tsan/ctest.log.
# The last line counts every ctest test, the house rules and the fuzzing run, as before.
set -euo pipefail
source "$(dirname "$0")/scripts/common.sh"
cd "$PCL_ROOT"

pcl_install_deps
mkdir -p build

# Background stages: bg_start <name> <dir> <function> runs the function in a subshell that writes
# <dir>/test.sh-<name>.log. It exits non-zero only when its build fails (a failed build stops
# this script, as it always did); its ctest's exit status is left in <ctest log>.rc.
bg_pids=() bg_names=()
bg_start() {
  local name=$1 dir=$2 fn=$3
  mkdir -p "$dir"
  ("$fn" "$dir") >"$dir/test.sh-$name.log" 2>&1 &
  bg_pids+=($!) bg_names+=("$name:$dir")
}
# run_ctest <build dir> <log> [ctest args...]: ctest -j nproc, its output in <log> and on stdout,
# its exit status in <log>.rc; PCL_CTEST_NICE: the tests' niceness.
run_ctest() {
  local dir=$1 log=$2 rc=0
  shift 2
  # shellcheck disable=SC2086
  (cd "$dir" && ${PCL_CTEST_NICE:+nice -n $PCL_CTEST_NICE} ctest --output-on-failure \
    -j "$(nproc)" "$@") 2>&1 | tee "$log" || rc=1
  echo $rc >"$log.rc"
}

# The main build, then the sanitizer stages, which need its kernels, are the longest chain: the
# plan tests beside them run at a lower priority (nice 10; independent, each test one process,
# they fill whatever the chain leaves idle to the end).
plans_stage() {
  pcl_log "plan tests (label plans), alongside the rest of the main build"
  PCL_CTEST_NICE=10 run_ctest "$1" "$1/ctest-plans.log" -L '^plans$'
}

asan_stage() {
  pcl_log "AddressSanitizer + UBSan build of the unit tests (the main build's kernel objects)"
  PCL_BUILD_TARGET=pcl_unit_tests pcl_build "$1" -DPCL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
    -DPCL_KERNELS_FROM="$PCL_ROOT/build"
  ASAN_OPTIONS=detect_leaks=1 run_ctest "$1" "$1/ctest.log" -L unit -LE nosan
}

tsan_stage() {
  # The suites of planccl's own threads (bootstrap, junk connections, proxy, group, the handle
  # cache, TCP striping); test_bootstrap's forking cases are built but left out (label notsan).
  pcl_log "ThreadSanitizer build of the threaded code's tests (the main build's kernel objects)"
  PCL_BUILD_TARGET=pcl_tsan_tests pcl_build "$1" -DPCL_TSAN=ON -DCMAKE_BUILD_TYPE=Debug \
    -DPCL_KERNELS_FROM="$PCL_ROOT/build"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    run_ctest "$1" "$1/ctest.log" -L tsan -LE notsan
}

# Waits for every background stage, prints their logs in the stages' order, and exits 1 if a
# build failed.
bg_finish() {
  local i name n dir rc failed=0
  for i in "${!bg_pids[@]}"; do
    wait "${bg_pids[$i]}" || bg_names[i]+=":failed"
  done
  for name in plans asan tsan; do
    for i in "${!bg_names[@]}"; do
      IFS=: read -r n dir rc <<<"${bg_names[$i]}"
      [ "$n" = "$name" ] || continue
      cat "$dir/test.sh-$n.log"
      if [ -n "$rc" ]; then
        failed=1
        echo "== $n: the build failed (log: $dir/test.sh-$n.log)" >&2
      fi
    done
  done
  bg_pids=() bg_names=()
  if [ $failed = 1 ]; then
    [ -z "${fuzz_pid:-}" ] || wait "$fuzz_pid" || true
    exit 1
  fi
}
# A failed main build: what the other stages printed, then exit 1.
main_build_failed() {
  bg_finish || true
  exit 1
}

rm -f build/ctest-plans.log* build/ctest.log* build-asan/ctest.log* build-tsan/ctest.log*
fuzz=0
if [ "${PCL_SKIP_FUZZ:-0}" != 1 ] && [ -x test/fuzz/run.sh ]; then
  fuzz=1
  test/fuzz/run.sh >build/fuzz.log 2>&1 &
  fuzz_pid=$!
fi
PCL_BUILD_TARGET=planccl-plan pcl_build build -DPCL_BUILD_TESTS=ON || main_build_failed
bg_start plans build plans_stage
pcl_build build -DPCL_BUILD_TESTS=ON || main_build_failed
cmake --install build >/dev/null
[ "${PCL_SKIP_SANITIZE:-0}" = 1 ] || bg_start asan build-asan asan_stage
[ "${PCL_SKIP_TSAN:-0}" = 1 ] || bg_start tsan build-tsan tsan_stage

pcl_log "tests (all but label plans)"
status=0
passed=0 failed=0 skipped=0
# Adds one ctest log's counts to the totals printed on the last line.
count() {
  local total nfail nskip
  total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$1" | tail -1)
  nfail=$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' "$1" | tail -1)
  nskip=$(grep -c '\*\*\*Skipped\|Not Run.*Disabled' "$1" || true)
  passed=$((passed + ${total:-0} - ${nfail:-0} - nskip))
  failed=$((failed + ${nfail:-0}))
  skipped=$((skipped + nskip))
}
run_ctest build build/ctest.log -LE '^plans$'

pcl_log "house rules (clang-format, private headers)"
if scripts/check_rules.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi

bg_finish
for log in build/ctest.log build/ctest-plans.log build-asan/ctest.log build-tsan/ctest.log; do
  [ -f "$log.rc" ] || continue
  [ "$(cat "$log.rc")" = 0 ] || status=1
  count "$log"
done

if [ $fuzz = 1 ]; then
  pcl_log "fuzzing"
  if wait "$fuzz_pid"; then
    passed=$((passed + 1)); tail -5 build/fuzz.log
  else
    failed=$((failed + 1)); status=1; tail -40 build/fuzz.log
  fi
fi

[ $status = 0 ] && pcl_log "all tests passed" || pcl_log "SOME TESTS FAILED"
echo "test.sh: $passed passed, $failed failed, $skipped skipped"
exit $status
