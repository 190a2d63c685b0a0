#!/usr/bin/env bash
# Builds the checkpoint fuzzer with clang (libFuzzer + AddressSanitizer + UBSan) in
# build-fuzz/ and runs it for SECONDS (default 60) from the committed seed corpus.
#   usage: tests/fuzz/build_and_run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
out=build-fuzz
mkdir -p "$out/corpus"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.
       -DXTENSOR_USE_XSIMD -march=native)
# Only what the loader needs: tensors, the engine they sit on, and the checkpoint code.
clang++-14 "${flags[@]}" tests/fuzz/fuzz_checkpoint.cpp nn/checkpoint.cpp autograd/tensor.cpp autograd/engine.cpp \
  autograd/random.cpp -o "$out/fuzz_checkpoint"
cd "$out"
./fuzz_checkpoint corpus ../tests/fuzz/corpus -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 2>&1 | tail -n 15
echo "fuzzing ran ${seconds}s without a finding"
