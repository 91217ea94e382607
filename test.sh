#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds planccl, and runs every test this machine can run: unit and
# multi-process tests everywhere, GPU tests where GPUs exist (they exit 77 = skipped elsewhere),
# then the sanitizer build of the unit tests and a bounded fuzzing run of the plan loader.
set -euo pipefail
source "$(dirname "$0")/scripts/common.sh"
cd "$PCL_ROOT"

pcl_install_deps
mkdir -p build
pcl_build build
cmake --install build >/dev/null

pcl_log "tests"
status=0
(cd build && ctest --output-on-failure -j "$(nproc)") || status=1

if [ "${PCL_SKIP_SANITIZE:-0}" != 1 ]; then
  pcl_log "AddressSanitizer + UBSan build of the unit tests"
  mkdir -p build-asan
  PCL_BUILD_TARGET=pcl_unit_tests pcl_build build-asan -DPCL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$(nproc)" -L unit -LE nosan) || status=1
fi

if [ "${PCL_SKIP_FUZZ:-0}" != 1 ] && [ -x test/fuzz/run.sh ]; then
  pcl_log "fuzzing"
  test/fuzz/run.sh || status=1
fi

[ $status = 0 ] && pcl_log "all tests passed" || pcl_log "SOME TESTS FAILED"
exit $status
