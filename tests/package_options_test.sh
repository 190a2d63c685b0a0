#!/usr/bin/env bash
# The library alone needs only its own dependencies: configured with the tests, the
# trainer and the benchmark off (as when it is added with add_subdirectory), xgrad looks
# for neither CLI11 nor stb and defines no tool.   usage: package_options_test.sh SOURCE_DIR
set -eu
source=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S "$source" -B "$work/build" -DXGRAD_BUILD_TESTS=OFF -DXGRAD_BUILD_TOOLS=OFF -DXGRAD_BUILD_DISTRIBUTED=OFF \
      >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
failed=0
if grep -q -e "CLI11_DIR" -e "STB_" "$work/build/CMakeCache.txt"; then echo "FAILED: CLI11 or stb was looked for"; failed=1; fi
if cmake --build "$work/build" --target help | grep -q -e "xgrad-train" -e "xgrad-bench" -e "test_"; then
  echo "FAILED: a tool or test is defined"; failed=1
fi
echo "$((2 - failed)) passed, $failed failed"
test "$failed" -eq 0
