#!/usr/bin/env bash
# Every ```cpp block of README.md, extracted from the README itself and built against an
# installed xgrad as a user would paste it: a block with a main() is built and run (it
# must exit 0), any other is compiled.   usage: readme_examples_test.sh BUILD_DIR SOURCE_DIR [README]
set -eu
build=$1 source=$2 readme=${3:-$2/README.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
mkdir -p "$work/project" "$work/run"
awk -v dir="$work/project" '
  /^```cpp/ { n++; file = sprintf("%s/example_%02d.cpp", dir, n); printf "" > file; inside = 1; next }
  /^```/    { inside = 0; next }
  inside    { print >> file }' "$readme"
blocks=$(ls "$work/project"/example_*.cpp | wc -l)
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
for file in "$work/project"/example_*.cpp; do
  name=$(basename "$file" .cpp)
  line=$(grep -n '```cpp' "$readme" | sed -n "$((10#${name#example_}))p" | cut -d: -f1)
  if ! cmake --build "$work/build" --target "$name" >"$work/$name.log" 2>&1; then
    failed=$((failed + 1))
    echo "FAILED: the example at README.md line $line does not compile:"
    grep -m 5 "error" "$work/$name.log"
    continue
  fi
  if [ -x "$work/build/$name" ] && ! (cd "$work/run" && "$work/build/$name" >"$work/$name.out" 2>&1); then
    failed=$((failed + 1))
    echo "FAILED: the example at README.md line $line exits non-zero:"
    tail -n 5 "$work/$name.out"
    continue
  fi
  passed=$((passed + 1))
done
echo "$passed passed, $failed failed ($blocks examples in the README)"
test "$failed" -eq 0 -a "$blocks" -gt 0
