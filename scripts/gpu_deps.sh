#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# For GPU hosts without a package registry: unpacks the Debian packages carried in .gpu/debs
# (fetched beforehand with `apt-get download`) into .gpu/root and prints the CMake arguments
# that point the build at them. Usage: CMAKE_ARGS="$(scripts/gpu_deps.sh)" ./test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)/.gpu
mkdir -p "$root/root"
for f in "$root"/debs/*.deb; do dpkg-deb -x "$f" "$root/root"; done
echo "-DCMAKE_PREFIX_PATH=$root/root/usr -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu"
