#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The one command for the GPU machine, one GPU or more: builds planccl (dependencies from .gpu/
# when the host has no package registry) twice, as shipped and with the kernels' phase timing
# (-DPCL_KPROF=ON), runs every plan on the GPUs against the simulator (exec_plans), the plan vs
# hand-written kernel benchmark (planccl-refbench, 2/4/8 ranks), the other GPU tests (ctest label
# gpu; those that need two devices skip with 77 below that), the PyTorch suite (world size 1 on
# one GPU), and with 2+ GPUs the tensor-parallel decode benchmark and the side-by-side benchmark
# (planccl, NCCL, NCCL with symmetric windows); prints a summary table last.
# Usage: scripts/gpu_check.sh [quick|build|core|full]   (quick: exec_plans --quick and the
# benchmark only; build: build only; core: everything but the LL-kernel rerun and the refbench's
# extra variants, exec_plans up to 64 KiB, about 8 minutes on one H200 with the build, so it fits
# a 10-minute limit; full, the default: everything). Logs go to $OUT or build-gpu/logs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=${PLANCCL_SOCKET_IFNAME:-lo}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-full}
# Stages that core and full both run.
more=0
[ "$mode" = full ] || [ "$mode" = core ] && more=1
logs=${OUT:-$root/build-gpu/logs}
mkdir -p "$logs"
summary=()
note() { summary+=("$1"); }

args=""
if [ -d .gpu/debs ] && ! [ -f /usr/include/yajl/yajl_tree.h ]; then
  args="$(scripts/gpu_deps.sh)"
  export PCL_NO_APT=1
fi
if ! [ -f "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" ]; then
  inc=$(python3 -c 'import nvidia.nccl,os; print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))' 2>/dev/null)
  [ -f "$inc/nccl.h" ] || inc=$root/.gpu
  args="$args -DPCL_NCCL_INCLUDE_DIR=$inc"
  export PCL_NO_APT=1
fi
export CMAKE_ARGS="${CMAKE_ARGS:-} $args"
source scripts/common.sh
pcl_install_deps || exit 1
mkdir -p build-gpu build-gpu-prof
# Both builds at once (the kernels' translation unit dominates and compiles on one core each).
pcl_build build-gpu >"$logs/build.log" 2>&1 &
b1=$!
PCL_BUILD_TARGET=planccl-refbench pcl_build build-gpu-prof -DPCL_KPROF=ON -DPCL_BUILD_TESTS=OFF \
  >"$logs/build_prof.log" 2>&1 &
b2=$!
wait $b1 || { tail -50 "$logs/build.log"; echo "BUILD FAILED"; exit 1; }
wait $b2 || { tail -50 "$logs/build_prof.log"; echo "BUILD (PCL_KPROF) FAILED"; exit 1; }
cmake --install build-gpu >/dev/null
grep -h 'took' "$logs/build.log" "$logs/build_prof.log"
export PLANCCL_NCCL_LIB=${PLANCCL_NCCL_LIB:-$(scripts/find_real_nccl.sh)}
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "real NCCL: $PLANCCL_NCCL_LIB; GPUs: $ngpus"
[ "$mode" = build ] && exit 0

# Every plan on the GPUs, bit for bit against the simulator.
xargs_q=""
[ "$mode" = quick ] && xargs_q="--quick"
# core fits a 10-minute limit: sizes up to 64 KiB (every plan, group, dtype and op still
# runs; without the limit the run takes over 8 minutes on one H200).
[ "$mode" = core ] && xargs_q="--max-bytes 65536"
# PCL_EXEC_PLANS_ARGS adds arguments (e.g. "--ranks 2" to split a long run in two).
# shellcheck disable=SC2086
PCL_SOURCE_DIR=$root timeout "${PCL_EXEC_PLANS_TIMEOUT:-900}" build-gpu/test/gpu/exec_plans $xargs_q \
  ${PCL_EXEC_PLANS_ARGS:-} >"$logs/exec_plans.log" 2>&1
rc=$?
sed -n '/^mode  *ranks/,$p' "$logs/exec_plans.log"
[ $rc = 124 ] && echo "exec_plans: TIMED OUT (see $logs/exec_plans.log)"
note "exec_plans $xargs_q: rc $rc, $(grep -E '^exec_plans: [0-9]+ passed' "$logs/exec_plans.log" || echo 'no result')"

# The LL kernel where the EW kernels would run (PLANCCL_EW_KERNEL=0): the one-phase allreduce
# plans, which users' calls now run on the EW kernels, still pass on it.
if [ "$mode" = full ]; then
  PLANCCL_EW_KERNEL=0 PCL_SOURCE_DIR=$root timeout "${PCL_EXEC_PLANS_TIMEOUT:-900}" \
    build-gpu/test/gpu/exec_plans --quick --filter ll1 >"$logs/exec_plans_ll.log" 2>&1
  note "exec_plans --quick --filter ll1, PLANCCL_EW_KERNEL=0: rc $?, $(grep -E '^exec_plans: [0-9]+ passed' "$logs/exec_plans_ll.log" || echo 'no result')"
fi

# The soak: a million mixed planned allreduce calls on 2 ranks (plans, sizes, placements drawn
# at random, each result checked on the GPU), GPU and host memory compared before and after.
if [ $more = 1 ]; then
  PCL_SOURCE_DIR=$root timeout 300 build-gpu/test/gpu/exec_plans --ranks 2 \
    --soak "${PCL_SOAK_CALLS:-1000000}" >"$logs/soak.log" 2>&1
  note "soak: rc $?, $(grep -E '^  soak:' "$logs/soak.log" | head -1 || echo 'no result')"
fi

# A plan vs the hand-written kernel of its algorithm, same ranks, buffers and launch shape: on the
# EW kernels (what users' calls take), the LL kernel (PLANCCL_EW_KERNEL=0), the interpreter
# (PLANCCL_LL_KERNEL=0), and the phase breakdown from the PCL_KPROF build (its own timings carry
# the timers' cost).
# PCL_REFBENCH_VARIANTS picks some of: ew ll interp prof-ew prof-ll prof-interp.
variants="ew ll interp prof-ew prof-ll"
[ "$mode" = core ] && variants="ew"
for v in ${PCL_REFBENCH_VARIANTS:-$variants}; do
  case $v in prof-*) set -- build-gpu-prof "${v#prof-}" ;; *) set -- build-gpu "$v" ;; esac
  ll=1; ew=1
  [ "$2" = interp ] && ll=0
  [ "$2" = ew ] || ew=0
  PLANCCL_LL_KERNEL=$ll PLANCCL_EW_KERNEL=$ew PCL_SOURCE_DIR=$root \
    timeout "${PCL_REFBENCH_TIMEOUT:-240}" \
    "$1/bench/planccl-refbench" --ranks 2,4,8 >"$logs/refbench_$1_$2.log" 2>&1
  echo "== planccl-refbench ($1, $2): rc $?"
  grep -vE '^\s*$' "$logs/refbench_$1_$2.log" | grep -v '^# empty' | tail -40
  note "refbench ($1, $2): $(grep -E '^REFBENCH' "$logs/refbench_$1_$2.log" || echo 'no result')"
done

if [ $more = 1 ]; then
  # The other GPU tests (exec_plans ran above); two-device tests skip with 77 on one GPU.
  ( cd build-gpu && ctest -L gpu -E '^exec_plans$' -V --timeout 300 ${PCL_GPU_CTEST_ARGS:-} ) \
    >"$logs/gpu_tests.log" 2>&1
  rc=$?
  grep -E 'tests passed|Test +#[0-9]+:|\*\*\*|first failure|mismatch' "$logs/gpu_tests.log" | tail -40
  note "gpu ctest (other tests): $(grep -E 'tests passed' "$logs/gpu_tests.log" || echo 'no result') (rc $rc)"
  # Automatic registration under PyTorch, both allocators (over the fake NCCL on one GPU).
  if [ -x test/torch/autoreg.sh ]; then
    test/torch/autoreg.sh "$root/build-gpu/install" "$root/build-gpu/test/fakes/libfakenccl.so" \
      >"$logs/torch_autoreg.log" 2>&1
    note "torch automatic registration: rc $? ($(grep -c 'pcl_autoreg_torch: passed' "$logs/torch_autoreg.log") of 2 passed)"
  fi
  # The PyTorch suite: world size 1 on one GPU (every call forwarded and checked), 1, 2 and all
  # GPUs with more; then, with 2+ GPUs, the tensor-parallel decode benchmark.
  if [ -x test/torch/run.sh ]; then
    test/torch/run.sh "$root/build-gpu/install" >"$logs/torch.log" 2>&1
    note "torch suite: rc $? ($(grep -cE 'PASS|passed' "$logs/torch.log") pass lines; $logs/torch.log)"
    if [ "$ngpus" -ge 2 ]; then
      timeout 540 python3 bench/torch_tp_decode.py --nproc 2 --runs 3 \
        --prefix "$root/build-gpu/install" >"$logs/torch_tp_decode.log" 2>&1
      note "torch_tp_decode: rc $?"
      while IFS= read -r l; do note "  $l"; done < <(grep '^|' "$logs/torch_tp_decode.log")
    fi
  fi
  # TCP port channels between two processes through the real proxy, buffers in GPU memory.
  timeout 180 build-gpu/bench/planccl-portbench -b 4K -e 16M -n 5 --lat-iters 500 --device \
    >"$logs/portbench_device.log" 2>&1
  note "planccl-portbench --device: rc $?"
  while IFS= read -r l; do note "  $l"; done < <(grep -E '^#.*(latency|one way)' "$logs/portbench_device.log")
  if [ "$ngpus" -ge 2 ] && [ -x build-gpu/install/bin/planccl-bench ]; then
    # planccl, NCCL and NCCL with symmetric windows side by side; CSV and plots beside the log.
    build-gpu/install/bin/planccl-bench --coll all -b 1K -e 256M -f 4 -g 2 --baseline nccl \
      --lib "planccl=$root/build-gpu/install/lib/libplanccl.so" --lib "nccl=$PLANCCL_NCCL_LIB" \
      --lib "nccl-symm=$PLANCCL_NCCL_LIB:symm" --csv "$logs/bench.csv" >"$logs/bench.log" 2>&1
    note "planccl-bench --coll all: rc $? ($logs/bench.log, bench.csv)"
    python3 bench/plot.py "$logs/bench.csv" --out "$logs" >/dev/null 2>&1 ||
      /usr/bin/python3 bench/plot.py "$logs/bench.csv" --out "$logs" >/dev/null 2>&1
    build-gpu/install/bin/planccl-bench --coll allreduce -b 1K -e 1K -g 2 -G 0 -n 10 --hostpath \
      --lib "planccl=$root/build-gpu/install/lib/libplanccl.so" --lib "nccl=$PLANCCL_NCCL_LIB" \
      2>&1 | grep '^# host path' | tee "$logs/hostpath.log"
    while IFS= read -r l; do note "  $l"; done <"$logs/hostpath.log"
  fi
fi
echo
echo "===== summary ====="
for s in "${summary[@]}"; do echo "$s"; done
