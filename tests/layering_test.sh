#!/usr/bin/env bash
# The layers are the build's: compiled with a layer's own include path, every header of a
# layer it may not see (above it, or beside it: nn and optim) fails with "No such file",
# while a header of its own compiles.   usage: layering_test.sh LAYERS_FILE CXX
# LAYERS_FILE has one line per layer, "<name><TAB><its include directories, ;-separated>",
# written by CMake from the targets themselves (tests/CMakeLists.txt).
set -u
layers_file=$1 cxx=$2
source "$(dirname "$0")/lib.sh"  # check, finish, $work

headers_in() { (cd "$1" && find -L xgrad -name '*.hpp' | sort); }  # a layer's tree, as included
trees=$(awk -F'\t' '{print $2}' "$layers_file" | tr ';' '\n' | grep '/layers/' | sort -u)
for tree in $trees; do headers_in "$tree"; done | sort -u >"$work/all"

while IFS=$'\t' read -r layer dirs; do
  flags=() visible_trees=()
  IFS=';' read -r -a list <<<"$dirs"
  for dir in "${list[@]}"; do
    case "$dir" in
      */layers/*) flags+=(-I "$dir") visible_trees+=("$dir") ;;
      "" | /usr/include) ;;  # the compiler's own: given again, it would shadow libstdc++'s order
      *) flags+=(-isystem "$dir") ;;
    esac
  done
  for tree in "${visible_trees[@]}"; do headers_in "$tree"; done | sort -u >"$work/visible"
  comm -23 "$work/all" "$work/visible" >"$work/hidden"
  own=$(headers_in "$(printf '%s\n' "${visible_trees[@]}" | grep "/layers/$layer\$")" | head -n 1)

  echo "#include \"$own\"" >"$work/own.cpp"
  check "$layer: its own $own compiles" "$cxx" -std=c++20 -fsyntax-only "${flags[@]}" "$work/own.cpp"
  refused=0 compiled=()
  while read -r header; do
    echo "#include \"$header\"" >"$work/up.cpp"
    if "$cxx" -std=c++20 -fsyntax-only "${flags[@]}" "$work/up.cpp" 2>&1 | grep -q "$header: No such file"; then
      refused=$((refused + 1))
    else
      compiled+=("$header")
    fi
  done <"$work/hidden"
  check "$layer: all $(wc -l <"$work/hidden") headers of other layers are out of reach (${compiled[*]:-})" \
    test "${#compiled[@]}" -eq 0
done <"$layers_file"
finish
