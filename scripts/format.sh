#!/usr/bin/env bash
# Formats C++ sources with the repository's .clang-format.
#   scripts/format.sh [--check] [PATHS...]
# PATHS are files or folders (default: the folders already in the style,
# io/ and tests/server/). --check changes nothing and exits 1 when a file
# differs from the style, listing it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
check=0
paths=()
for a in "$@"; do
  case $a in
    --check) check=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) paths+=("$a") ;;
  esac
done
((${#paths[@]})) || paths=("$here/io" "$here/tests/server")
command -v clang-format >/dev/null || { echo "format.sh: clang-format is missing (scripts/setup.sh installs it)" >&2; exit 2; }

mapfile -d '' files < <(find "${paths[@]}" -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0)
((${#files[@]})) || exit 0
if ((check)); then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --style=file "$f" | cmp -s - "$f"; then
      echo "not formatted: ${f#"$here"/}"
      bad=1
    fi
  done
  exit $bad
fi
clang-format --style=file -i "${files[@]}"
