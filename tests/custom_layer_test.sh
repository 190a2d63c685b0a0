#!/usr/bin/env bash
# Installs xgrad to a temporary prefix, then builds and runs examples/custom_layer as a
# separate project with find_package(xgrad): the package stays consumable.
#   usage: custom_layer_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$source/examples/custom_layer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/custom_layer"
# The package imposes no instruction set: the user's compile lines carry no -march.
flags=$(grep -rh -e "CXX_FLAGS" -e "CXX_DEFINES" -e "CXX_INCLUDES" "$work/build/CMakeFiles/custom_layer.dir/flags.make")
if grep -q -- "-march" <<<"$flags"; then echo "FAILED: -march reached the user's flags: $flags"; exit 1; fi
echo "2 passed, 0 failed"
