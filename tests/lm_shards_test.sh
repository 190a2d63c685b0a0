#!/usr/bin/env bash
# The language model on token shards, end to end: xgrad-tokenize learns a vocabulary and
# writes shards; xgrad-train --data learns them (reporting bits per byte), the same on
# shards numpy writes in llm.c's two layouts; resume and np 2 == accum 2 stay bitwise;
# xgrad-generate decodes with the checkpoint's tokenizer; a run that mixes tokenizers, or
# kinds of data, and every bad shard or folder are refused in one line, nothing written.
#   usage: lm_shards_test.sh XGRAD_TRAIN XGRAD_GENERATE XGRAD_TOKENIZE
set -u
train=$1 generate=$2 tokenize=$3
source "$(dirname "$0")/lib.sh"
cd "$work"
run() { timeout 120 "$@" >out 2>err; echo $?; }
mpi() { local n=$1; shift; timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "$@"; }

# Sentences drawn from a small grammar: words for BPE to learn.
grammar_text text.txt 3000 2
"$tokenize" --text text.txt --out shards --vocab-size 400 --threads 1 >/dev/null
check "xgrad-tokenize wrote the shards and the tokenizer" \
  test -s shards/train_000000.bin -a -s shards/val_000000.bin -a -s shards/encoder.json -a -s shards/vocab.bpe

shape=(--task lm --seq-len 32 --batch 8 --layers 1 --heads 2 --d-model 32 --threads 1 --eval-batches 4 --quiet)

# Learning: the validation loss falls, and is reported per byte.
code=$(run "$train" "${shape[@]}" --data shards --steps 120 --warmup 10 --eval-every 40 --lr 3e-3 \
  --metrics learn.jsonl --save learn.st)
check "an lm run on shards exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "its metrics report bits per byte, falling" /usr/bin/python3 -c '
import json
lines = [json.loads(l) for l in open("learn.jsonl")]
bits = [l["val_bits_per_byte"] for l in lines[:-1]]
assert len(bits) == 3 and bits[-1] < bits[0], bits
assert lines[-1]["val_bits_per_byte"] == bits[-1]
# More than one byte a token: bits per byte are below bits per token.
assert all(b < l["val_loss"] / 0.6931471805599453 for b, l in zip(bits, lines)), bits'
check "the checkpoint keeps its tokenizer" /usr/bin/python3 -c '
import json, struct, sys
data = open("learn.st", "rb").read()
meta = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])["__metadata__"]
assert len(meta["lm.tokenizer"]) == 64 and meta["lm.tokenizer.source"].endswith("vocab.bpe"), meta["lm.tokenizer.source"]
assert int(meta["config.vocab"]) == len(json.load(open("shards/encoder.json"))) and "lm.vocabulary" not in meta'

# numpy writes the same tokens in llm.c's two layouts (write_datafile): the same run.
/usr/bin/python3 - <<'PY'
import os, shutil
import numpy as np
def read(path):
    header = np.fromfile(path, dtype="<i4", count=256)
    assert (header[0], header[1]) == (20240520, 1), header[:3]
    tokens = np.fromfile(path, dtype="<u2", offset=1024)
    assert len(tokens) == header[2]
    return tokens
def write(path, tokens, magic, version, dtype):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = magic, version, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=dtype).tobytes())
for folder, magic, version, dtype in [("numpy16", 20240520, 1, "<u2"), ("numpy32", 20240801, 7, "<u4")]:
    os.mkdir(folder)
    for name in ["encoder.json", "vocab.bpe"]:
        shutil.copy(os.path.join("shards", name), folder)
    for name in ["train_000000.bin", "val_000000.bin"]:
        write(os.path.join(folder, name), read(os.path.join("shards", name)), magic, version, dtype)
PY
for layout in numpy16 numpy32; do
  "$train" "${shape[@]}" --data $layout --steps 120 --warmup 10 --eval-every 40 --lr 3e-3 \
    --metrics $layout.jsonl --save $layout.st >/dev/null 2>&1
  check "shards numpy wrote ($layout) train as xgrad's" diff <(timeless learn.jsonl) <(timeless $layout.jsonl)
done

# Resume is exact, and np 2 is --accum-steps 2.
short=("${shape[@]}" --data shards --eval-every 20)
"$train" "${short[@]}" --schedule constant --steps 40 --metrics whole.jsonl --save whole.st >/dev/null
"$train" "${short[@]}" --schedule constant --steps 20 --metrics parts.jsonl --save part.st >/dev/null
"$train" --resume part.st --steps 40 --metrics parts.jsonl --save part.st --quiet >/dev/null
check "an lm run on shards resumed gives identical metrics" diff <(timeless whole.jsonl | grep -v final) \
  <(timeless parts.jsonl | grep -v final)
check "... and the same checkpoint" same_checkpoint whole.st part.st --tensors
"$train" "${short[@]}" --steps 40 --accum-steps 2 --save accum2.st >/dev/null
mpi 2 "$train" "${short[@]}" --steps 40 --save np2.st >/dev/null
check "np 2 on shards gives the weights of --accum-steps 2" same_checkpoint accum2.st np2.st

# Generation decodes with the checkpoint's tokenizer.
code=$(run "$generate" --checkpoint learn.st --prompt "And the king" --tokens 40 --seed 3)
check "xgrad-generate on a model of tokens exits 0 (got $code: $(cat err))" test "$code" -eq 0
check "it continues the prompt" test "$(head -c 12 out)" = "And the king"
cp out first.txt
run "$generate" --checkpoint learn.st --prompt "And the king" --tokens 40 --seed 3 --no-cache >/dev/null
check "the same text without the cache" cmp -s out first.txt
check "it says tokens" grep -q "40 tokens in" err
run "$generate" --checkpoint learn.st --tokens 20 >/dev/null
check "the default prompt is <|endoftext|>" test "$(head -c 13 out)" = "<|endoftext|>"

# Mixing is refused: another tokenizer, the other kind of data.
"$tokenize" --text text.txt --out other --vocab-size 300 --threads 1 >/dev/null
refused "a resume with another tokenizer" "--data other's tokenizer: tokenizer .* is not the one the checkpoint learnt with" \
  "$train" --resume learn.st --data other --steps 200
refused "fine-tuning with another tokenizer" "is not the one the checkpoint learnt with" \
  "$train" --init-from learn.st --data other --steps 10 --save tuned.st
check "... nothing written" test ! -e tuned.st
refused "--eval-only of a model of tokens on a text" "learnt token shards" \
  "$train" --resume learn.st --eval-only --text text.txt
mkdir bare && cp shards/*.bin bare/
code=$(run "$train" --resume learn.st --data bare --steps 130 --save bare.st --quiet)
check "resuming on shards without their pair takes the checkpoint's tokenizer (got $code: $(cat err))" \
  test "$code" -eq 0
# A resume learns from the data it began with: the same bytes under another name go on;
# shards edited in place (tokens swapped: the same size and vocabulary) are refused, as
# is a text with the same characters in another order; an evaluation takes any data.
cp -r shards edited
/usr/bin/python3 - <<'PY'
import numpy as np
tokens = np.fromfile("edited/train_000000.bin", dtype="<u2", offset=1024)
first = int(np.argmax(tokens != tokens[0]))
tokens[[0, first]] = tokens[[first, 0]]
with open("edited/train_000000.bin", "r+b") as f:
    f.seek(1024)
    f.write(tokens.tobytes())
PY
refused "a resume on shards edited in place" "--data edited's shards: not the data the checkpoint was trained on" \
  "$train" --resume learn.st --data edited --steps 130 --save edited.st
check "... nothing written" test ! -e edited.st
code=$(run "$train" --resume learn.st --eval-only --data edited)
check "--eval-only of the checkpoint on edited shards exits 0 (got $code: $(cat err))" test "$code" -eq 0
refused "--tokenizer other than the folder's" "is not the one that made --data's shards" \
  "$train" "${shape[@]}" --data shards --tokenizer other --steps 10 --save mixed.st
check "... nothing written" test ! -e mixed.st
printf 'In the beginning God created the heaven and the earth.\n%.0s' $(seq 100) >bytes.txt
"$train" "${shape[@]}" --text bytes.txt --steps 2 --eval-every 2 --save bytes.st >/dev/null
refused "shards after a text" "learnt the bytes of a text" "$train" --resume bytes.st --data shards --steps 4
cp bytes.txt moved.txt
code=$(run "$train" --resume bytes.st --text moved.txt --steps 4 --save moved.st)
check "a resume on the same text under another name exits 0 (got $code: $(cat err))" test "$code" -eq 0
rev bytes.txt >reversed.txt
refused "a resume on a text of the same characters in another order" \
  "--text reversed.txt: not the data the checkpoint was trained on (5500 bytes, fingerprint" \
  "$train" --resume bytes.st --text reversed.txt --steps 4 --save reversed.st
check "... nothing written" test ! -e reversed.st
refused "a text after shards" "learnt token shards" "$train" --init-from learn.st --text bytes.txt --steps 4
refused "--text and --data" "give one of them" "$train" "${shape[@]}" --data shards --text bytes.txt
refused "--tokenizer without --data" "--tokenizer is not used" "$train" "${shape[@]}" --tokenizer shards

# Bad folders and tokenizers.
mkdir empty nobin noword
cp shards/encoder.json shards/vocab.bpe nobin/
cp -r shards/. noword/ && mv noword/val_000000.bin noword/holdout.bin
refused "a folder that is not there" "--data absent" "$train" "${shape[@]}" --data absent
refused "a file as --data" "not a folder" "$train" "${shape[@]}" --data text.txt
refused "a folder without shards" "holds no training shard" "$train" "${shape[@]}" --data nobin
refused "a shard named neither train nor val" "'holdout.bin' is neither" "$train" "${shape[@]}" --data noword
mkdir notok && cp shards/*.bin notok/
refused "shards without a tokenizer" "name the shards' tokenizer with --tokenizer" "$train" "${shape[@]}" --data notok
mkdir badjson && cp shards/*.bin shards/vocab.bpe badjson/ && head -c 300 shards/encoder.json >badjson/encoder.json
refused "encoder.json cut short" "encoder.json: not valid JSON" "$train" "${shape[@]}" --data badjson
mkdir badmerge && cp shards/*.bin shards/encoder.json badmerge/ && sed '2s/.*/zq xw/' shards/vocab.bpe >badmerge/vocab.bpe
refused "a merge of unknown symbols" "vocab.bpe: line 2" "$train" "${shape[@]}" --data badmerge
refused "a tokenizer file that is not there" "--tokenizer" "$train" "${shape[@]}" --data notok --tokenizer nothere.tiktoken

# Bad shards, each naming the file: magic, version, count, a cut tail, ids past the
# vocabulary, too short for a window.
bad_shard() {  # FOLDER HOW: a copy of the shards whose val shard is spoilt HOW
  mkdir "$1" && cp shards/* "$1"/
  /usr/bin/python3 - "$1/val_000000.bin" "$2" <<'PY'
import sys
import numpy as np
path, how = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
header = np.frombuffer(data[:1024], dtype="<i4").copy()
tokens = data[1024:]
if how == "magic": header[0] = 20240521
if how == "version": header[1] = 2
if how == "count": header[2] = header[2] + 5
if how == "zero": header[2] = 0
if how == "cut": tokens = tokens[:-3]
if how == "past": tokens[20:22] = np.array([999], dtype="<u2").tobytes()
if how == "short":
    tokens = tokens[:20]
    header[2] = 10
open(path, "wb").write(header.tobytes() + bytes(tokens))
PY
}
for how in magic version count zero cut past short; do bad_shard "bad_$how" "$how"; done
refused "a bad magic" "val_000000.bin': the magic number is 20240521" "$train" "${shape[@]}" --data bad_magic
refused "a bad version" "the version is 2" "$train" "${shape[@]}" --data bad_version
refused "a count past the file" "bytes are missing" "$train" "${shape[@]}" --data bad_count
refused "a count of 0" "token count is 0" "$train" "${shape[@]}" --data bad_zero
refused "a cut tail" "a file cut short" "$train" "${shape[@]}" --data bad_cut
refused "a token past the vocabulary" "token 999 at position 10" "$train" "${shape[@]}" --data bad_past
refused "a split shorter than a window" "has no window of 33 tokens" "$train" "${shape[@]}" --data bad_short --save s.st
check "... nothing written" test ! -e s.st

# Shards are taken in counted order, past llm.c's six digits: the first bad one named is
# the first counted (train_2 before train_10, train_999999 before train_1000000).
for pair in "2 10" "999999 1000000"; do
  read -r first second <<<"$pair"
  folder=counted_$first
  mkdir "$folder" && cp shards/encoder.json shards/vocab.bpe shards/val_000000.bin "$folder"/
  for n in "$first" "$second"; do cp bad_magic/val_000000.bin "$folder/train_$n.bin"; done
  refused "shards train_$first and train_$second: train_$first read first" "train_$first.bin': the magic number" \
    "$train" "${shape[@]}" --data "$folder"
done
finish
