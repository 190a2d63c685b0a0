#!/usr/bin/env bash
# What `cmake --install` ships: the public headers, every one self-contained and none
# including a header that is not installed; not the internal ones (each layer's
# INTERNAL_HEADERS, cmake/layers.cmake: the graph's node, record() and hooks, kernels/,
# ops/'s helpers, detail/).   usage: installed_headers_test.sh BUILD_DIR CXX
set -u
build=$1 cxx=$2
source "$(dirname "$0")/lib.sh"  # check, finish, $work
cmake --install "$build" --prefix "$work/prefix" >/dev/null
include=$work/prefix/include
(cd "$include" && find xgrad -name '*.hpp' | sort) >"$work/installed"
check "headers are installed ($(wc -l <"$work/installed"))" test "$(wc -l <"$work/installed")" -gt 30
# Every layer's internal headers, as the build links them into its internal tree.
(for tree in "$build"/layers/*-internal; do (cd "$tree" && find -L xgrad -name '*.hpp'); done) | sort >"$work/internal"
check "the build has internal headers ($(wc -l <"$work/internal"))" test "$(wc -l <"$work/internal")" -gt 15
leaked=$(comm -12 "$work/installed" "$work/internal" | tr '\n' ' ')
check "no internal header is installed${leaked:+: $leaked}" test -z "$leaked"
for internal in xgrad/autograd/node.hpp xgrad/autograd/record.hpp xgrad/autograd/hooks.hpp xgrad/autograd/kernels/ \
                xgrad/autograd/ops/ xgrad/autograd/detail/; do
  check "$internal is not installed" bash -c "! grep -q '^$internal' '$work/installed'"
done
for public in xgrad/xgrad.hpp xgrad/autograd/tensor.hpp xgrad/autograd/ops.hpp xgrad/nn/nn.hpp xgrad/optim/optim.hpp; do
  check "$public is installed" grep -qx "$public" "$work/installed"
done
# Each header alone, two at a time (the compiler reports an include it cannot find), with
# -I as a user's plain build gives it (not find_package's -isystem, which hides warnings)
# and the warnings such builds turn into errors.
compile_alone() {
  echo "#include <$1>" >"$2/$(echo "$1" | tr / _).cpp"
  "$3" -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Woverloaded-virtual -Wshadow -Werror -I "$4" \
    "$2/$(echo "$1" | tr / _).cpp" 2>&1 | head -n 3
}
export -f compile_alone
errors=$(xargs -P 2 -I{} bash -c 'compile_alone "$@"' _ {} "$work" "$cxx" "$include" <"$work/installed")
check "every installed header compiles alone, warning-free${errors:+: $errors}" test -z "$errors"
finish
