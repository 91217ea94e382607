#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# NCCL clients besides PyTorch: CuPy's and JAX's collectives (cupy_nccl.py, jax_nccl.py), each run
# once over the real NCCL alone ("nccl") and once through planccl ("planccl"), every rank checking.
# Usage: test/clients/run.sh [install prefix]   (default: build/install)
#   PCL_CLIENT_NCCL=<libnccl.so.2>  the real NCCL, 2.30 or later for ranks sharing a GPU: preloaded
#                        by the nccl runs, planccl's PLANCCL_NCCL_LIB in the planccl runs (default:
#                        PLANCCL_NCCL_LIB, which scripts/mps_run.sh --nccl sets)
#   PCL_CLIENT_PYTHON=python3   PCL_CLIENT_WORLD=2   PCL_CLIENT_ONLY=cupy|jax
#   PCL_CLIENT_PORT=29511       JAX's coordinator port (the planccl run takes the next one)
#   PCL_CLIENT_TIMEOUT=300      seconds each rank may take
#   PCL_CLIENT_GRACE=60         seconds the other ranks get once one rank has failed
#   PCL_CLIENT_EXTRA=1          a third run through planccl with the opt-in plans (plans-extra)
# More ranks than GPUs share them: run it under scripts/mps_run.sh. Exits 0 when every run that
# was not skipped passed (at least one), 77 when all were skipped, else 1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/build/install}
py=${PCL_CLIENT_PYTHON:-python3}
world=${PCL_CLIENT_WORLD:-2}
only=${PCL_CLIENT_ONLY:-}
nccl=${PCL_CLIENT_NCCL:-${PLANCCL_NCCL_LIB:-}}
port=${PCL_CLIENT_PORT:-29511}
grace=${PCL_CLIENT_GRACE:-60}
limit=${PCL_CLIENT_TIMEOUT:-300}

case "$only" in
"" | cupy | jax) ;;
*)
  echo "PCL_CLIENT_ONLY=$only: cupy or jax" >&2
  exit 2
  ;;
esac
[[ $world =~ ^[1-9][0-9]*$ ]] || { echo "PCL_CLIENT_WORLD=$world: a rank count" >&2; exit 2; }
# Preloads and dlopen take the paths as given: make them absolute, whatever directory the ranks use.
[ -d "$prefix" ] && prefix=$(cd "$prefix" && pwd)
lib=$prefix/lib/libplanccl.so
[ -f "$lib" ] || { echo "no $lib: build and install planccl first (cmake --install)" >&2; exit 1; }
if [ -n "$nccl" ]; then
  [ -f "$nccl" ] || { echo "PCL_CLIENT_NCCL=$nccl: no such file" >&2; exit 1; }
  nccl=$(cd "$(dirname "$nccl")" && pwd)/$(basename "$nccl")
fi
command -v "$py" >/dev/null || { echo "no $py (PCL_CLIENT_PYTHON): skipped" >&2; exit 77; }

ngpu=0
command -v nvidia-smi >/dev/null && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  visible=$(awk -F, '{ print ($0 == "" ? 0 : NF) }' <<<"$CUDA_VISIBLE_DEVICES")
  [ "$visible" -lt "$ngpu" ] && ngpu=$visible
fi
[ "$ngpu" -ge 1 ] || { echo "needs a GPU, nvidia-smi -L lists none: skipped" >&2; exit 77; }
if [ "$world" -gt "$ngpu" ] && [ -z "$nccl" ]; then
  echo "$world ranks on $ngpu GPU(s) share a GPU, which needs PCL_CLIENT_NCCL: a real NCCL 2.30 or" \
    "later (older ones refuse two ranks on one GPU: \"Duplicate GPU detected\"): skipped" >&2
  exit 77
fi

nver=
if [ -n "$nccl" ]; then
  nver=$("$py" -c 'import ctypes, sys
v = ctypes.c_int(0)
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print(v.value)' "$nccl" 2>/dev/null)
fi
if [ "$world" -gt "$ngpu" ]; then
  [ -n "$nver" ] && [ "$nver" -lt 23000 ] &&
    echo "== note: $nccl is NCCL $nver, older than 2.30: it refuses ranks sharing a GPU"
  [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ] &&
    echo "== note: ranks share a GPU and CUDA_MPS_PIPE_DIRECTORY is unset: run under scripts/mps_run.sh"
fi

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_MULTI_RANK_GPU_ENABLE=1 PYTHONUNBUFFERED=1
# XLA takes most of a GPU for the first process by default; the ranks of one GPU split it.
per_gpu=$(((world + ngpu - 1) / ngpu))
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-$(awk -v n="$per_gpu" \
  'BEGIN { printf "%.2f", 0.8 / n }')}

out=$(mktemp -d /tmp/pcl_clients_XXXXXX) || exit 1
# CuPy's NCCL module and XLA load libnccl.so.2 by name. The planccl run preloads a library named
# otherwise, so without this a client might find no NCCL there, or another one than the nccl run's.
libpath=
if [ -n "$nccl" ]; then
  libpath=$out/nccl-lib
  mkdir -p "$libpath" && ln -s "$nccl" "$libpath/libnccl.so.2"
fi
real="the clients' own"
[ -n "$nccl" ] && real="$nccl${nver:+ ($nver)}"
echo "== clients: world $world on $ngpu GPU(s), $py, planccl $lib, real NCCL $real; logs in $out"

fails=0 passes=0
# The ranks of the run in progress: an interrupted runner must not leave them holding the GPU.
running=()
trap '[ ${#running[@]} -gt 0 ] && kill -TERM "${running[@]}" 2>/dev/null; exit 130' INT TERM
run() { # client, mode (nccl, planccl or planccl-extra), coordinator port
  local client=$1 mode=$2 cport=$3 t0=$SECONDS dir=$out/$1-$2 r
  mkdir -p "$dir/rendezvous"
  local -a envs=(WORLD_SIZE="$world" LOCAL_WORLD_SIZE="$world") args pids
  local -A rc=()
  if [ "$mode" = nccl ]; then
    [ -n "$nccl" ] && envs+=(LD_PRELOAD="$nccl${LD_PRELOAD:+:$LD_PRELOAD}")
  else
    # Stats go to each rank's stderr when the client destroys a communicator.
    # XLA opens NCCL with dlopen("libnccl.so.2") and takes its functions from that handle, which
    # is a library already loaded under that SONAME if there is one, else its own wheel's copy
    # (seen on one GPU: its NCCL 2.28.9 answered, not planccl). So JAX gets planccl under NCCL's
    # SONAME (lib/nccl/libnccl.so.2, the same library); CuPy binds by name and takes either.
    local pre=$lib
    [ "$client" = jax ] && [ -f "$prefix/lib/nccl/libnccl.so.2" ] && pre=$prefix/lib/nccl/libnccl.so.2
    envs+=(LD_PRELOAD="$pre${LD_PRELOAD:+:$LD_PRELOAD}" PLANCCL_STATS=1
      PLANCCL_DEBUG="${PLANCCL_DEBUG:-WARN}")
    [ -n "$nccl" ] && envs+=(PLANCCL_NCCL_LIB="$nccl")
    [ "$mode" = planccl-extra ] && envs+=(PLANCCL_PLAN_DIR="$prefix/share/planccl/plans-extra")
  fi
  [ -n "$libpath" ] && envs+=(LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$libpath")
  # JAX falls back to the CPU when its GPU backend fails; the failure must show instead.
  [ "$client" = jax ] && envs+=(JAX_PLATFORMS="${JAX_PLATFORMS:-cuda}")

  for ((r = 0; r < world; r++)); do
    if [ "$client" = cupy ]; then
      args=("$here/cupy_nccl.py" --rendezvous "$dir/rendezvous")
    else
      args=("$here/jax_nccl.py" --port "$cport" --local-device $((r % ngpu)))
    fi
    timeout "$limit" env "${envs[@]}" RANK=$r LOCAL_RANK=$r "$py" "${args[@]}" >"$dir/rank$r.log" 2>&1 &
    pids[r]=$!
  done
  running=("${pids[@]}")

  # A failed rank leaves its peers waiting in NCCL until their timeout: give them some time to
  # say what they saw, then stop them.
  local first_fail='' stopped=0 alive
  while :; do
    alive=0
    for ((r = 0; r < world; r++)); do
      [ -n "${rc[$r]+set}" ] && continue
      if kill -0 "${pids[r]}" 2>/dev/null; then
        alive=$((alive + 1))
        continue
      fi
      wait "${pids[r]}"
      rc[$r]=$?
      case ${rc[$r]} in 0 | 77) ;; *) [ -z "$first_fail" ] && first_fail=$SECONDS ;; esac
    done
    [ $alive = 0 ] && break
    if [ -n "$first_fail" ] && [ $stopped = 0 ] && [ $((SECONDS - first_fail)) -ge "$grace" ]; then
      for ((r = 0; r < world; r++)); do
        [ -z "${rc[$r]+set}" ] && kill -TERM "${pids[r]}" 2>/dev/null
      done
      stopped=1
    fi
    sleep 1
  done
  running=()

  local rcs="" all0=1 all77=1
  for ((r = 0; r < world; r++)); do
    rcs+="${rcs:+ }${rc[$r]}"
    [ "${rc[$r]}" = 0 ] || all0=0
    [ "${rc[$r]}" = 77 ] || all77=0
    echo "   -- rank $r, rc ${rc[$r]}: $dir/rank$r.log"
    grep -aiE '^\[(rank|proc) [0-9]+\] |planccl|stats' "$dir/rank$r.log" | head -200 | sed 's/^/   /'
    case ${rc[$r]} in
    0 | 77) ;;
    *)
      # The reason may be only in what the libraries wrote (XLA's and NCCL's own errors).
      local rest line
      rest=$(grep -aivE '^\[(rank|proc) [0-9]+\] |planccl|stats' "$dir/rank$r.log" | tail -n 25)
      if [ -n "$rest" ]; then
        echo "   last other lines of rank $r's log:"
        while IFS= read -r line; do echo "   | $line"; done <<<"$rest"
      fi
      ;;
    esac
  done
  local took="$((SECONDS - t0)) s"
  if [ $all0 = 1 ]; then
    passes=$((passes + 1))
    echo "== $client $mode: passed ($took)"
    if [ "$mode" != nccl ] && ! grep -aq '^planccl stats:' "$dir"/rank*.log; then
      echo "== note: $client $mode: no planccl stats in the logs: the client destroyed no" \
        "communicator before exiting, or its NCCL calls did not reach planccl (see libraries:)"
    fi
  elif [ $all77 = 1 ]; then
    local why
    why=$(grep -ahm1 'skipped:' "$dir/rank0.log" | sed 's/^\[[^]]*\] skipped: //')
    echo "== $client $mode: skipped (${why:-no reason printed})"
  else
    fails=$((fails + 1))
    [ $stopped = 1 ] &&
      echo "   (the ranks still running ${grace} s after the first failure were stopped)"
    echo "== $client $mode: FAILED (rc $rcs, $took)"
    if [ "$mode" = nccl ]; then
      local who="CuPy's"
      [ "$client" = jax ] && who="XLA's"
      echo "== note: $client nccl has no planccl in it: the reason printed above is $who and the" \
        "real NCCL's own (a refusal included); record it beside the planccl run's result"
    fi
  fi
}

for client in cupy jax; do
  [ -n "$only" ] && [ "$only" != "$client" ] && continue
  run "$client" nccl "$port"
  run "$client" planccl $((port + 1))
  if [ "${PCL_CLIENT_EXTRA:-0}" = 1 ]; then
    if [ -d "$prefix/share/planccl/plans-extra" ]; then
      run "$client" planccl-extra $((port + 2))
    else
      echo "== note: no $prefix/share/planccl/plans-extra: $client planccl-extra not run"
    fi
  fi
done

if [ $fails != 0 ]; then
  echo "== clients: $fails run(s) FAILED (logs in $out)"
  exit 1
fi
[ $passes = 0 ] && { echo "== clients: all skipped"; exit 77; }
echo "== clients: passed"
