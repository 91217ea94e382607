# SPDX-License-Identifier: MIT
# Shared by run.sh and test.sh: install what is missing, then configure and build planccl.
# Sourced, not executed. CMAKE_ARGS from the environment reaches every cmake configure.

PCL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PCL_PACKAGES="cmake make gcc pkg-config libyajl-dev check libsubunit-dev libibverbs-dev python3 python3-matplotlib iproute2 clang clang-format"

pcl_log() { printf '== %s\n' "$*"; }

pcl_install_deps() {
  local missing=()
  # Hosts without a package registry (GPU machines) pass the dependencies through CMAKE_ARGS.
  if [ "${PCL_NO_APT:-0}" = 1 ]; then PCL_PACKAGES=""; fi
  for p in $PCL_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      pcl_log "installing: ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        { echo "apt-get install failed for: ${missing[*]}" >&2; return 1; }
    else
      echo "missing packages: ${missing[*]}" >&2
      echo "install them with: sudo apt-get install ${missing[*]}" >&2
      return 1
    fi
  fi
  if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "the CUDA toolkit is needed under CUDA_HOME=$CUDA_HOME" >&2
    return 1
  fi
  if [ ! -f "$CUDA_HOME/include/nccl.h" ] && [[ "${CMAKE_ARGS:-}" != *PCL_NCCL_INCLUDE_DIR* ]]; then
    echo "nccl.h is needed under $CUDA_HOME/include (or CMAKE_ARGS=-DPCL_NCCL_INCLUDE_DIR=...)" >&2
    return 1
  fi
}

# pcl_build <build dir> [extra cmake args...]
# PCL_BUILD_TARGET: the one target to build (default all); PCL_BUILD_NICE: the build's niceness
# (a build that runs beside others, whose result is needed last).
pcl_build() {
  local dir=$1; shift
  # shellcheck disable=SC2086
  cmake -S "$PCL_ROOT" -B "$dir" -DCMAKE_INSTALL_PREFIX="$dir/install" "$@" ${CMAKE_ARGS:-} >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; return 1; }
  local start=$SECONDS
  # shellcheck disable=SC2086
  ${PCL_BUILD_NICE:+nice -n $PCL_BUILD_NICE} cmake --build "$dir" -j "$(nproc)" \
    ${PCL_BUILD_TARGET:+--target $PCL_BUILD_TARGET} || return 1
  pcl_log "build of $dir took $((SECONDS - start)) s"
}
