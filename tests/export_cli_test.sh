#!/usr/bin/env bash
# xgrad-export on its own (the runtimes' checks are gguf_export and onnx_export): GPT-2 and
# Llama checkpoints of xgrad-train out to GGUF, ONNX and Hugging Face folders, through one
# entry; the round trip xgrad -> Hugging Face folder -> GGUF giving the GGUF bytes that
# xgrad -> GGUF gives; the GGUF's structure read back apart from xgrad (its header, keys,
# tensors, alignment, Q8_0 blocks); LoRA adapters merged; every class of bad input refused
# in one line, exit 2, nothing written or left behind (a disk that fills mid-write too).
#   usage: export_cli_test.sh XGRAD_EXPORT XGRAD_TRAIN XGRAD_TOKENIZE
set -u
export_=$1 train=$2 tokenize=$3
source "$(dirname "$0")/lib.sh"
cd "$work"
run() { timeout 120 "$@" >out 2>err; echo $?; }
# Nothing but what a test names: no temporary of a writer left, no output half made.
only_expected() { test -z "$(find . -name '.xgrad-*' | head -1)"; }
differ() { ! cmp -s "$1" "$2"; }

grammar_text text.txt 2000 3
"$tokenize" --text text.txt --out shards --vocab-size 300 --threads 1 >/dev/null
shape=(--task lm --data shards --seq-len 16 --batch 4 --layers 2 --heads 4 --d-model 32 --steps 10 --eval-every 10
       --threads 1 --eval-batches 1 --quiet)
for family in gpt2 llama; do
  "$train" "${shape[@]}" --model "$family" --save "$family.st" >/dev/null 2>&1
  # LoRA on a checkpoint of the base model: the adapters start fresh.
  "$train" "${shape[@]}" --model "$family" --init-from "$family.st" --lora 2 --save "$family-lora.st" >/dev/null 2>&1
done
check "the checkpoints were trained" test -s gpt2.st -a -s llama.st -a -s gpt2-lora.st -a -s llama-lora.st

for family in gpt2 llama; do
  for type in f32 f16 bf16 q8_0; do
    code=$(run "$export_" --from "$family.st" --out "$family-$type.gguf" --type "$type")
    check "$family: --type $type exits 0 (got $code: $(cat err))" test "$code" -eq 0
    check "$family: --type $type says what it wrote" grep -q "wrote $family-$type.gguf (gguf, $type)" out
  done
  code=$(run "$export_" --from "$family.st" --out "$family.onnx")
  check "$family: ONNX, chosen by the name, exits 0 (got $code: $(cat err))" test "$code" -eq 0
  check "$family: the ONNX file opens as protobuf's ModelProto" /usr/bin/python3 -c "
import onnx; m = onnx.load('$family.onnx'); assert m.graph.input[0].name == 'input_ids', m.graph.input"
  code=$(run "$export_" --from "$family.st" --out "$family-hf")
  check "$family: a Hugging Face folder exits 0 (got $code: $(cat err))" test "$code" -eq 0
  check "$family: the folder holds the model and its tokenizer" \
    test -s "$family-hf/config.json" -a -s "$family-hf/model.safetensors" -a -s "$family-hf/vocab.json" \
    -a -s "$family-hf/merges.txt"
  check "$family: the tokenizer beside it is the shards' own" cmp -s "$family-hf/vocab.json" shards/encoder.json
  # The round trip: the folder back in, out to GGUF: the same bytes as straight from xgrad.
  for type in f32 q8_0; do
    "$export_" --from "$family-hf" --out "$family-rt-$type.gguf" --type "$type" >/dev/null 2>&1
    check "$family: xgrad -> Hugging Face -> GGUF ($type) is xgrad -> GGUF byte for byte" \
      cmp -s "$family-rt-$type.gguf" "$family-$type.gguf"
  done
  "$export_" --from "$family-hf" --out "$family-rt.onnx" >/dev/null 2>&1
  check "$family: ... and -> ONNX the same bytes too" cmp -s "$family-rt.onnx" "$family.onnx"
  # LoRA: the adapters are merged; the result differs from the base.
  code=$(run "$export_" --from "$family-lora.st" --out "$family-lora.gguf")
  check "$family: a LoRA checkpoint exports, merged (exit $code: $(cat err))" test "$code" -eq 0
  check "$family: ... to a model of the base's size" test "$(stat -c %s "$family-lora.gguf")" -eq \
    "$(stat -c %s "$family-f32.gguf")"
  check "$family: ... whose weights the trained adapters changed" differ "$family-lora.gguf" "$family-f32.gguf"
done

# The file as ggml's docs/gguf.md defines it, read here apart from xgrad: header, keys,
# tensor infos, alignment, every tensor's bytes where its offset says; Q8_0's blocks.
check "the GGUF files parse as the format says" /usr/bin/python3 - gpt2-f32.gguf gpt2-q8_0.gguf llama-f32.gguf \
  llama-bf16.gguf <<'PY'
import struct, sys
import numpy as np
def parse(path):
    data = open(path, "rb").read()
    at = 0
    def take(fmt):
        nonlocal at
        values = struct.unpack_from("<" + fmt, data, at); at += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values
    def string():
        nonlocal at
        n = take("Q"); text = data[at:at + n].decode(); at += n
        return text
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    def value(kind):
        if kind == 8: return string()
        if kind == 9:
            item, n = take("I"), take("Q")
            return [value(item) for _ in range(n)]
        return take(scalar[kind])
    assert data[:4] == b"GGUF", data[:4]
    at = 4
    version, tensors, keys = take("I"), take("Q"), take("Q")
    assert version == 3, version
    meta = {}
    for _ in range(keys):
        key = string(); meta[key] = value(take("I"))
    infos = []
    for _ in range(tensors):
        name = string(); dims = [take("Q") for _ in range(take("I"))]; kind = take("I"); offset = take("Q")
        infos.append((name, dims, kind, offset))
    start = (at + 31) // 32 * 32
    assert all(b == 0 for b in data[at:start]), "padding before the data"
    return data, meta, infos, start
sizes = {0: lambda n: 4 * n, 1: lambda n: 2 * n, 30: lambda n: 2 * n, 8: lambda n: n // 32 * 34}
for path in sys.argv[1:]:
    data, meta, infos, start = parse(path)
    arch = meta["general.architecture"]
    assert arch in ("gpt2", "llama"), arch
    for key in ("context_length", "embedding_length", "feed_forward_length", "block_count", "attention.head_count"):
        assert f"{arch}.{key}" in meta, (path, key)
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] == "gpt-2"
    tokens = meta["tokenizer.ggml.tokens"]
    assert len(tokens) == len(meta["tokenizer.ggml.token_type"]) == 300, len(tokens)
    assert tokens[meta["tokenizer.ggml.eos_token_id"]] == "<|endoftext|>"
    assert len(meta["tokenizer.ggml.merges"]) == 300 - 257, len(meta["tokenizer.ggml.merges"])
    end = start
    for name, dims, kind, offset in infos:
        assert offset % 32 == 0, (name, offset)
        count = int(np.prod(dims))
        end = max(end, start + offset + sizes[kind](count))
        if kind == 8:  # Q8_0: each block's values are its int8 codes times its fp16 scale
            raw = np.frombuffer(data, np.uint8, sizes[kind](count), start + offset).reshape(-1, 34)
            scales = raw[:, :2].copy().view(np.float16).astype(np.float32)
            codes = raw[:, 2:].copy().view(np.int8)
            assert np.abs(codes).max() == 127, name  # the largest of a block is +-127
            assert np.all(scales >= 0)
    assert len(data) == (end + 31) // 32 * 32 or len(data) == end, (path, len(data), end)
    embd = dict((n, (d, k)) for n, d, k, _ in infos)["token_embd.weight"]
    assert embd[0][1] == 300 and embd[0][0] == meta[f"{arch}.embedding_length"], embd
PY

# Bad input, as classes: one line, exit 2, nothing written.
refused "an existing --out" "exists (--overwrite replaces it)" "$export_" --from gpt2.st --out gpt2-f32.gguf
code=$(run "$export_" --from gpt2.st --out gpt2-f32.gguf --overwrite)
check "--overwrite replaces it (exit $code: $(cat err))" test "$code" -eq 0
refused "--out in a folder that does not exist" "no-such-folder" "$export_" --from gpt2.st --out no-such-folder/m.gguf
refused "--out under a file" "gpt2.st/m.gguf" "$export_" --from gpt2.st --out gpt2.st/m.gguf
refused "--out as --from" "--from's own model" "$export_" --from gpt2-hf --out gpt2-hf --format hf --overwrite
refused "--out a folder for a file format" "is a folder, not a file" "$export_" --from gpt2.st --out gpt2-hf --format gguf
refused "a Hugging Face folder that holds a model" "already holds config.json" "$export_" --from llama.st --out gpt2-hf
mkdir -p tokenizer-there && printf '{}' >tokenizer-there/vocab.json
refused "a folder that holds a tokenizer" "already holds vocab.json (--overwrite" "$export_" --from gpt2.st \
  --out tokenizer-there --format hf
mkdir -p folder-in-the-way/merges.txt
refused "a folder where a file of the model goes" "merges.txt is a folder" "$export_" --from gpt2.st \
  --out folder-in-the-way --format hf --overwrite
check "... and nothing of the model written there" test ! -e folder-in-the-way/model.safetensors -a \
  ! -e folder-in-the-way/config.json -a ! -e folder-in-the-way/vocab.json
mkdir -p no-config peft-folder && echo '{}' >peft-folder/adapter_config.json
refused "--from a folder without config.json" "--from no-config is a folder without config.json: --from is a" \
  "$export_" --from no-config --out m.gguf
refused "--from a PEFT adapter folder" "--from peft-folder holds a LoRA adapter (adapter_config.json), not a model" \
  "$export_" --from peft-folder --out m.gguf
refused "an unknown --format" "--format" "$export_" --from gpt2.st --out m.bin --format safetensors
refused "an unknown --type" "--type" "$export_" --from gpt2.st --out m.gguf --type q4_0
refused "a type ONNX does not take" "--format onnx is written in f32 only" "$export_" --from gpt2.st --out m.onnx \
  --type f16
refused "a tokenizer for ONNX" "--tokenizer is not used by --format onnx (an ONNX file carries no tokenizer)" \
  "$export_" --from gpt2.st --out m.onnx --tokenizer shards
refused "a type a Hugging Face folder does not take" "--format hf is written in f32 only" "$export_" --from gpt2.st \
  --out m-hf --type q8_0
refused "a missing --from" "no such file" "$export_" --from missing.st --out m.gguf
printf 'not a checkpoint' >junk.st
refused "a --from that is no checkpoint" "junk.st" "$export_" --from junk.st --out m.gguf
# xgrad's own character-level GPT: no runtime knows it.
"$train" --task lm --text text.txt --seq-len 16 --batch 4 --layers 1 --heads 2 --d-model 16 --steps 2 --eval-every 2 \
  --threads 1 --eval-batches 1 --quiet --save gpt.st >/dev/null 2>&1
refused "xgrad's own GPT" "which no other program runs" "$export_" --from gpt.st --out m.gguf
# A published family on a text's bytes: no tokenizer for GGUF (ONNX and a folder need none).
"$train" --task lm --model llama --text text.txt --seq-len 16 --batch 4 --layers 1 --heads 2 --d-model 16 --steps 2 \
  --eval-every 2 --threads 1 --eval-batches 1 --quiet --save bytes.st >/dev/null 2>&1
refused "GGUF of a model of a text's bytes" "a model of a text's bytes (its ids are the text's [0-9]* distinct \
bytes, in order), which no tokenizer's ids are, and GGUF carries a tokenizer: export it as --format onnx or hf" \
  "$export_" --from bytes.st --out m.gguf
code=$(run "$export_" --from bytes.st --out bytes.onnx)
check "... while ONNX needs none (exit $code: $(cat err))" test "$code" -eq 0
# A tokenizer's ids are not the text's bytes, whatever the model's vocabulary (a config.json
# one larger than the tokenizer's, here), for GGUF or beside a folder.
printf '{"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16, "n_positions": 16, "vocab_size": 400}' \
  >bytes-config.json
"$train" --task lm --model gpt2 --model-config bytes-config.json --text text.txt --seq-len 16 --batch 4 --steps 2 \
  --eval-every 2 --threads 1 --eval-batches 1 --quiet --save wide-bytes.st >/dev/null 2>&1
for format in gguf hf; do
  refused "--tokenizer for a model of a text's bytes, --format $format" \
    "--from wide-bytes.st: a model of a text's bytes .*: --tokenizer would name other text" \
    "$export_" --from wide-bytes.st --out m.$format --format $format --tokenizer shards
done
# Its folder says so (config.json's xgrad_text_bytes: the text's distinct bytes, in order),
# and is refused as the checkpoint is; exported again, it says so still.
"$export_" --from bytes.st --out bytes-hf >/dev/null
check "a folder of a model of a text's bytes lists them in config.json" /usr/bin/python3 -c "
import json; assert json.load(open('bytes-hf/config.json'))['xgrad_text_bytes'] == sorted(set(open('text.txt', 'rb').read()))"
refused "--tokenizer for a folder's model of a text's bytes" \
  "--from bytes-hf: a model of a text's bytes .*: --tokenizer would name other text" \
  "$export_" --from bytes-hf --out m.gguf --tokenizer shards
refused "GGUF of a folder's model of a text's bytes" "--from bytes-hf: a model of a text's bytes" \
  "$export_" --from bytes-hf --out m.gguf
"$export_" --from bytes-hf --out bytes-again-hf >/dev/null
check "... a folder exported from it keeps them" cmp <(/usr/bin/python3 -c "
import json; print(json.load(open('bytes-hf/config.json'))['xgrad_text_bytes'])") <(/usr/bin/python3 -c "
import json; print(json.load(open('bytes-again-hf/config.json'))['xgrad_text_bytes'])")
# A folder that says nothing of its tokens (made elsewhere): a tokenizer it cannot hold is
# refused by size.
/usr/bin/python3 -c "
import json; c = json.load(open('bytes-hf/config.json')); del c['xgrad_text_bytes']
json.dump(c, open('bytes-hf/config.json', 'w'))"
refused "--tokenizer larger than the model's vocabulary" "more than the model's vocabulary" "$export_" \
  --from bytes-hf --out m.gguf --tokenizer shards
# --overwrite makes a folder this export's: the tokenizer of the model it replaces goes with
# that model (a model without one must not pick it up); a tokenizer alone stays, as the
# one a model is put beside.
cp -r gpt2-hf replaced-hf
code=$(run "$export_" --from bytes.st --out replaced-hf --overwrite)
check "a model without a tokenizer over one with exits 0 ($code: $(cat err))" test "$code" -eq 0
check "... and the old model's tokenizer is gone" test ! -e replaced-hf/vocab.json -a ! -e replaced-hf/merges.txt
refused "... so GGUF from it is refused as a model of a text's bytes" "replaced-hf: a model of a text's bytes" \
  "$export_" --from replaced-hf --out m.gguf
# Ctrl-C as the first new file lands in a folder being overwritten: the folder is the old
# model or the new one, whole, never new weights beside the old config.json (which read
# as a model, silently wrong). The files are renamed in together, the signal held off.
check "a signal during an overwrite leaves one model, whole, in five tries" /usr/bin/python3 - "$export_" <<'PY'
import json, os, shutil, signal, struct, subprocess, sys
def family(folder):
    with open(folder + "/model.safetensors", "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        names = json.loads(f.read(n))
    weights = "llama" if any(k.startswith("model.layers.") for k in names) else "gpt2"
    return json.load(open(folder + "/config.json"))["model_type"], weights
def files():  # name -> inode, of the files there now (one may go between the listing and its stat)
    found = {}
    for name in os.listdir("signalled-hf"):
        try:
            if not name.startswith(".xgrad-"):
                found[name] = os.stat("signalled-hf/" + name).st_ino
        except FileNotFoundError:
            pass
    return found
for attempt in range(5):
    shutil.rmtree("signalled-hf", ignore_errors=True)
    shutil.copytree("gpt2-hf", "signalled-hf")
    before = files()
    p = subprocess.Popen([sys.argv[1], "--from", "llama.st", "--out", "signalled-hf", "--overwrite", "--threads", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None:
        now = files()
        if now != before:  # a file replaced, added or gone: the renames have begun
            p.send_signal(signal.SIGINT)
            break
    p.wait()
    config, weights = family("signalled-hf")
    assert config == weights, (attempt, config, weights)
    assert not [n for n in os.listdir("signalled-hf") if n.startswith(".xgrad-")], os.listdir("signalled-hf")
PY
mkdir -p beside-hf && cp gpt2-hf/vocab.json gpt2-hf/merges.txt beside-hf/
mkdir -p untokenized-hf && cp gpt2-hf/config.json gpt2-hf/model.safetensors untokenized-hf/
code=$(run "$export_" --from untokenized-hf --out beside-hf --overwrite)
check "a model put beside a tokenizer alone keeps it ($code: $(cat err))" \
  test "$code" -eq 0 -a -s beside-hf/vocab.json -a -s beside-hf/merges.txt -a -s beside-hf/config.json
# ... but a model of a text's bytes takes none: such a folder no reader would take.
rm -rf beside-hf && mkdir -p beside-hf && cp gpt2-hf/vocab.json gpt2-hf/merges.txt beside-hf/
refused "a model of a text's bytes beside a tokenizer" \
  "beside-hf: .*holds a tokenizer (vocab.json), and a model of a text's bytes takes none" \
  "$export_" --from bytes.st --out beside-hf --overwrite
check "... leaving the folder as it was" test "$(ls beside-hf | tr '\n' ' ')" = "merges.txt vocab.json "
# A link where a file goes is taken (its target is written, the link stays): without
# --overwrite refused; a failed write leaves the user's link where it was.
mkdir -p linked-hf && ln -s /no/such/folder/vocab.json linked-hf/vocab.json
refused "a folder holding a link to nothing where a file goes" "already holds vocab.json" \
  "$export_" --from gpt2.st --out linked-hf --format hf
refused "... with --overwrite, the write through it" "/no/such/folder" \
  "$export_" --from gpt2.st --out linked-hf --format hf --overwrite
check "... and the link is kept, nothing else left" \
  test -L linked-hf/vocab.json -a "$(ls -A linked-hf)" = vocab.json
mkdir -p other && grammar_text other.txt 500 4 && "$tokenize" --text other.txt --out other --vocab-size 280 \
  --threads 1 >/dev/null
refused "--tokenizer other than --from's own" "has a tokenizer of its own" "$export_" --from gpt2.st --out m.gguf \
  --tokenizer other
# A config GGUF cannot express: GPT-2 with another activation (llama.cpp runs GELU's tanh form only).
cp -r gpt2-hf relu-hf && sed -i 's/"gelu_new"/"relu"/' relu-hf/config.json
refused "GPT-2 with relu to GGUF" "gelu_new" "$export_" --from relu-hf --out m.gguf
# An architecture xgrad does not know.
cp -r gpt2-hf bert-hf && sed -i 's/"model_type": "gpt2"/"model_type": "bert"/' bert-hf/config.json
refused "an unknown architecture" "bert" "$export_" --from bert-hf --out m.gguf
# A folder's weights are numbers, as a checkpoint's.
cp -r gpt2-hf nan-hf
/usr/bin/python3 - "$references" nan-hf/model.safetensors <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors_numpy
arrays, metadata = safetensors_numpy.read(sys.argv[2])
arrays = {name: np.array(a) for name, a in arrays.items()}
arrays["transformer.h.0.mlp.c_fc.weight"][0, 1] = np.inf
safetensors_numpy.write(sys.argv[2], arrays, metadata=metadata)
PY
refused "a folder holding an infinity" "--from nan-hf: the tensor transformer.h.0.mlp.c_fc.weight holds NaN" \
  "$export_" --from nan-hf --out m.gguf
# transformers before 4.31 saved GPT-2's causal mask, attn.bias, as U8 (later BOOL): a
# buffer passed over, whatever its dtype; a weight in integers is refused.
cp -r gpt2-hf mask-hf
/usr/bin/python3 - "$references" mask-hf/model.safetensors <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors_numpy
arrays, metadata = safetensors_numpy.read(sys.argv[2])
arrays = {name: np.array(a) for name, a in arrays.items()}
arrays["transformer.h.0.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), dtype=np.uint8))
arrays["h.1.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), dtype=bool))
safetensors_numpy.write(sys.argv[2], arrays, metadata=metadata)
PY
code=$(run "$export_" --from mask-hf --out mask.onnx)
check "a folder with GPT-2's old U8 and BOOL attn.bias exports (exit $code: $(cat err))" test "$code" -eq 0
# Tokenizers lost or doubled in a folder, and a link to nothing where a folder goes.
cp -r gpt2-hf half-hf && rm half-hf/merges.txt
refused "a folder with half a tokenizer" "--from half-hf: holds vocab.json without merges.txt" "$export_" \
  --from half-hf --out half-out
cp -r gpt2-hf two-hf && cp other/encoder.json other/vocab.bpe two-hf/
refused "a folder with two tokenizers" "holds two tokenizers" "$export_" --from two-hf --out m.gguf
ln -s nowhere-at-all dangling
# No output over an input, even with --overwrite (the export would ruin what it reads): a
# file of --from's folder, a file of --tokenizer's pair, the files a folder's save writes.
cp -r gpt2-hf in-hf && cp -r shards in-tok && md5sum in-hf/* in-tok/*.json in-tok/*.bpe >inputs.md5
refused "--out over a file of --from's folder" \
  "--out in-hf/model.safetensors: would write over in-hf/model.safetensors, which --from reads" \
  "$export_" --from in-hf --out in-hf/model.safetensors --format gguf --overwrite
refused "--out over --tokenizer's file" "--out in-tok/vocab.bpe: would write over in-tok/vocab.bpe, which --tokenizer reads" \
  "$export_" --from bytes-hf --tokenizer in-tok --out in-tok/vocab.bpe --format gguf --overwrite
refused "--out over a file of a pair given by name" "would write over ./in-tok/encoder.json, which --tokenizer reads" \
  "$export_" --from bytes-hf --tokenizer ./in-tok/encoder.json,in-tok/vocab.bpe --out in-tok/encoder.json \
  --format gguf --overwrite
cp in-tok/encoder.json in-tok/vocab.json && cp in-tok/vocab.bpe in-tok/merges.txt && md5sum in-tok/*.txt >>inputs.md5
refused "a folder's save over --tokenizer's files" "--out in-tok: would write over in-tok/vocab.json, which --tokenizer reads" \
  "$export_" --from bytes-hf --tokenizer in-tok/vocab.json,in-tok/merges.txt --out in-tok --overwrite
check "and every input is as it was" md5sum --quiet -c inputs.md5
refused "one file of a pair as --tokenizer" "--tokenizer in-tok/encoder.json: is one file of the pair encoder.json and \
vocab.bpe: give both, joined by a comma, or their folder" "$export_" --from bytes-hf --tokenizer in-tok/encoder.json --out m.gguf
# The extension names the format in any case.
code=$(run "$export_" --from gpt2.st --out UPPER.GGUF)
check "--out UPPER.GGUF is GGUF (exit $code: $(cat err))" grep -q "wrote UPPER.GGUF (gguf, f32)" out
check "... the same bytes as gpt2-f32.gguf" cmp -s UPPER.GGUF gpt2-f32.gguf
refused "--out a link to nothing" "is a link to nothing" "$export_" --from gpt2.st --out dangling --format hf
check "... and the link is kept" test -L dangling
check "no refused run wrote its --out" test ! -e m.gguf -a ! -e m.onnx -a ! -e m-hf -a ! -e m.bin
check "no refused run left a temporary behind" only_expected

# A disk that fills mid-write: a limit on the file size (SIGXFSZ ignored: the process told EFBIG, as by
# ENOSPC, rather than killed) cuts the write short; the target stays as it was.
cp gpt2-f32.gguf before.gguf
code=$( (ulimit -f 50; run "$export_" --from gpt2.st --out gpt2-f32.gguf --overwrite) )
check "a write cut short exits 2 (got $code)" test "$code" -eq 2
check "... says so in one line ($(cat err))" test "$(wc -l <err)" -eq 1
check "... naming --out" grep -q -- "--out gpt2-f32.gguf" err
check "... leaving the old file whole" cmp -s before.gguf gpt2-f32.gguf
check "... and no temporary" only_expected
code=$( (ulimit -f 50; run "$export_" --from gpt2.st --out new-hf) )
check "a Hugging Face folder cut short exits 2 (got $code)" test "$code" -eq 2
check "... with no config.json (the folder is no model)" test ! -e new-hf/config.json
check "... and no temporary" only_expected

finish
