#!/usr/bin/env bash
# Installs xgrad to a temporary prefix, then builds and runs examples/custom_layer as a
# separate project with find_package(xgrad): the package stays consumable, and the
# example's own checks pass and are reported (Snake's values, the gradchecks of the op
# and the layer, a bad alpha refused, a classifier that learns).
#   usage: custom_layer_test.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 source=$2
source "$(dirname "$0")/lib.sh"  # $work (removed on exit), check, finish
step() {  # a build step, quiet unless it fails
  "$@" >"$work/step.log" 2>&1 || { echo "FAILED: $*"; tail -n 20 "$work/step.log"; exit 1; }
}
step cmake --install "$build" --prefix "$work/prefix"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
step cmake -S "$source/examples/custom_layer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
     -DCMAKE_BUILD_TYPE=Release "${launcher[@]}"
step cmake --build "$work/build"

timeout 120 "$work/build/custom_layer" >"$work/out" 2>"$work/err"
code=$?
cat "$work/out"
check "custom_layer exits 0 (got $code: $(tail -n 1 "$work/err"))" test "$code" -eq 0
for line in "values of snake: ok" "gradcheck of snake: ok" "refused: snake: input float64 [4, 6] does not fit alpha" \
            "gradcheck of Snake: ok"; do
  check "it reports '$line'" grep -qF -- "$line" "$work/out"
done
accuracy=$(sed -n 's/^held-out accuracy \([0-9.]*\)$/\1/p' "$work/out")
check "its held-out accuracy '$accuracy' is at least 0.9" \
  awk -v a="${accuracy:-0}" 'BEGIN { exit !(a + 0 >= 0.9) }'

# The package imposes no instruction set: the user's compile lines carry no -march.
flags=$(grep -rh -e "CXX_FLAGS" -e "CXX_DEFINES" -e "CXX_INCLUDES" "$work/build/CMakeFiles/custom_layer.dir/flags.make")
check "no -march reached the user's flags: $flags" test -z "$(grep -o -- "-march" <<<"$flags")"
finish
