#!/usr/bin/env bash
# The layers are the build's (cmake/layers.cmake). For each layer, held to what it
# declared (its own trees, the public trees of the layers below it, the internal trees it
# names in INTERNALS_OF):
#   - its include path holds no other tree;
#   - every header outside its reach (another layer's internal header, or a public one
#     above or beside it: nn and optim) fails to compile with "No such file", while its
#     own compile;
#   - no source of the layer includes an xgrad header outside its reach.
# Then the negative case: the same checks on a doctored nn, given autograd's internal
# tree and a source that includes autograd's internal record.hpp, must fail, naming it.
#   usage: layering_test.sh LAYERS_FILE LAYERS_ROOT CXX
# LAYERS_FILE has one line per layer, written by CMake (tests/CMakeLists.txt): its name,
# its reach (trees, ;-separated), its include directories, its source folder, its sources.
set -u
layers_file=$1 layers_root=$2 cxx=$3
source "$(dirname "$0")/lib.sh"  # check, finish, $work

headers_in() { (cd "$1" && find -L xgrad -name '*.hpp' | sort); }  # a tree's headers, as included
for tree in "$layers_root"/*; do headers_in "$tree"; done | sort -u >"$work/all"

# check_layer NAME REACH DIRS SOURCE_DIR SOURCES: prints one line per violation; fails
# when there is any.
check_layer() {
  local layer=$1 reach=$2 dirs=$3 source_dir=$4 sources=$5
  local flags=() reach_trees=() violations=0
  IFS=';' read -r -a reach_trees <<<"$reach"
  local -A allowed=()
  for tree in "${reach_trees[@]}"; do allowed[$tree]=1; done
  IFS=';' read -r -a list <<<"$dirs"
  for dir in "${list[@]}"; do
    case "$dir" in
      "$layers_root"/*)
        flags+=(-I "$dir")
        if [ -z "${allowed[$dir]:-}" ]; then
          echo "$layer: its include path holds $dir, which it does not declare"
          violations=$((violations + 1))
        fi
        ;;
      "" | /usr/include) ;;  # the compiler's own: given again, it would shadow libstdc++'s order
      *) flags+=(-isystem "$dir") ;;
    esac
  done
  for tree in "${reach_trees[@]}"; do [ -d "$tree" ] && headers_in "$tree"; done | sort -u >"$work/reach"
  comm -23 "$work/all" "$work/reach" >"$work/hidden"

  while read -r header; do
    echo "#include \"$header\"" >"$work/probe.cpp"
    if ! "$cxx" -std=c++20 -fsyntax-only "${flags[@]}" "$work/probe.cpp" 2>&1 | grep -q "$header: No such file"; then
      echo "$layer: $header is within reach of its include path"
      violations=$((violations + 1))
    fi
  done <"$work/hidden"

  IFS=';' read -r -a files <<<"$sources"
  for file in "${files[@]}"; do
    case "$file" in /*) ;; *) file=$source_dir/$file ;; esac
    while read -r header; do
      if ! grep -qx "$header" "$work/reach"; then
        echo "$layer: ${file#"$source_dir"/} includes $header, outside its reach"
        violations=$((violations + 1))
      fi
    done < <(sed -nE 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](xgrad/[^>"]+)[>"].*|\1|p' "$file")
  done
  test "$violations" -eq 0
}

layers=0
while IFS=$'\t' read -r layer reach dirs source_dir sources; do
  layers=$((layers + 1))
  own=$( (headers_in "$layers_root/$layer"; headers_in "$layers_root/$layer-internal") | head -n 1)
  echo "#include \"$own\"" >"$work/own.cpp"
  own_flags=()
  IFS=';' read -r -a list <<<"$dirs"
  for dir in "${list[@]}"; do case "$dir" in "" | /usr/include) ;; *) own_flags+=(-I "$dir") ;; esac; done
  check "$layer: its own $own compiles" "$cxx" -std=c++20 -fsyntax-only "${own_flags[@]}" "$work/own.cpp"
  check "$layer: reaches only what it declares" check_layer "$layer" "$reach" "$dirs" "$source_dir" "$sources"
done <"$layers_file"
check "the layers file lists the layers ($layers)" test "$layers" -ge 7

# The negative case: nn as it would be if its build leaked autograd's internals and one of
# its sources used them.
IFS=$'\t' read -r layer reach dirs source_dir sources < <(grep -P '^nn\t' "$layers_file")
echo '#include "xgrad/autograd/record.hpp"  // an internal header of autograd' >"$work/leak.cpp"
check_layer nn "$reach" "$dirs;$layers_root/autograd-internal" "$source_dir" "$sources;$work/leak.cpp" >"$work/doctored"
check "a doctored nn fails the test" test $? -ne 0
check "  for its include path" grep -q "nn: its include path holds $layers_root/autograd-internal" "$work/doctored"
check "  for the reach of autograd's internal headers" grep -q "nn: xgrad/autograd/record.hpp is within reach" "$work/doctored"
check "  for the source that includes record.hpp" grep -q "leak.cpp includes xgrad/autograd/record.hpp" "$work/doctored"
finish
