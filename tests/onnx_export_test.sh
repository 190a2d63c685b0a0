#!/usr/bin/env bash
# ONNX export against the real runtimes: random small GPT-2 and Llama models (tied and
# untied heads; GQA groups of 1, 2 and 4; GPT-2's three activations; odd sizes; RoPE scaled as
# Llama 3.1 and linearly; a head_dim other than hidden_size / heads; a Mistral whose sliding
# window of 5 is shorter than lengths 7 and 20) exported by
# export_probe pass onnx.checker's full check (Debian's python3-onnx) and run in
# onnxruntime (onnxruntime-node) with xgrad's logits, one file at batches 1, 2 and 3 and
# lengths 1, 7 and the model's longest (export_reference/onnx_check.cjs holds the bound).
#   usage: onnx_export_test.sh EXPORT_PROBE NPM_DIR
set -u
probe=$(realpath "$1") npm_dir=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
cd "$work"

# name|config.json
configs=(
  'gpt2-gelu_new-tied|{"model_type": "gpt2", "vocab_size": 301, "n_positions": 24, "n_embd": 36, "n_layer": 2,
    "n_head": 3, "n_inner": 50, "activation_function": "gelu_new", "tie_word_embeddings": true}'
  'gpt2-gelu-untied|{"model_type": "gpt2", "vocab_size": 97, "n_positions": 16, "n_embd": 32, "n_layer": 2,
    "n_head": 4, "activation_function": "gelu", "layer_norm_epsilon": 1e-6, "tie_word_embeddings": false}'
  'gpt2-relu-tied|{"model_type": "gpt2", "vocab_size": 50, "n_positions": 12, "n_embd": 24, "n_layer": 1,
    "n_head": 2, "n_inner": 40, "activation_function": "relu", "layer_norm_epsilon": 1e-3}'
  'llama-mha-tied|{"model_type": "llama", "vocab_size": 301, "hidden_size": 36, "intermediate_size": 70,
    "num_hidden_layers": 2, "num_attention_heads": 3, "max_position_embeddings": 24, "tie_word_embeddings": true}'
  'llama-gqa2-untied|{"model_type": "llama", "vocab_size": 211, "hidden_size": 48, "intermediate_size": 70,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 20,
    "rope_theta": 500.0, "rms_norm_eps": 1e-5}'
  'llama-gqa4-untied|{"model_type": "llama", "vocab_size": 157, "hidden_size": 64, "intermediate_size": 90,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 32,
    "rope_theta": 1000000.0}'
  'llama-mqa-tied|{"model_type": "llama", "vocab_size": 64, "hidden_size": 40, "intermediate_size": 52,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 1, "max_position_embeddings": 16,
    "rope_theta": 25.5, "tie_word_embeddings": true}'
  'llama-llama3-scaled|{"model_type": "llama", "vocab_size": 90, "hidden_size": 64, "intermediate_size": 60,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 24,
    "rope_theta": 10000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 256}}'
  'llama-head-dim|{"model_type": "llama", "vocab_size": 80, "hidden_size": 30, "intermediate_size": 44,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 6,
    "max_position_embeddings": 16}'
  'llama-linear-scaled|{"model_type": "llama", "vocab_size": 70, "hidden_size": 32, "intermediate_size": 40,
    "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 20,
    "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 300.0}}'
  'mistral-window|{"model_type": "mistral", "vocab_size": 97, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 20,
    "sliding_window": 5}'
)

# tokens VOCAB BATCH LENGTH SEED: [[ids...], ...] drawn with bash's generator.
tokens() {
  local vocab=$1 batch=$2 length=$3 rows=() row b t
  RANDOM=$4
  for ((b = 0; b < batch; ++b)); do
    row=()
    for ((t = 0; t < length; ++t)); do row+=($((RANDOM % vocab))); done
    rows+=("[$(IFS=,; echo "${row[*]}")]")
  done
  echo "[$(IFS=,; echo "${rows[*]}")]"
}

manifest=() files=() seed=0
for entry in "${configs[@]}"; do
  IFS='|' read -r name config <<<"$(echo "$entry" | tr -d '\n')"
  seed=$((seed + 1))
  echo "$config" >"$name.json"
  [[ $config =~ \"vocab_size\":\ ([0-9]+) ]] && vocab=${BASH_REMATCH[1]}
  [[ $config =~ \"(n_positions|max_position_embeddings)\":\ ([0-9]+) ]] && longest=${BASH_REMATCH[2]}
  check "$name: a random model" "$probe" random "$name.json" "$seed" "$name"
  check "$name: exported" "$probe" onnx "$name" "$name.onnx"
  cases=()
  for shape in "1 $longest" "3 7" "2 1"; do  # batch, length
    read -r batch length <<<"$shape"
    tokens "$vocab" "$batch" "$length" "$seed$batch" >"$name-$batch.json"
    check "$name: xgrad's logits at $batch x $length" "$probe" logits "$name" "$name-$batch.json" "$name-$batch.bin"
    cases+=("{\"tokens\": \"$work/$name-$batch.json\", \"logits\": \"$work/$name-$batch.bin\"}")
  done
  manifest+=("{\"name\": \"$name\", \"model\": \"$work/$name.onnx\", \"cases\": [$(IFS=,; echo "${cases[*]}")]}")
  files+=("$name.onnx")
done
echo "[$(IFS=,; echo "${manifest[*]}")]" >manifest.json

check "onnxruntime gives xgrad's logits" node "$here/export_reference/onnx_check.cjs" "$npm_dir" manifest.json
# The bytes, not the path: onnx 1.12's check_model(path, full_check=True) writes the
# inferred shapes back into the file it checks.
check "onnx.checker's full check passes every file" /usr/bin/python3 -c "
import sys, onnx
for path in sys.argv[1:]:
    onnx.checker.check_model(open(path, 'rb').read(), full_check=True)" "${files[@]}"
finish
