#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds and installs planccl under build/install, then runs the main
# job: with two or more GPUs the side-by-side benchmark (planccl, the real NCCL and NCCL with
# symmetric windows in one run: tables, CSV and plots under build/results/<date>-<n>gpu/);
# with one GPU the plan vs hand-written kernel benchmark (ranks sharing it); without GPUs the CPU
# simulation of every shipped plan, as a table.
set -euo pipefail
source "$(dirname "$0")/scripts/common.sh"
cd "$PCL_ROOT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

pcl_install_deps
mkdir -p build
pcl_build build -DPCL_BUILD_TESTS=OFF
cmake --install build >/dev/null
prefix=$PCL_ROOT/build/install

ngpus=0
command -v nvidia-smi >/dev/null && ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$ngpus" -ge 2 ]; then
  real=${PLANCCL_NCCL_LIB:-$(scripts/find_real_nccl.sh)}
  [ -n "$real" ] || { echo "no real libnccl.so.2 found; set PLANCCL_NCCL_LIB" >&2; exit 1; }
  export PLANCCL_NCCL_LIB=$real
  g=$((ngpus > 8 ? 8 : ngpus))
  out=build/results/$(date +%F)-${g}gpu
  mkdir -p "$out"
  bench=("$prefix/bin/planccl-bench" --lib "planccl=$prefix/lib/libplanccl.so" --lib "nccl=$real"
    --lib "nccl-symm=$real:symm" --baseline nccl -g "$g")
  # The standard sweep: every collective, float sum, in- and out-of-place, eager and graph;
  # progress on stderr, the tables in bench.txt, every number in bench.csv, plots beside them.
  pcl_log "benchmark on $g GPUs: planccl, NCCL, NCCL with symmetric windows -> $out/"
  echo "${bench[*]} --coll all -b 1K -e 256M -f 4 --csv $out/bench.csv" >"$out/command.txt"
  rc=0
  "${bench[@]}" --coll all -b 1K -e 256M -f 4 --csv "$out/bench.csv" >"$out/bench.txt" || rc=$?
  cat "$out/bench.txt"
  "${bench[@]}" --coll allreduce -b 1K -e 1K -G 0 -n 10 --place out --hostpath |
    grep '^# host path' | tee "$out/hostpath.txt" || rc=1
  py=python3
  "$py" -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
  if [ -f "$out/bench.csv" ] && "$py" -c 'import matplotlib' 2>/dev/null; then
    "$py" bench/plot.py "$out/bench.csv" --out "$out" || rc=1
  else
    echo "no plot: matplotlib is not importable (apt-get install python3-matplotlib)" >&2
  fi
  [ "$rc" = 0 ] || echo "planccl-bench: a run failed or a result was wrong (rc $rc), see above" >&2
  exit "$rc"
elif [ "$ngpus" -eq 1 ]; then
  out=build/results/$(date +%F)-1gpu
  mkdir -p "$out"
  pcl_log "one GPU: the shipped allreduce plans against a hand-written kernel, ranks sharing it -> $out/"
  PCL_SOURCE_DIR=$PCL_ROOT "$prefix/bin/planccl-refbench" --ranks 2,4,8 | tee "$out/refbench.txt"
else
  # The default set first, then the opt-in one; fp32 sum LL16 up to 16 KiB here (./test.sh runs
  # every dtype, op and packet format).
  pcl_log "no GPUs here: every shipped plan on the CPU simulator (fp32 sum, LL16, up to 16 KiB)"
  "$prefix/bin/planccl-plan" simulate --max-bytes 16K \
    $(find "$prefix/share/planccl/plans" -name "*.json" | sort) \
    $(find "$prefix/share/planccl/plans-extra" -name "*.json" | sort)
fi
