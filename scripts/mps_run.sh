#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs one command with several processes sharing each GPU: starts a private CUDA MPS daemon
# (its own pipe and log directories, so no other job's daemon is touched), lets NCCL accept
# several ranks of a communicator on one GPU, runs the command, and stops the daemon whatever
# the command did. Usage: scripts/mps_run.sh [--nccl /path/to/libnccl.so.2] command [args...]
# --nccl (or PLANCCL_NCCL_LIB) names the real NCCL for planccl's fallback; it must be 2.30 or
# later (older NCCL refuses two ranks on one GPU: "Duplicate GPU detected").
set -uo pipefail

nccl=${PLANCCL_NCCL_LIB:-}
if [ "${1:-}" = --nccl ]; then
  nccl=$2
  shift 2
fi
[ $# -gt 0 ] || { echo "usage: $0 [--nccl LIB] command [args...]" >&2; exit 2; }
command -v nvidia-cuda-mps-control >/dev/null ||
  { echo "mps_run: nvidia-cuda-mps-control not found (it ships with the NVIDIA driver)" >&2; exit 2; }

dir=$(mktemp -d /tmp/pcl-mps.XXXXXX) || exit 1
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
stop() {
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  # The daemon exits once its clients are gone; give it a moment before its directories go.
  for _ in 1 2 3 4 5 6 7 8 9 10; do pgrep -f "nvidia-cuda-mps-control -d" >/dev/null || break; sleep 0.2; done
  rm -rf "$dir"
}
trap stop EXIT
nvidia-cuda-mps-control -d || { echo "mps_run: the MPS daemon did not start" >&2; exit 1; }

export NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
[ -n "$nccl" ] && export PLANCCL_NCCL_LIB=$nccl
"$@"
