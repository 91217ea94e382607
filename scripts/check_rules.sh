#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The house rules a machine can check, run by ./test.sh: every tracked C/CUDA file is
# clang-format clean (.clang-format, clang-format 14 as on CI), private headers (*_int.h) sit
# in their module's private/ directory and are included by that module and tests only, and no
# tracked file speaks of how the work was done instead of the product (scripts/process_words.txt),
# and every include keeps the folders' layering (scripts/layers.txt).
# PCL_RULES_ONLY=format, private, words or layers checks that rule alone.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0

only=${PCL_RULES_ONLY:-}
case "$only" in
"" | format | private | words | layers) ;;
*)
  echo "check_rules: PCL_RULES_ONLY=$only: not a rule (format, private, words, layers)" >&2
  exit 2
  ;;
esac
# Whether rule $1 is checked in this run.
rule() { [ -z "$only" ] || [ "$only" = "$1" ]; }

mapfile -t sources < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
if ! rule format; then
  :
elif ! command -v clang-format >/dev/null; then
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
rule private && while IFS= read -r hdr; do
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

# No words of how the work was done (work diaries, the numbered commands of a borrowed machine,
# dated run folders, ...) in tracked files: they say how a figure was obtained, which docs/ and
# git history hold, not what the product does. scripts/process_words.txt lists the patterns and
# scripts/process_words_allow.txt the product phrases that look like them, which are blanked out
# of a line before it is checked. Plans under test/data/ are taken as they are.
if rule words; then
  words=scripts/process_words.txt
  allow=scripts/process_words_allow.txt
  pats=$(grep -vE '^[[:space:]]*(#|$)' "$words" 2>/dev/null)
  if [ -z "$pats" ]; then
    echo "check_rules: $words is missing or lists no pattern" >&2
    exit 2
  fi
  # One sed command per allowed phrase: s/PHRASE//gI.
  strip=$(grep -vE '^[[:space:]]*(#|$)' "$allow" 2>/dev/null | sed 's|/|\\/|g; s|.*|s/&//gI|')
  nwords=0
  while IFS= read -r hit; do
    where=${hit%%:*}
    text=${hit#*:}
    where=$where:${text%%:*}
    text=${text#*:}
    rest=$text
    [ -n "$strip" ] && rest=$(printf '%s\n' "$text" | sed -E "$strip")
    if printf '%s\n' "$rest" | grep -qiE -e "$pats"; then
      echo "$where: ${text#"${text%%[![:space:]]*}"}"
      nwords=$((nwords + 1))
    fi
  done < <(git ls-files -z -- ':!:test/data/' ":!:$words" ":!:$allow" |
    xargs -0 -r grep -nHIsiE -e "$pats" --)
  if [ $nwords != 0 ]; then
    echo "check_rules: words of how the work was done on $nwords line(s): say it in product terms" \
      "(the patterns: $words; a product phrase that only looks like one goes in $allow)"
    status=1
  fi
fi

# Each folder includes only the headers of the folders below it (scripts/layers.txt): the
# modules' one-way layering, which their CMake targets alone cannot hold (the shim's folders
# share one private/ directory).
if rule layers && ! python3 scripts/check_layers.py scripts/layers.txt; then
  status=1
fi

[ $status = 0 ] && echo "check_rules: ${#sources[@]} files clean"
exit $status
