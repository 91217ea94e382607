#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The house rules a machine can check, run by ./test.sh: every tracked C/CUDA file is
# clang-format clean (.clang-format, clang-format 14 as on CI), and private headers (*_int.h) sit
# in their module's private/ directory and are included by that module and tests only.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0

mapfile -t sources < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
if ! command -v clang-format >/dev/null; then
  echo "check_rules: clang-format not installed (scripts/common.sh installs it)" >&2
  status=1
else
  major=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
  if [ "$major" != 14 ]; then
    # Other versions lay out some constructs differently; the tree is formatted with 14.
    echo "check_rules: clang-format $major is not 14: formatting not checked"
  elif ! out=$(clang-format --dry-run --Werror "${sources[@]}" 2>&1); then
    echo "$out" | grep -o '^[^:]*:[0-9]*' | sort -u | head -40 | sed 's/$/: not clang-format clean/'
    echo "check_rules: run: git ls-files '*.c' '*.h' '*.cu' '*.cuh' | xargs clang-format -i"
    status=1
  fi
fi

# Private headers live in <module>/private/ (or <module>/<folder>/private/), the include
# directories a module's targets do not export, and only files under that directory's parent
# (and tests) include them: executor/private/ serves all of executor/, executor/plan/private/
# only executor/plan/.
while IFS= read -r hdr; do
  name=$(basename "$hdr")
  dir=$(dirname "$hdr")
  case "$dir" in
  */private) module=${dir%/private} ;;
  *)
    echo "$hdr: a private header (*_int.h) outside $dir/private/"
    status=1
    module=$dir
    ;;
  esac
  while IFS= read -r user; do
    case "$user" in test/*) continue ;; esac
    case "$user" in
    "$module"/*) ;;
    *)
      echo "$user: includes $hdr, private to $module/"
      status=1
      ;;
    esac
  done < <(git grep -l "#include \"$name\"" -- '*.c' '*.h' '*.cu' '*.cuh')
done < <(git ls-files '*_int.h')

[ $status = 0 ] && echo "check_rules: ${#sources[@]} files clean"
exit $status
