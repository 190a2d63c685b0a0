#!/usr/bin/env bash
# Builds the checkpoint fuzzer with clang (libFuzzer + AddressSanitizer + UBSan) in
# build-fuzz/ and runs it for SECONDS (default 60) from the committed seed corpus.
#   usage: tests/fuzz/build_and_run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
out=build-fuzz
mkdir -p "$out/corpus" "$out/include"
ln -sfn "$PWD" "$out/include/xgrad"  # headers are included as <xgrad/...>
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$out/include"
       -DXTENSOR_USE_XSIMD -march=native)
# The whole library (the target loads into a model and an optimizer), instrumented.
blas=/usr/lib/x86_64-linux-gnu/openblas-pthread
clang++-14 "${flags[@]}" -I/usr/include/x86_64-linux-gnu/openblas-pthread tests/fuzz/fuzz_checkpoint.cpp \
  autograd/*.cpp autograd/ops/*.cpp autograd/kernels/*.cpp nn/*.cpp optim/*.cpp \
  -L"$blas" -Wl,-rpath,"$blas" -lopenblas -o "$out/fuzz_checkpoint"
cd "$out"
# Up to 1 MiB per input, so that large headers (thousands of entries) are tried too;
# every file in tests/fuzz/regressions/ runs first.
./fuzz_checkpoint corpus ../tests/fuzz/corpus ../tests/fuzz/regressions -max_total_time="$seconds" -max_len=1048576 \
  -print_final_stats=1 2>&1 | tail -n 15
echo "fuzzing ran ${seconds}s without a finding"
