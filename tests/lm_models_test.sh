#!/usr/bin/env bash
# The published families end to end (xgrad-train --task lm --model gpt2 | llama): trained on
# token shards, saved as Hugging Face directories (--save-hf) that the PyTorch reference
# (reference/hf_models.py) reads with xgrad's logits, started again from them
# (--init-from DIR), fine-tuned with LoRA (only the adapters change; PEFT's files), resumed
# bitwise, recomputed bitwise, continued by xgrad-generate; every bad config, directory
# and flag refused in one line, nothing written.
#   usage: lm_models_test.sh XGRAD_TRAIN XGRAD_GENERATE XGRAD_TOKENIZE
set -u
train=$1 generate=$2 tokenize=$3
source "$(dirname "$0")/lib.sh"
cd "$work"
run() { timeout 120 "$@" >out 2>err; echo $?; }

grammar_text text.txt 3000 3
grammar_text other.txt 600 4
"$tokenize" --text text.txt --out shards --vocab-size 300 --threads 1 >/dev/null
"$tokenize" --text other.txt --tokenizer shards --out other --threads 1 >/dev/null
shape=(--task lm --seq-len 16 --batch 4 --layers 2 --heads 4 --d-model 32 --threads 1 --eval-batches 2 --quiet
       --schedule constant)

for family in gpt2 llama; do
  code=$(run "$train" "${shape[@]}" --model "$family" --data shards --steps 40 --eval-every 20 --lr 3e-3 \
    --metrics "$family.jsonl" --save "$family.st" --save-hf "$family-hf")
  check "$family: a run exits 0 (got $code: $(cat err))" test "$code" -eq 0
  check "$family: the validation loss falls" /usr/bin/python3 -c "
import json
lines = [json.loads(l) for l in open('$family.jsonl')][:-1]
assert lines[-1]['val_loss'] < lines[0]['val_loss'] - 0.1, lines"
  check "$family: --save-hf wrote config.json and model.safetensors" \
    test -s "$family-hf/config.json" -a -s "$family-hf/model.safetensors"
  # The reference reads the directory and computes the logits xgrad's checkpoint gives.
  check "$family: the reference loads the directory, under Hugging Face's names" /usr/bin/python3 - \
    "$references" "$family-hf" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import hf_models
model = hf_models.load_pretrained(sys.argv[2])
names = set(dict(model.named_parameters()))
family = json.load(open(sys.argv[2] + "/config.json"))["model_type"]
assert ("transformer.h.1.attn.c_attn.weight" if family == "gpt2" else "model.layers.1.self_attn.q_proj.weight") in names
PY
  # Recomputation changes no bit; resume continues the run bitwise.
  code=$(run "$train" "${shape[@]}" --model "$family" --data shards --steps 40 --eval-every 20 --lr 3e-3 \
    --recompute --save "$family-recompute.st")
  check "$family: --recompute exits 0 (got $code: $(cat err))" test "$code" -eq 0
  check "$family: --recompute gives bitwise the same weights" same_checkpoint "$family.st" "$family-recompute.st" --tensors
  "$train" "${shape[@]}" --model "$family" --data shards --steps 20 --eval-every 20 --lr 3e-3 --save "$family-half.st" \
    >/dev/null 2>&1
  code=$(run "$train" --resume "$family-half.st" --steps 40 --save "$family-half.st" --save-hf "$family-half-hf" --quiet)
  check "$family: resumed to 40 steps exits 0 (got $code: $(cat err))" test "$code" -eq 0
  check "$family: resumed, bitwise the uninterrupted run" same_checkpoint "$family.st" "$family-half.st" --tensors
  # (Its bos and eos ids, the tokenizer's, came out null once: nothing in the checkpoint had them.)
  check "$family: ... and its --save-hf folder the same files" diff -r "$family-hf" "$family-half-hf"
  code=$(run "$generate" --checkpoint "$family.st" --tokens 20 --seed 3)
  check "$family: xgrad-generate continues it (got $code: $(cat err))" test "$code" -eq 0 -a -s out

  # From the directory, LoRA on other text: only the adapters change.
  code=$(run "$train" --task lm --init-from "$family-hf" --data other --seq-len 16 --batch 4 --threads 1 \
    --eval-batches 2 --quiet --steps 20 --eval-every 20 --lora 4 --lr 1e-2 --save "$family-lora.st" \
    --save-hf "$family-adapter")
  check "$family: LoRA from the directory exits 0 (got $code: $(cat err))" test "$code" -eq 0
  check "$family: PEFT's two files written" \
    test -s "$family-adapter/adapter_config.json" -a -s "$family-adapter/adapter_model.safetensors"
  check "$family: only the adapters changed, and they did" /usr/bin/python3 - "$references" "$family-lora.st" \
    "$family.st" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors_numpy
tuned, _ = safetensors_numpy.read(sys.argv[2])
base, _ = safetensors_numpy.read(sys.argv[3])
adapters = [n for n in tuned if ".lora_" in n and not n.startswith("optimizer.")]
assert adapters and all(n.endswith((".lora_A.weight", ".lora_B.weight")) for n in adapters), adapters
assert any(np.any(tuned[n] != 0) for n in adapters if n.endswith("lora_B.weight"))
for name, value in base.items():
    if not name.startswith("optimizer."):
        assert np.array_equal(value, tuned[name]), name
moments = [n for n in tuned if n.startswith("optimizer.") and n.endswith("exp_avg")]
assert moments and all(".lora_" in n for n in moments), moments
PY
  code=$(run "$generate" --checkpoint "$family-lora.st" --tokens 10 --seed 3)
  check "$family: xgrad-generate runs the adapted model (got $code: $(cat err))" test "$code" -eq 0
done
check "gpt2's adapter config says Conv1D's layout" grep -q '"fan_in_fan_out": true' gpt2-adapter/adapter_config.json
check "llama's adapters are PEFT's default targets" grep -q '"q_proj"' llama-adapter/adapter_config.json

# Sized by a config.json, GQA included.
cat >llama-config.json <<'JSON'
{"model_type": "llama", "vocab_size": 320, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1,
 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "rope_theta": 500000.0}
JSON
code=$(run "$train" --task lm --model llama --model-config llama-config.json --data shards --seq-len 16 --batch 4 \
  --threads 1 --eval-batches 2 --quiet --steps 5 --eval-every 5 --save-hf gqa-hf)
check "--model-config with 2 K/V heads exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "its directory keeps num_key_value_heads 2" grep -q '"num_key_value_heads": 2' gqa-hf/config.json
# The run says the model's sizes (the config's, not the flags' defaults) in its first line,
# as in its learning curve's title.
code=$(run "$train" --task lm --model llama --model-config llama-config.json --data shards --seq-len 16 --batch 4 \
  --threads 1 --eval-batches 1 --steps 1 --plot gqa.png)
check "a config.json run exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "it says the config's sizes" grep -q "^xgrad-train: lm, 1 layer, d-model 32, 4 heads (2 for keys and values), " out

# evaluate_alike CHECKPOINT FOLDER: the run's checkpoint and its --save-hf folder give one
# validation loss.
evaluate_alike() {
  local from
  for from in "$1" "$2"; do
    "$train" --init-from "$from" --data shards --seq-len 16 --batch 4 --threads 1 --eval-batches 2 --eval-only \
      2>&1 | grep -o 'val loss [0-9.]*' >"$from.loss"
  done
  check "... the checkpoint and the folder evaluate alike ($(cat "$1.loss") / $(cat "$2.loss"))" \
    test -s "$1.loss" -a "$(cat "$1.loss")" = "$(cat "$2.loss")"
}

# A config.json as transformers 5 writes RoPE (rope_parameters), scaled as Llama 3.1's: the
# run keeps the scaling through its checkpoint and its folder, and generates from both.
cat >llama3-config.json <<'JSON'
{"model_type": "llama", "vocab_size": 320, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1,
 "num_attention_heads": 2, "max_position_embeddings": 64,
 "rope_parameters": {"rope_type": "llama3", "rope_theta": 50000.0, "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}
JSON
code=$(run "$train" --task lm --model llama --model-config llama3-config.json --data shards --seq-len 16 --batch 4 \
  --threads 1 --eval-batches 2 --quiet --steps 5 --eval-every 5 --save llama3.st --save-hf llama3-hf)
check "--model-config with rope_parameters (llama3) exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "... its folder says rope_theta 50000 and the llama3 scaling" /usr/bin/python3 -c "
import json; c = json.load(open('llama3-hf/config.json'))
assert c['rope_theta'] == 50000.0 and c['rope_scaling'] == {'rope_type': 'llama3', 'factor': 8.0,
    'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 32}, c"
evaluate_alike llama3.st llama3-hf
sed 's/"llama3"/"yarn"/' llama3-config.json >yarn-config.json
refused "a rope_scaling xgrad does not implement" '"yarn", a RoPE scaling xgrad does not implement' "$train" --task lm --model llama \
  --model-config yarn-config.json --data shards --seq-len 16 --batch 4 --steps 1 --save nothing.st

# Mistral's config.json (a sliding window of 4 over 16 positions) trains as --model llama,
# writes its folder back as Mistral's, which starts a run with no --model, and generates.
cat >mistral-config.json <<'JSON'
{"model_type": "mistral", "architectures": ["MistralForCausalLM"], "vocab_size": 320, "hidden_size": 32,
 "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "max_position_embeddings": 64, "sliding_window": 4}
JSON
code=$(run "$train" --task lm --model llama --model-config mistral-config.json --data shards --seq-len 16 \
  --batch 4 --threads 1 --eval-batches 2 --quiet --steps 5 --eval-every 5 --save mistral.st --save-hf mistral-hf)
check "--model-config of a Mistral exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "... its folder is Mistral's, window 4" /usr/bin/python3 -c "
import json; c = json.load(open('mistral-hf/config.json'))
assert c['model_type'] == 'mistral' and c['architectures'] == ['MistralForCausalLM'] and c['sliding_window'] == 4, c"
evaluate_alike mistral.st mistral-hf
code=$(run "$generate" --checkpoint mistral.st --tokens 24 --seed 3)
check "... xgrad-generate continues it past its window (got $code: $(cat err))" test "$code" -eq 0 -a -s out
refused "a Mistral config for --model gpt2" "describes a mistral model, but --model is gpt2" "$train" --task lm \
  --model gpt2 --model-config mistral-config.json --data shards --seq-len 16 --batch 4 --steps 1 --save nothing.st

# Sized by the flags, the published families take --ff and --dropout (xgrad's own GPT
# takes neither: refused below).
code=$(run "$train" "${shape[@]}" --model llama --data shards --steps 2 --eval-every 2 --ff 40 --dropout 0.1 \
  --save-hf ff-llama-hf)
check "llama with --ff 40 --dropout 0.1 exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "... its MLP is 40 wide, its attention dropout 0.1" /usr/bin/python3 -c "
import json; c = json.load(open('ff-llama-hf/config.json'))
assert c['intermediate_size'] == 40 and c['attention_dropout'] == 0.1, c"
code=$(run "$train" "${shape[@]}" --model gpt2 --data shards --steps 2 --eval-every 2 --ff 48 --dropout 0.1 \
  --save-hf ff-gpt2-hf)
check "gpt2 with --ff 48 --dropout 0.1 exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "... its MLP is 48 wide, its dropouts 0.1" /usr/bin/python3 -c "
import json; c = json.load(open('ff-gpt2-hf/config.json'))
assert c['n_inner'] == 48 and c['embd_pdrop'] == c['attn_pdrop'] == c['resid_pdrop'] == 0.1, c"

# A folder's model goes on only with the data it learnt: the tokenizer beside it, or (a
# model of a text's bytes) a text of the bytes its config.json lists (xgrad_text_bytes),
# or, in a folder made elsewhere that lists none, as many distinct bytes.
"$tokenize" --text other.txt --out other-vocab --vocab-size 280 --threads 1 >/dev/null
refused "shards of another tokenizer than the folder's" "is not the one --init-from gpt2-hf's model learnt with" \
  "$train" --task lm --init-from gpt2-hf --data other-vocab --seq-len 16 --batch 4 --threads 1 --steps 2 \
  --save nothing.st
refused "a text for a folder's model of tokens" "not the bytes of a text" "$train" --task lm --init-from gpt2-hf \
  --text text.txt --seq-len 16 --batch 4 --threads 1 --steps 2 --save nothing.st
"$train" "${shape[@]}" --model gpt2 --text text.txt --steps 2 --eval-every 2 --save-hf bytes-hf >/dev/null 2>&1
code=$(run "$train" --init-from bytes-hf --text text.txt --seq-len 16 --batch 4 --threads 1 --steps 2 \
  --eval-every 2 --eval-batches 1 --quiet)
check "a folder's model of a text's bytes goes on with that text, --task lm implied (got $code: $(cat err))" \
  test "$code" -eq 0
/usr/bin/python3 -c "print('ab' * 400)" >ab.txt
check "... whose config.json lists the text's distinct bytes" /usr/bin/python3 -c "
import json; assert json.load(open('bytes-hf/config.json'))['xgrad_text_bytes'] == sorted(set(open('text.txt', 'rb').read()))"
# As many distinct bytes, one of them another: refused by the list.
/usr/bin/python3 -c "
t = open('text.txt', 'rb').read(); old = max(set(t)); new = next(b for b in range(33, 127) if b not in t)
open('swapped.txt', 'wb').write(t.replace(bytes([old]), bytes([new])))"
refused "a text of as many but other bytes for a folder's model of bytes" \
  "--text swapped.txt: its [0-9]* distinct bytes are not the [0-9]* its model learnt (--init-from bytes-hf's config.json" \
  "$train" --task lm --init-from bytes-hf --text swapped.txt --seq-len 16 --batch 4 --threads 1 --steps 2 \
  --save nothing.st
refused "shards for a folder's model of bytes" "--init-from bytes-hf: its model learnt the bytes of a text" \
  "$train" --task lm --init-from bytes-hf --data other-vocab --seq-len 16 --batch 4 --threads 1 --steps 2 \
  --save nothing.st
refused "a text of other bytes for a folder's model of bytes" "distinct bytes" "$train" --task lm \
  --init-from bytes-hf --text ab.txt --seq-len 16 --batch 4 --threads 1 --steps 2 --save nothing.st
# A folder that lists no bytes: their count.
cp -r bytes-hf unlisted-hf
/usr/bin/python3 -c "
import json; c = json.load(open('unlisted-hf/config.json')); del c['xgrad_text_bytes']
json.dump(c, open('unlisted-hf/config.json', 'w'))"
refused "a text of other bytes for a folder's model that lists none" "distinct bytes of --text ab.txt" "$train" \
  --task lm --init-from unlisted-hf --text ab.txt --seq-len 16 --batch 4 --threads 1 --steps 2 --save nothing.st

# A config's vocabulary wider than the text's bytes (ids no byte has): samples, in training
# and in xgrad-generate, draw only the text's bytes.
cat >wide-vocab.json <<'JSON'
{"model_type": "gpt2", "vocab_size": 200, "n_positions": 16, "n_embd": 16, "n_layer": 1, "n_head": 2}
JSON
code=$(run "$train" --task lm --model gpt2 --model-config wide-vocab.json --text text.txt --seq-len 16 --batch 4 \
  --threads 1 --steps 2 --eval-every 2 --eval-batches 1 --save wide.st)
check "a vocab_size of 200 on a text's bytes trains and samples (got $code: $(cat err))" test "$code" -eq 0
"$generate" --checkpoint wide.st --tokens 400 --temperature 5 --seed 1 >wide.out 2>err
check "... xgrad-generate draws only the text's bytes" /usr/bin/python3 -c "
assert set(open('wide.out', 'rb').read()) <= set(open('text.txt', 'rb').read()) | {10}"
# A reader that stops early: one line on stderr and exit 2, not a silent SIGPIPE.
"$generate" --checkpoint wide.st --tokens 100000 2>err | head -c 5 >/dev/null
code=${PIPESTATUS[0]}
check "xgrad-generate into a closed pipe exits 2 (got $code)" test "$code" -eq 2
check "... and says so in one line" test "$(wc -l <err)" -eq 1 -a -n "$(grep 'standard output' err)"

# Bad input: one line, exit 2, nothing written.
sed 's/"hidden_size": 32, //' llama-config.json >no-hidden.json
sed 's/"num_attention_heads": 4/"num_attention_heads": "four"/' llama-config.json >typed.json
sed 's/"vocab_size": 320/"vocab_size": 100/' llama-config.json >small-vocab.json
sed 's/"llama"/"bert"/' llama-config.json >bert.json
mkdir -p bad-dir && cp gpt2-hf/config.json bad-dir/ && sed 's/"n_embd": 32/"n_embd": 64/' gpt2-hf/config.json >bad-dir/config.json
cp gpt2-hf/model.safetensors bad-dir/
common=(--task lm --data shards --seq-len 16 --batch 4 --threads 1 --steps 2 --save nothing.st)
refused "a config without hidden_size" 'field "hidden_size" is missing' "$train" "${common[@]}" --model llama \
  --model-config no-hidden.json
refused "a config with a string for a size" 'field "num_attention_heads" must be a non-negative integer' "$train" \
  "${common[@]}" --model llama --model-config typed.json
refused "a vocabulary smaller than the data's" "smaller than the data's vocabulary" "$train" "${common[@]}" \
  --model llama --model-config small-vocab.json
refused "an unknown model_type" 'field "model_type" is "bert"' "$train" "${common[@]}" --model llama \
  --model-config bert.json
refused "a config of the other family" "describes a llama model, but --model is gpt2" "$train" "${common[@]}" \
  --model gpt2 --model-config llama-config.json
refused "a directory whose tensors contradict its config" "transformer.h.0.attn.c_proj.bias is \[32\] in the file, \[64\] in the model" \
  "$train" "${common[@]}" --init-from bad-dir
refused "a missing --model-config" "llama-nowhere.json" "$train" "${common[@]}" --model llama \
  --model-config llama-nowhere.json
refused "--layers beside a config.json" "--layers does nothing here" "$train" "${common[@]}" --model llama \
  --model-config llama-config.json --layers 3
refused "--dropout beside a config.json" "--dropout does nothing here" "$train" "${common[@]}" --model llama \
  --model-config llama-config.json --dropout 0.1
refused "--model-config beside --init-from a folder" \
  "--model-config does nothing here: the model's sizes come from --init-from's config.json" "$train" "${common[@]}" \
  --init-from gpt2-hf --model-config gpt2-hf/config.json
refused "--model-config beside --init-from a checkpoint" "the model's sizes come from --init-from's checkpoint" \
  "$train" "${common[@]}" --init-from llama.st --model-config llama-config.json
refused "--model-config beside --resume" "the model's sizes come from --resume's checkpoint" "$train" \
  --resume llama.st --steps 50 --model-config llama-config.json
refused "--attention-png of a published family" "--attention-png is not used by --model gpt2" "$train" \
  "${common[@]}" --model gpt2 --attention-png maps.png
refused "--recompute with --eval-only" "--recompute is not used by --eval-only (it trains no steps)" "$train" \
  --resume llama.st --eval-only --recompute
refused "--sample-every with --eval-only" "--sample-every is not used by --eval-only" "$train" \
  --resume gpt2.st --eval-only --sample-every 5
# A checkpoint of a model sized by a config.json records the flags' defaults beside its
# lm.model_config: the size flags do nothing there (they were checked against those
# defaults); one sized by the flags checks them as before.
refused "--d-model on --resume of a config.json's model" \
  "--d-model does nothing here: the model's sizes come from --resume mistral.st's lm.model_config" "$train" \
  --resume mistral.st --steps 50 --d-model 32
refused "--layers on --init-from a config.json's model" "--layers does nothing here" "$train" "${common[@]}" \
  --init-from llama3.st --layers 1
refused "--d-model other than a flags-sized checkpoint's" "--d-model 64 here, 32 in the checkpoint" "$train" \
  --resume llama.st --steps 50 --d-model 64
# A flag the checkpoint's settings leave unused is refused as unused, not compared with the
# default it recorded: LoRA's flags on a run without adapters, --positions on any lm.
refused "--lora-alpha on --resume of a run without adapters" "--lora-alpha is not used by --lora 0" "$train" \
  --resume llama.st --steps 50 --lora-alpha 8
refused "--lora-targets on --resume of a run without adapters" "--lora-targets is not used by --lora 0" "$train" \
  --resume gpt2.st --steps 50 --lora-targets c_proj
refused "--clip on --resume --eval-only" "--clip is not used by --eval-only" "$train" --resume gpt2.st --eval-only \
  --clip 0.5
refused "--positions on a Llama" "--positions is not used by --task lm" "$train" "${common[@]}" --model llama \
  --positions learned
refused "--positions on --resume of an lm" "--positions is not used by --task lm" "$train" --resume gpt2.st \
  --steps 50 --positions sinusoidal
# LoRA and the checkpoint: fresh adapters evaluate as the model without them; a checkpoint
# of adapters goes on with --lora (and --resume or xgrad-export otherwise).
refused "--lora with --eval-only on a folder" "--lora does nothing here: --init-from gpt2-hf holds no adapters" \
  "$train" --init-from gpt2-hf --data shards --seq-len 16 --batch 4 --threads 1 --eval-only --lora 2
refused "--init-from a checkpoint of adapters without --lora" "holds LoRA adapters of rank 4: give --lora" \
  "$train" "${common[@]}" --init-from llama-lora.st
code=$(run "$train" --init-from llama-lora.st --lora 4 --data other --seq-len 16 --batch 4 --threads 1 \
  --eval-batches 2 --eval-only)
check "--init-from a checkpoint of adapters with --lora evaluates them (got $code: $(cat err))" test "$code" -eq 0
# The adapters' alpha and targets are part of the model they make: --init-from takes them
# from the checkpoint (a flag given must agree), and evaluates what --resume does.
code=$(run "$train" --init-from llama.st --data shards --seq-len 16 --batch 4 --threads 1 --eval-batches 2 --quiet \
  --steps 4 --lora 2 --lora-alpha 16 --lora-targets q_proj,o_proj,down_proj --lr 1e-2 --save odd-lora.st)
check "adapters with their own alpha and targets train (got $code: $(cat err))" test "$code" -eq 0
run "$train" --resume odd-lora.st --eval-only --threads 1 >/dev/null && sed -n 1p out >resumed.txt
code=$(run "$train" --init-from odd-lora.st --lora 2 --data shards --seq-len 16 --batch 4 --threads 1 \
  --eval-batches 2 --eval-only)
check "--init-from them evaluates as --resume does (got $code: $(cat err))" \
  test "$code" -eq 0 -a "$(sed -n 1p out | sed 's/at step 0/at step 4/')" = "$(cat resumed.txt)"
refused "--init-from them with another --lora-alpha" "--lora-alpha 1000 here, 16 in the checkpoint" "$train" \
  "${common[@]}" --init-from odd-lora.st --lora 2 --lora-alpha 1000
# A Hugging Face folder starts its own family's model only (another would start afresh).
refused "--init-from a folder with --model gpt" "--model gpt cannot start from --init-from gpt2-hf, a Hugging Face gpt2 model" \
  "$train" "${common[@]}" --init-from gpt2-hf --model gpt
refused "--init-from a folder with a toy task" "--task sort cannot start from --init-from gpt2-hf" "$train" \
  --task sort --init-from gpt2-hf --steps 2 --save nothing.st
# A resume carries on where the weights came from: PEFT's base model, the checkpoint's
# init_from. A finished run resumed with --save-hf writes it (a signal at the end of a run
# names --save-hf to give again).
code=$(run "$train" --init-from gpt2-hf --data other --seq-len 16 --batch 4 --threads 1 --eval-batches 2 --quiet \
  --steps 2 --lora 2 --save based.st)
check "adapters on a folder for 2 steps (got $code: $(cat err))" test "$code" -eq 0
code=$(run "$train" --resume based.st --steps 4 --save based.st --quiet)
check "... resumed to 4 (got $code: $(cat err))" test "$code" -eq 0
code=$(run "$train" --resume based.st --save-hf based-adapter --quiet)
check "... its finished run resumed with --save-hf writes it (got $code: $(cat err))" \
  test "$code" -eq 0 -a -s based-adapter/adapter_model.safetensors
check "... naming the folder it started from as the base model" \
  grep -q '"base_model_name_or_path": "gpt2-hf"' based-adapter/adapter_config.json
check "... and the resumed checkpoint keeps its init_from" grep -aq '"init_from":"gpt2-hf"' based.st
# A folder's weights are numbers, as a checkpoint's.
cp -r gpt2-hf nan-hf
/usr/bin/python3 - "$references" nan-hf/model.safetensors <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors_numpy
arrays, metadata = safetensors_numpy.read(sys.argv[2])
arrays = {name: np.array(a) for name, a in arrays.items()}
arrays["transformer.ln_f.weight"][3] = np.nan
safetensors_numpy.write(sys.argv[2], arrays, metadata=metadata)
PY
refused "a folder holding NaN" "--init-from nan-hf: the tensor transformer.ln_f.weight holds NaN" "$train" \
  "${common[@]}" --init-from nan-hf
cp -r gpt2-hf half-hf && rm half-hf/merges.txt
refused "a folder with half a tokenizer" "--init-from half-hf: holds vocab.json without merges.txt" "$train" \
  "${common[@]}" --init-from half-hf
# --save-hf is an output as the others: checked before any work.
refused "--save-hf and --save naming one path" "are the same file" "$train" "${common[@]/nothing.st/same}" \
  --model gpt2 --save-hf same
refused "--save-hf where nothing can be made" "--save-hf /proc/xgrad-hf: cannot make a folder in /proc" "$train" \
  "${common[@]}" --model gpt2 --save-hf /proc/xgrad-hf
check "... no run made either" test ! -e same -a ! -e nothing.st
refused "--save-hf naming --save's path with a slash" "are the same file" "$train" "${common[@]/nothing.st/slash}" \
  --model gpt2 --save-hf slash/
mkdir -p holder
refused "--save inside --save-hf's folder" "--save holder/model.safetensors is inside --save-hf holder" "$train" \
  "${common[@]/nothing.st/holder/model.safetensors}" --model gpt2 --save-hf holder
ln -s nowhere-at-all dangling
refused "--save-hf a link to nothing" "--save-hf dangling: is a link to nothing" "$train" "${common[@]}" \
  --model gpt2 --save-hf dangling
check "... and the link is kept" test -L dangling
refused "--save-hf a device" "--save-hf /dev/null: is a device, not a folder" "$train" "${common[@]}" \
  --model gpt2 --save-hf /dev/null
check "... no run made" test ! -e slash -a -z "$(ls -A holder)" -a ! -e nothing.st
refused "--init-from a checkpoint of adapters with another --lora" "--lora 8: --init-from llama-lora.st holds adapters of rank 4" \
  "$train" "${common[@]}" --init-from llama-lora.st --lora 8
refused "--ff for xgrad's own GPT" "--ff 48 is not the width" "$train" "${common[@]}" --ff 48
refused "Llama's heads of an odd width" "--heads 2 makes Llama's heads --d-model 14 / 2 = 7 wide" "$train" \
  "${common[@]}" --model llama --d-model 14 --heads 2
refused "--dropout for xgrad's own GPT" "--dropout must be 0" "$train" "${common[@]}" --dropout 0.1
sed 's/"rope_theta"/"rms_norm_eps": 1e-60, "rope_theta"/' llama-config.json >tiny-eps.json
refused "an epsilon that is 0 in float32" 'field "rms_norm_eps" is 1e-60' "$train" "${common[@]}" --model llama \
  --model-config tiny-eps.json
sed 's/"num_hidden_layers": 1/"num_hidden_layers": 100000000000/' llama-config.json >huge.json
refused "a model larger than memory" "MiB of memory this process can have" "$train" "${common[@]}" --model llama \
  --model-config huge.json
# A model that fits but whose training does not is refused before any of it is made, sized
# by its config.json rather than by the flags it ignores. Sizes scale with what this
# process may use (the refusal above says): a model of about 0.6 of it, whose gradients
# and Adam's moments do not fit, but its LoRA adapters' do (the run then goes on to
# refuse --save naming a folder); a deep, narrow one whose activations take twice it,
# and a twentieth of that under --recompute.
usable_mib=$(sed -n 's/.* more than the \([0-9]*\) MiB of memory this process can have.*/\1/p' err)
check "the refusal says how much memory the process may use" test -n "$usable_mib"
usable_mib=${usable_mib:-24000}
mkdir -p a-folder
cat >wide.json <<JSON
{"model_type": "llama", "vocab_size": 320, "hidden_size": 1024, "intermediate_size": 2048,
 "num_hidden_layers": $((usable_mib * 6 / 10 / 42)), "num_attention_heads": 8, "max_position_embeddings": 64}
JSON
refused "a config.json model whose optimizer state does not fit" \
  "parameters (--model-config wide.json) and their optimizer state" "$train" "${common[@]}" --model llama \
  --model-config wide.json
refused "its LoRA fine-tune fits, and goes on to the next check" "--save a-folder: is a folder" "$train" \
  --task lm --data shards --seq-len 16 --batch 4 --threads 1 --steps 2 --save a-folder --model llama \
  --model-config wide.json --lora 2
# Its making counts too: a table of 0.55 of memory (tied, so the weights are about that)
# has its new values drawn beside its zeros. Adapters train little; making it does not fit.
cat >big-table.json <<JSON
{"model_type": "llama", "vocab_size": $((usable_mib * 256 * 55 / 100)), "hidden_size": 1024,
 "intermediate_size": 2048, "num_hidden_layers": 1, "num_attention_heads": 8, "max_position_embeddings": 64,
 "tie_word_embeddings": true}
JSON
refused "a LoRA fine-tune of a model that does not fit while it is made" "while the model is made" "$train" \
  --task lm --data shards --seq-len 16 --batch 4 --threads 1 --steps 2 --save a-folder --model llama \
  --model-config big-table.json --lora 2
cat >deep.json <<'JSON'
{"model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1000,
 "num_attention_heads": 4, "max_position_embeddings": 64}
JSON
deep=(--task lm --data shards --seq-len 16 --batch $((usable_mib / 40)) --threads 1 --steps 2 --model llama
      --model-config deep.json)
refused "a config.json model whose activations do not fit" "for the activations of a micro-batch" "$train" \
  "${deep[@]}" --save nothing.st
refused "the same under --recompute fits, and goes on to the next check" "--save a-folder: is a folder" "$train" \
  "${deep[@]}" --save a-folder --recompute
mkdir -p tokenizer-there && printf '{}' >tokenizer-there/vocab.json
refused "--save-hf over a tokenizer" "already holds vocab.json" "$train" "${common[@]}" --model gpt2 \
  --save-hf tokenizer-there
refused "a LoRA target matching nothing" "--lora-targets" "$train" "${common[@]}" --model gpt2 --lora 2 \
  --lora-targets q_proj
refused "--lora on xgrad's own GPT" "--lora" "$train" "${common[@]}" --lora 2
refused "--lora-alpha 0" "--lora-alpha must be positive" "$train" "${common[@]}" --model gpt2 --lora 2 --lora-alpha 0
refused "--lora-dropout 1" "--lora-dropout must lie in" "$train" "${common[@]}" --model llama --lora 2 \
  --lora-dropout 1
refused "--save-hf over a model" "already holds config.json" "$train" "${common[@]}" --model gpt2 --save-hf gpt2-hf
refused "--model on a toy task" "--model" "$train" --task sort --model gpt2 --steps 2
# A folder where a model goes: a PEFT adapter (its base named), a folder of neither kind.
refused "--init-from an adapter folder" "--init-from gpt2-adapter holds a LoRA adapter (adapter_config.json), not a model: start from its base model (gpt2-hf)" \
  "$train" --task lm --init-from gpt2-adapter --data other --steps 2
mkdir -p plain-folder
refused "--init-from a folder without config.json" "--init-from plain-folder is a folder without config.json" \
  "$train" --task lm --init-from plain-folder --data other --steps 2
refused "--resume a folder" "--resume plain-folder is a folder: a run resumes from the checkpoint file" \
  "$train" --resume plain-folder --steps 2
check "nothing was written by the refused runs" test ! -e nothing.st -a ! -e maps.png

finish
