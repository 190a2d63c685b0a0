#!/usr/bin/env bash
# Every ```cpp block of README.md and of every docs/*.md page (or of the FILEs given),
# extracted from the pages themselves and built against an installed xgrad as a user
# would paste it: a block with a main() is built and run (it must exit 0), any other is
# compiled. A failure names its page and line ("docs/optim.md line 12").
#   usage: readme_examples_test.sh BUILD_DIR SOURCE_DIR [FILE...]
set -eu
build=$1 source=$2
shift 2
if [ $# -gt 0 ]; then
  pages=("$@")
else
  shopt -s nullglob
  pages=("$source/README.md" "$source"/docs/*.md)
  shopt -u nullglob
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
mkdir -p "$work/project" "$work/run"
# One file per block, numbered across all pages; blocks.tsv says where each came from:
# NAME <tab> PAGE <tab> LINE (the line of its ```cpp).
: >"$work/blocks.tsv"
for page in "${pages[@]}"; do
  label=${page#"$source"/}
  awk -v dir="$work/project" -v n="$(wc -l <"$work/blocks.tsv")" -v label="$label" '
    /^```cpp/ { n++; name = sprintf("example_%03d", n); file = dir "/" name ".cpp"
                printf "" > file; inside = 1
                printf "%s\t%s\t%d\n", name, label, FNR; next }
    /^```/    { if (inside) close(file); inside = 0; next }
    inside    { print >> file }' "$page" >>"$work/blocks.tsv"
done
blocks=$(wc -l <"$work/blocks.tsv")
{
  echo "cmake_minimum_required(VERSION 3.20)"
  echo "project(readme_examples LANGUAGES CXX)"
  echo "set(CMAKE_CXX_STANDARD 20)"
  echo "find_package(xgrad REQUIRED)"
  for file in "$work/project"/example_*.cpp; do
    name=$(basename "$file" .cpp)
    if grep -q "int main(" "$file"; then
      echo "add_executable($name $name.cpp)"
    else
      echo "add_library($name OBJECT $name.cpp)"
    fi
    if grep -q "xgrad/distributed" "$file"; then
      echo "target_link_libraries($name PRIVATE xgrad::xgrad xgrad::distributed)"
    else
      echo "target_link_libraries($name PRIVATE xgrad::xgrad)"
    fi
  done
} >"$work/project/CMakeLists.txt"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$work/project" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
      "${launcher[@]}" >/dev/null
passed=0 failed=0
while IFS=$'\t' read -r name page line; do
  if ! cmake --build "$work/build" --target "$name" >"$work/$name.log" 2>&1; then
    failed=$((failed + 1))
    echo "FAILED: $page line $line: the example does not compile:"
    grep -m 5 "error" "$work/$name.log"
    continue
  fi
  if [ -x "$work/build/$name" ] && ! (cd "$work/run" && "$work/build/$name" >"$work/$name.out" 2>&1); then
    failed=$((failed + 1))
    echo "FAILED: $page line $line: the example exits non-zero:"
    tail -n 5 "$work/$name.out"
    continue
  fi
  passed=$((passed + 1))
done <"$work/blocks.tsv"
echo "$passed passed, $failed failed ($blocks examples in ${#pages[@]} pages)"
test "$failed" -eq 0 -a "$blocks" -gt 0
