#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the plan-loader fuzzer with clang in build-fuzz/ and runs it for a bounded time
# (PCL_FUZZ_SECONDS, default 60) on a seed corpus made of the repository's test plans.
# Exits non-zero when the fuzzer finds a crash, leak, hang or sanitizer error.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${PCL_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${PCL_FUZZ_SECONDS:-60}"
jobs="${PCL_FUZZ_JOBS:-2}"

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang not found; install clang to run the fuzzer" >&2
  exit 1
fi

mkdir -p "$build"
# shellcheck disable=SC2086
CC=clang cmake -S "$root" -B "$build" -DPCL_FUZZ=ON -DPCL_SANITIZE=ON -DPCL_BUILD_TESTS=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-} >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log" >&2
  exit 1
}
cmake --build "$build" -j "$jobs" --target fuzz_plan_loader

corpus="$build/fuzz-corpus"
seeds="$build/fuzz-seeds"
artifacts="$build/fuzz-artifacts"
rm -rf "$seeds"
mkdir -p "$corpus" "$seeds" "$artifacts"
for d in good conformance bad; do
  for f in "$root/test/data/plans/$d"/*.json; do
    cp "$f" "$seeds/$d-$(basename "$f")"
  done
done

echo "fuzz: running fuzz_plan_loader for ${seconds}s on $(ls "$seeds" | wc -l) seeds"
# -rss_limit_mb guards the loader's memory; -timeout catches hangs on one input.
"$build/test/fuzz/fuzz_plan_loader" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -dict="$root/test/fuzz/plan.dict" -artifact_prefix="$artifacts/" \
  -print_final_stats=1 "$corpus" "$seeds"
echo "fuzz: no crash in ${seconds}s"
