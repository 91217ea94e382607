#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds every libFuzzer target with clang in build-fuzz/ and runs each for a bounded time
# (PCL_FUZZ_SECONDS per target, default 16: 80 s for the five; longer runs set it) from its seeds:
# corpus/<target>/ and regress/<target>/ here (the plan loader's are the test plans). Prints one
# summary line per target and exits non-zero when any target finds a crash, leak, hang or
# sanitizer error (the input is left in build-fuzz/fuzz-artifacts/<target>/).
# PCL_FUZZ_TARGETS limits the run to some targets ("fuzz_boot_root fuzz_param").
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${PCL_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${PCL_FUZZ_SECONDS:-16}"
jobs="${PCL_FUZZ_JOBS:-2}"
targets="${PCL_FUZZ_TARGETS:-fuzz_plan_loader fuzz_boot_root fuzz_boot_peer fuzz_param fuzz_tune}"

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
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $targets || exit 1

# Per-target options: input size bound and dictionary.
opts() {
  case "$1" in
  fuzz_plan_loader) echo "-max_len=65536 -dict=$root/test/fuzz/plan.dict" ;;
  fuzz_param) echo "-max_len=256" ;;
  fuzz_tune) echo "-max_len=16384 -dict=$root/test/fuzz/tune.dict" ;;
  *) echo "-max_len=4096" ;;
  esac
}

status=0
summary=()
for t in $targets; do
  corpus="$build/fuzz-corpus/$t"
  seeds="$build/fuzz-seeds/$t"
  artifacts="$build/fuzz-artifacts/$t"
  rm -rf "$seeds" "$artifacts"
  mkdir -p "$corpus" "$seeds" "$artifacts"
  if [ "$t" = fuzz_plan_loader ]; then
    for d in good conformance bad; do
      for f in "$root/test/data/plans/$d"/*.json; do cp "$f" "$seeds/$d-$(basename "$f")"; done
    done
  fi
  for d in corpus regress; do
    [ -d "$root/test/fuzz/$d/$t" ] && cp "$root/test/fuzz/$d/$t"/* "$seeds/" 2>/dev/null
  done
  echo "fuzz: running $t for ${seconds}s on $(find "$seeds" -type f | wc -l) seeds"
  log="$build/fuzz-$t.log"
  t0=$SECONDS
  # -timeout catches a hang on one input, -rss_limit_mb (also the malloc limit) a runaway
  # allocation; leaks are checked by LeakSanitizer after each input that allocated.
  # shellcheck disable=SC2046
  "$build/test/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 $(opts "$t") "$corpus" "$seeds" \
    >"$log" 2>&1
  rc=$?
  took=$((SECONDS - t0))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  crashes=$(find "$artifacts" -type f | wc -l)
  line="fuzz: $t: ${execs:-?} execs in ${took}s, cov ${cov:-?}, ft ${ft:-?}, corpus $(find "$corpus" -type f | wc -l), crashes $crashes, exit $rc"
  summary+=("$line")
  if [ $rc != 0 ] || [ "$crashes" != 0 ]; then
    status=1
    tail -60 "$log"
    echo "fuzz: $t failed; inputs in $artifacts (check them in under test/fuzz/regress/$t/)"
  fi
done
printf '%s\n' "${summary[@]}"
[ $status = 0 ] && echo "fuzz: no crash in ${seconds}s per target ($(echo "$targets" | wc -w) targets)"
exit $status
