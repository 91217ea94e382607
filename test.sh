#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds planccl, and runs every test this machine can run: unit and
# multi-process tests everywhere, GPU tests where GPUs exist (they exit 77 = skipped elsewhere),
# then every CPU suite again under AddressSanitizer + UBSan, the threaded code's suites under
# ThreadSanitizer, and a bounded fuzzing run of every libFuzzer target.
set -euo pipefail
source "$(dirname "$0")/scripts/common.sh"
cd "$PCL_ROOT"

pcl_install_deps
mkdir -p build
pcl_build build -DPCL_BUILD_TESTS=ON
cmake --install build >/dev/null

pcl_log "tests"
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
(cd build && ctest --output-on-failure -j "$(nproc)") 2>&1 | tee build/ctest.log || status=1
count build/ctest.log

pcl_log "house rules (clang-format, private headers)"
if scripts/check_rules.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi

if [ "${PCL_SKIP_SANITIZE:-0}" != 1 ]; then
  pcl_log "AddressSanitizer + UBSan build of the unit tests"
  mkdir -p build-asan
  PCL_BUILD_TARGET=pcl_unit_tests pcl_build build-asan -DPCL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$(nproc)" -L unit -LE nosan) 2>&1 |
    tee build-asan/ctest.log || status=1
  count build-asan/ctest.log
fi

if [ "${PCL_SKIP_TSAN:-0}" != 1 ]; then
  # The suites of planccl's own threads (bootstrap, junk connections, proxy, group, the handle
  # cache, TCP striping); test_bootstrap's forking cases are built but left out (label notsan).
  # This build compiles the kernels anyway (nothing here runs them), so it compiles them with
  # the programmatic-dependent-launch paths (PCL_PDL), which the main build leaves out.
  pcl_log "ThreadSanitizer build of the threaded code's tests (kernels with PDL paths)"
  mkdir -p build-tsan
  PCL_BUILD_TARGET=pcl_tsan_tests pcl_build build-tsan -DPCL_TSAN=ON -DCMAKE_BUILD_TYPE=Debug \
    -DPCL_PDL=ON
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --output-on-failure -j "$(nproc)" -L tsan -LE notsan) 2>&1 | tee build-tsan/ctest.log || status=1
  count build-tsan/ctest.log
fi

if [ "${PCL_SKIP_FUZZ:-0}" != 1 ] && [ -x test/fuzz/run.sh ]; then
  pcl_log "fuzzing"
  if test/fuzz/run.sh >build/fuzz.log 2>&1; then
    passed=$((passed + 1)); tail -5 build/fuzz.log
  else
    failed=$((failed + 1)); status=1; tail -40 build/fuzz.log
  fi
fi

[ $status = 0 ] && pcl_log "all tests passed" || pcl_log "SOME TESTS FAILED"
echo "test.sh: $passed passed, $failed failed, $skipped skipped"
exit $status
