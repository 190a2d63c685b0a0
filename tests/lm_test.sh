#!/usr/bin/env bash
# End to end tests of the language model: xgrad-train --task lm learns a text (its loss
# falls below the text's unigram entropy), writes the reference's metrics, resumes
# exactly, evaluates and fine-tunes checkpoints, draws its curve, refuses what does not
# fit; xgrad-generate writes the same text with and without its cache.
#   usage: lm_test.sh XGRAD_TRAIN XGRAD_GENERATE
set -u
train=$1 generate=$2
source "$(dirname "$0")/lib.sh"
cd "$work"
run() { timeout 120 "$@" >out 2>err; echo $?; }

# A text with structure beyond its letter counts: sentences drawn from a small grammar.
grammar_text text.txt 1500 1
entropy=$(/usr/bin/python3 -c '
import collections, math, sys
data = open("text.txt", "rb").read()
counts = collections.Counter(data)
print(-sum(c / len(data) * math.log(c / len(data)) for c in counts.values()))')
shape=(--task lm --seq-len 32 --batch 8 --layers 1 --heads 2 --d-model 32 --threads 1 --quiet)
loud=(--task lm --text text.txt --seq-len 32 --batch 8 --layers 1 --heads 2 --d-model 32 --threads 1)
small=("${loud[@]}" --quiet)

# Learning: below the unigram entropy (what counting letters alone reaches).
code=$(run "$train" "${small[@]}" --steps 150 --warmup 10 --eval-every 50 --lr 3e-3 --metrics learn.jsonl \
  --plot curve.png --save learn.st)
check "a short lm run exits 0 (got $code)" test "$code" -eq 0
final=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(open("learn.jsonl").readlines()[-1])["val_loss"])')
check "its validation loss $final is below the unigram entropy $entropy" \
  /usr/bin/python3 -c "import sys; sys.exit(not $final < $entropy)"
check "the metrics have the reference's keys" /usr/bin/python3 -c '
import json
lines = [json.loads(l) for l in open("learn.jsonl")]
assert [list(l) for l in lines[:-1]] == [["step", "train_loss", "val_loss", "val_bits_per_byte", "lr", "train_s", "wall_s"]] * 3
assert [l["step"] for l in lines[:-1]] == [50, 100, 150]
for key in ["steps", "val_loss", "best_val_loss", "train_s", "wall_s", "ms_per_step", "tokens_per_s",
            "steps_to_target", "seconds_to_target"]:
    assert key in lines[-1], key
assert lines[-1]["final"] is True and lines[-1]["best_val_loss"] <= lines[-1]["val_loss"]
# A token a byte: bits per byte are the loss in bits.
assert all(abs(l["val_bits_per_byte"] - l["val_loss"] / 0.6931471805599453) < 2e-4 for l in lines), lines'
check "--plot wrote a PNG" test "$(head -c 4 curve.png | tail -c 3)" = "PNG"

# Resume is exact: a run with a constant rate stopped at 40 steps and resumed to 80 is
# the 80-step run; a cosine run interrupted (SIGINT) wherever it is and resumed is the
# uninterrupted one.
"$train" "${small[@]}" --steps 80 --schedule constant --eval-every 20 --metrics whole.jsonl --save whole.st >/dev/null
"$train" "${small[@]}" --steps 40 --schedule constant --eval-every 20 --metrics parts.jsonl --save part.st >/dev/null
"$train" --resume part.st --steps 80 --metrics parts.jsonl --quiet >/dev/null
check "four evaluations" test "$(grep -c '"step"' whole.jsonl)" -eq 4
check "an lm run resumed gives identical metrics" diff <(timeless whole.jsonl | grep -v final) \
  <(timeless parts.jsonl | grep -v final)
cosine=(--steps 1000 --warmup 10 --eval-every 50)
"$train" "${small[@]}" "${cosine[@]}" --metrics cosine.jsonl >/dev/null
"$train" "${loud[@]}" "${cosine[@]}" --metrics stopped.jsonl --save stopped.st >stopped.out &
for _ in $(seq 200); do [ -s stopped.jsonl ] && break; sleep 0.05; done  # after the first evaluation
kill -INT $!
wait
"$train" --resume stopped.st --metrics stopped.jsonl --quiet >/dev/null
check "the cosine run was interrupted" grep -q "interrupted at step" stopped.out
check "an interrupted cosine run resumed gives identical metrics" \
  diff <(timeless cosine.jsonl | grep -v final) <(timeless stopped.jsonl | grep -v final)

# --eval-only: the checkpoint's losses, printed; nothing else written.
sum_before=$(sum whole.st)
code=$(run "$train" --resume whole.st --eval-only)
check "--eval-only exits 0 (got $code)" test "$code" -eq 0
check "--eval-only reports the last evaluation's losses" test \
  "$(grep '"step"' out | sed 's/.*"val_loss": \([0-9.]*\).*/\1/')" = \
  "$(grep '"step": 80' whole.jsonl | sed 's/.*"val_loss": \([0-9.]*\).*/\1/')"
check "--eval-only changes no file" test "$(sum whole.st)" = "$sum_before"

# --init-from: the weights, with new learning settings and a new step count.
code=$(run "$train" --init-from learn.st --text text.txt --steps 20 --warmup 2 --lr 1e-4 --eval-every 20 \
  --threads 1 --quiet --metrics tuned.jsonl)
check "--init-from exits 0 (got $code)" test "$code" -eq 0
check "--init-from starts where the weights are" /usr/bin/python3 -c '
import json
tuned = json.loads(open("tuned.jsonl").readline())
learned = [json.loads(l) for l in open("learn.jsonl")][-2]
assert tuned["step"] == 20 and tuned["val_loss"] < learned["val_loss"] + 0.1, (tuned, learned)'
refused "--init-from with another width" "another config: --d-model 48" \
  "$train" --init-from learn.st --text text.txt --d-model 48 --steps 5
refused "--resume with --init-from" "give one of them" "$train" --resume whole.st --init-from learn.st

# Generation: the cache changes the speed, not the text, also once the window slides.
for seed in 1 2 3; do
  "$generate" --checkpoint whole.st --prompt "And the" --tokens 100 --seed "$seed" >cached.txt 2>/dev/null
  "$generate" --checkpoint whole.st --prompt "And the" --tokens 100 --seed "$seed" --no-cache >plain.txt 2>/dev/null
  check "seed $seed: the same text with and without the cache" cmp -s cached.txt plain.txt
  check "seed $seed: the prompt, then 100 bytes" test "$(head -c 7 cached.txt)" = "And the" -a \
    "$(wc -c <cached.txt)" -eq 108
done
"$generate" --checkpoint whole.st --temperature 0 --tokens 50 >greedy1.txt 2>speed.txt
"$generate" --checkpoint whole.st --temperature 0 --tokens 50 --threads 1 >greedy2.txt 2>/dev/null
check "greedy text is the same on another thread count" cmp -s greedy1.txt greedy2.txt
refused "--seed with greedy decoding" "--seed is not used by --temperature 0 (greedy decoding draws nothing)" \
  "$generate" --checkpoint whole.st --temperature 0 --seed 9
refused "--tokens 0" "--tokens must be at least 1, got 0" "$generate" --checkpoint whole.st --tokens 0
refused "--top-k with greedy decoding" "--top-k is not used by --temperature -0" \
  "$generate" --checkpoint whole.st --temperature -0 --top-k 5
check "the speed goes to stderr" grep -q "bytes/s" speed.txt
refused "a prompt outside the vocabulary" "--prompt: encode: the byte 126 ('~')" \
  "$generate" --checkpoint whole.st --prompt "~"
"$train" --task copy --seq-len 4 --vocab 4 --d-model 8 --heads 2 --steps 2 --quiet --save toy.st >/dev/null
refused "xgrad-generate on a toy checkpoint" "not a language model" "$generate" --checkpoint toy.st
refused "xgrad-generate on a text" "header length" "$generate" --checkpoint text.txt

# Texts and flags that do not fit.
: >empty.txt
printf 'short text\n' >short.txt
/usr/bin/python3 -c 'open("other.txt", "w").write("0123456789" * 500)'
refused "an empty text" "is empty" "$train" "${shape[@]}" --text empty.txt
refused "a folder as the text" "is a folder" "$train" "${shape[@]}" --text .
refused "a missing text" "cannot open" "$train" "${shape[@]}" --text nothing.txt
refused "a text shorter than a window" "fewer than one window" "$train" "${shape[@]}" --text short.txt
refused "resuming on a text with other bytes" "not the vocabulary the checkpoint was trained on" \
  "$train" --resume whole.st --text other.txt --steps 90
refused "a negative --seq-len, before the text is looked at" "--seq-len must be at least 1" \
  "$train" --task lm --text text.txt --seq-len -5 --quiet
# The text is read once: cut short while the run goes on, it changes nothing.
cp text.txt cut.txt
"$train" "${shape[@]}" --steps 200 --eval-every 10 --text text.txt --metrics uncut.jsonl >/dev/null
"$train" "${shape[@]}" --steps 200 --eval-every 10 --text cut.txt --metrics cut.jsonl >/dev/null &
for _ in $(seq 200); do [ -s cut.jsonl ] && break; sleep 0.05; done  # training: the text was read
: >cut.txt
wait $!
code=$?
check "a text cut short during the run: exit 0 (got $code)" test "$code" -eq 0
check "and the metrics of the text untouched" diff <(timeless uncut.jsonl) <(timeless cut.jsonl)
# A text without a line break: xgrad-generate's default prompt is its first byte.
tr '\n' ' ' <text.txt >oneline.txt
"$train" "${shape[@]}" --text oneline.txt --steps 2 --eval-batches 1 --save oneline.st >/dev/null
code=$(run "$generate" --checkpoint oneline.st --tokens 5)
check "xgrad-generate without --prompt on a text without line breaks exits 0 (got $code)" test "$code" -eq 0
check "and begins with the vocabulary's first byte, a space" test "$(head -c 1 out)" = " "
# A long window with many heads: the picture shows the first 16 heads and 256 positions.
code=$(run "$train" --task lm --text text.txt --seq-len 300 --batch 1 --layers 1 --heads 20 --d-model 40 --threads 1 \
  --quiet --steps 1 --eval-batches 1 --attention-png wide.png)
check "--attention-png of 20 heads x 300 positions exits 0 (got $code)" test "$code" -eq 0
check "its picture is a PNG of bounded size" /usr/bin/python3 -c '
import struct, sys
head = open("wide.png", "rb").read(24)
width, height = struct.unpack(">II", head[16:24])
sys.exit(not (head[:8] == b"\x89PNG\r\n\x1a\n" and width < 2000 and height < 20000))'
# A picture narrower than its words (one head of 8 positions) is widened to hold them: the
# right margin beside the title and the subtitle is white.
code=$(run "$train" --task lm --text text.txt --seq-len 8 --batch 1 --layers 1 --heads 1 --d-model 8 --threads 1 \
  --quiet --steps 1 --eval-batches 1 --attention-png narrow.png)
check "--attention-png of one head x 8 positions exits 0 (got $code)" test "$code" -eq 0
check "its words fit in it" /usr/bin/python3 -c '
import struct, sys, zlib
data = open("narrow.png", "rb").read()
chunks, at = {}, 8
while at < len(data):
    length, kind = struct.unpack(">I4s", data[at:at + 8])
    chunks[kind] = chunks.get(kind, b"") + data[at + 8:at + 8 + length]
    at += 12 + length
width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
assert depth == 8 and colour == 2, (depth, colour)
raw, stride, rows, previous = zlib.decompress(chunks[b"IDAT"]), 3 * width, [], bytearray(3 * width)
for y in range(height):
    kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a, b = line[i - 3] if i >= 3 else 0, previous[i]
        c = previous[i - 3] if i >= 3 else 0
        p = a + b - c
        paeth = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
        line[i] = (line[i] + [0, a, b, (a + b) // 2, paeth][kind]) % 256
    rows.append(line)
    previous = line
margin = [rows[y][3 * x + k] for y in range(0, 48) for x in range(width - 8, width) for k in range(3)]
sys.exit(min(margin) != 255)'
refused "--vocab with lm" "--vocab is not used by --task lm" "$train" "${small[@]}" --vocab 10
refused "--eval-size with lm" "--eval-size is not used by --task lm" "$train" "${small[@]}" --eval-size 10
refused "--target-exact with lm" "--target-exact is not used" "$train" "${small[@]}" --target-exact 0.5
refused "--text with a toy task" "--text is not used by --task sort" "$train" --task sort --text text.txt
refused "dropout with lm" "--dropout must be 0" "$train" "${small[@]}" --dropout 0.1
refused "--min-lr above --lr" "--min-lr 0.5 must lie in" "$train" "${small[@]}" --min-lr 0.5
refused "--eval-only without a checkpoint" "give it with --resume or --init-from" "$train" "${small[@]}" --eval-only

# The recipe's --min-lr and --warmup fit the flags given (no final rate above a tenth of
# --lr, no warmup past a tenth of --steps, neither without a schedule that uses it);
# given, they are checked as they are.
tiny=(--task lm --seq-len 16 --batch 2 --layers 1 --heads 2 --d-model 16 --threads 1 --quiet --eval-batches 1)
for args in "--steps 2 --schedule constant" "--steps 2 --schedule step" "--steps 2 --schedule noam" \
  "--steps 2 --lr 1e-5" "--steps 5"; do
  # shellcheck disable=SC2086
  code=$(run "$train" "${tiny[@]}" --text text.txt $args)
  check "lm with $args and the other defaults exits 0 (got $code: $(cat err))" test "$code" -eq 0
done
refused "a given --warmup past --steps" "--warmup must be below --steps" "$train" "${tiny[@]}" --text text.txt \
  --steps 5 --warmup 5
refused "a given --min-lr without cosine" "it needs --schedule cosine" "$train" "${tiny[@]}" --text text.txt \
  --steps 2 --schedule step --min-lr 1e-4
refused "a given --warmup without one" "--warmup is not used by --schedule constant" "$train" "${tiny[@]}" \
  --text text.txt --steps 2 --schedule constant --warmup 1

# No output overwrites the text being learned, and every refusal comes before any work.
cp text.txt corpus.txt
for flag in --metrics --save --plot --attention-png; do
  refused "$flag over the text" "is the text being learned" "$train" "${tiny[@]}" --text corpus.txt \
    --steps 2 "$flag" corpus.txt
done
check "the text is untouched" cmp -s text.txt corpus.txt
refused "--save over a text" "not a checkpoint of xgrad-train" "$train" "${tiny[@]}" --text text.txt --steps 2 \
  --save corpus.txt
model_sum=$(sum whole.st)
refused "--save over another task's model" "holds a checkpoint of --task lm" "$train" --task copy --seq-len 4 \
  --vocab 4 --d-model 8 --heads 2 --steps 2 --quiet --save whole.st
check "the text and the model are untouched" test "$(sum whole.st)" = "$model_sum" -a -z "$(cmp text.txt corpus.txt)"

# Checkpoints whose settings do not describe their tensors, or whose weights are not
# numbers, are refused at once.
forge whole.st layers.st config.layers=200000
refused "xgrad-generate: a forged layer count" "its config.layers = 200000 but it holds the tensors of 1 layer" \
  "$generate" --checkpoint layers.st --tokens 5
forge whole.st width.st config.d-model=64 config.ff=256
refused "xgrad-generate: a forged width" "call for wte.weight of" "$generate" --checkpoint width.st --tokens 5
forge whole.st window.st config.seq-len=-1
refused "xgrad-generate: a negative window" "the checkpoint's config.seq-len = '-1' cannot be used: must be at least 1" \
  "$generate" --checkpoint window.st --tokens 5
forge whole.st nan.st nan=wte.weight
refused "xgrad-generate: NaN weights" "the tensor wte.weight holds NaN" "$generate" --checkpoint nan.st --tokens 5
refused "xgrad-train --eval-only: NaN weights" "the tensor wte.weight holds NaN" "$train" --resume nan.st --eval-only
# A value with a line break is still one line: the break written as \n.
refused "xgrad-generate: a file name with a line break" 'missing\\nfile.st: no such file' \
  "$generate" --checkpoint $'missing\nfile.st'
refused "xgrad-train: a value with a line break" "--steps" "$train" --task sort --steps $'1\n2'
forge whole.st huge.st huge=ln_f.weight
refused "xgrad-generate: finite weights whose logits overflow" "its weights overflow float32" \
  "$generate" --checkpoint huge.st --tokens 5
refused "xgrad-generate: --temperature ''" "is not a decimal number" "$generate" --checkpoint whole.st --temperature ""
code=$("$generate" --checkpoint whole.st --tokens 5 >/dev/full 2>err; echo $?)
check "xgrad-generate to a full disk exits 2 (got $code) with one line" test "$code" -eq 2 -a "$(wc -l <err)" -eq 1

# The target ends the run; samples on request.
code=$(run "$train" "${small[@]}" --quiet --steps 300 --warmup 5 --eval-every 10 --lr 3e-3 --target-val-loss 2.5 \
  --metrics target.jsonl)
check "a reachable --target-val-loss stops the run early" /usr/bin/python3 -c '
import json
final = json.loads(open("target.jsonl").readlines()[-1])
assert final["steps_to_target"] is not None and final["steps"] == final["steps_to_target"] < 300, final'
"$train" "${loud[@]}" --steps 20 --warmup 2 --eval-every 10 --sample-every 10 >samples.out
check "--sample-every 10 prints a sample at steps 10 and 20, and one at the end" test "$(grep -c '^sample' samples.out)" -eq 3
finish
