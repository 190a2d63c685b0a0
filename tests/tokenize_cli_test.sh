#!/usr/bin/env bash
# xgrad-tokenize end to end: shards in llm.c's format read apart from xgrad (headers byte
# by byte, every token decoded with the encoder.json written: each text's two parts give
# the text back, cut where the rule says); the same files on 1 and 2 threads and from the
# vocabulary the run wrote; many shards; the KJV once, its progress bar on a terminal; and
# every class of bad input refused in one line, exit 2, with nothing written.
#   tokenize_cli_test.sh XGRAD_TOKENIZE KJV_TXT
set -uo pipefail
tokenize=$(realpath "$1") kjv=$(realpath "$2")
source "$(dirname "$0")/lib.sh"
cd "$work"
run() {
  timeout 120 "$tokenize" "$@" >out 2>err
  echo $?
}

# Texts with words, numbers, runs of spaces and tabs, UTF-8 and lines of one word: the
# first over 1 MiB, so that the pool cuts it (and, on one thread, the progress stretches).
/usr/bin/python3 - <<'PY'
import random
rng = random.Random(37)
words = ["the", "and", "of", "light", "said", "God", "earth", "waters", "day", "night", "Let", "there", "be",
         "it's", "they'll", "café", "naïve", "中文", "🙂", "x" * 30, "1234", "42", "3.14", "--", "(see)", "\"quoted\""]
syllables = ["ba", "ke", "ri", "so", "tu", "lan", "mer", "dos", "qui", "th", "ng", "é", "ö", "ph", "str"]
def word():
    if rng.random() < 0.4:
        return rng.choice(words)
    return "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
def text(lines):
    out = []
    for _ in range(lines):
        line = " ".join(word() for _ in range(rng.randint(1, 14)))
        out.append(line + rng.choice([".", ",", ":", "", "  ", "\t"]))
    return "\n".join(out) + "\n"
for name, lines in (("a.txt", 25000), ("b.txt", 3000), ("c.txt", 40)):
    open(name, "w", encoding="utf-8").write(text(lines))
PY

# check_folder DIR FRACTION SHARD_TOKENS TEXT...: the shards of DIR against the texts,
# apart from xgrad (numpy and the encoder.json written); prints a line of figures.
check_folder() {
  /usr/bin/python3 - "$@" <<'PY'
import json, math, os, sys
import numpy as np
folder, fraction, limit, texts = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def fail(what):
    sys.exit(f"{folder}: {what}")
# GPT-2's bytes_to_unicode: the characters encoder.json spells bytes with.
printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
byte_of, extra = {chr(b): b for b in printable}, 0
for b in range(256):
    if b not in printable:
        byte_of[chr(256 + extra)], extra = b, extra + 1
encoder = json.load(open(os.path.join(folder, "encoder.json"), encoding="utf-8"))
size = max(encoder.values()) + 1
eot = encoder.get("<|endoftext|>")
if eot != size - 1:
    fail(f"<|endoftext|> is {eot}, not the last id {size - 1}")
token_bytes = {i: bytes(byte_of[c] for c in t) for t, i in encoder.items() if i != eot}
files = sorted(f for f in os.listdir(folder) if f.endswith(".bin"))
parts = {}
for split in ("train", "val"):
    names = [f for f in files if f.startswith(split + "_")]
    if names != [f"{split}_{i:06d}.bin" for i in range(len(names))] or not names:
        fail(f"the {split} shards are {names}")
    tokens = []
    for i, name in enumerate(names):
        raw = open(os.path.join(folder, name), "rb").read()
        header = np.frombuffer(raw[:1024], dtype="<i4")
        if header[0] != 20240520 or header[1] != 1 or header[3:].any():
            fail(f"{name}: header {header[:4]}, not magic 20240520, version 1, zeros after the count")
        if header[2] < 1 or 1024 + 2 * header[2] != len(raw):
            fail(f"{name}: count {header[2]} does not make its {len(raw)} bytes with uint16 tokens")
        if header[2] > limit or (i + 1 < len(names) and header[2] != limit):
            fail(f"{name}: {header[2]} tokens, with shards of {limit}")
        tokens.append(np.frombuffer(raw[1024:], dtype="<u2"))
    tokens = np.concatenate(tokens)
    if tokens.max() >= size:
        fail(f"{split}: token {tokens.max()} is past the vocabulary of {size}")
    starts = np.flatnonzero(tokens == eot)
    if len(starts) != len(texts) or starts[0] != 0:
        fail(f"{split}: <|endoftext|> at {starts[:5]}, not at the start of each of {len(texts)} documents")
    documents = np.split(tokens, starts[1:])
    parts[split] = [b"".join(token_bytes[int(t)] for t in d[1:]) for d in documents]
    print(f"{split} {len(tokens)} tokens {len(names)} shards", end="; ")
for path, train, val in zip(texts, parts["train"], parts["val"]):
    whole = open(path, "rb").read()
    if train + val != whole:
        fail(f"{path}: the training and validation parts decode to {len(train)} + {len(val)} bytes, not the text's")
    nominal = len(whole) - math.floor(len(whole) * fraction)
    # The validation part begins at the first place, at or after the nominal cut, where
    # an ASCII whitespace byte follows a non-space ASCII byte.
    safe = lambda p: whole[p] in b" \t\n\r\f\v" and whole[p - 1] < 128 and whole[p - 1] not in b" \t\n\r\f\v"
    cut = len(train)
    if cut < nominal or not safe(cut) or any(safe(p) for p in range(max(nominal, 1), cut)):
        fail(f"{path}: cut at byte {cut}, not the first safe place at or after {nominal}")
print("texts decoded")
PY
}

# Every file of two folders, the same (names and bytes).
same_folders() {
  test "$(ls "$1")" = "$(ls "$2")" || { echo "$1 and $2 hold different files" >&2; return 1; }
  local f
  for f in "$1"/*; do cmp "$f" "$2/$(basename "$f")" || return 1; done
}

texts=a.txt,b.txt,c.txt
code=$(run --text $texts --vocab-size 400 --out one --threads 1)
check "a vocabulary of 400 trained and the texts encoded (exit $code: $(cat err))" test "$code" -eq 0
check "the report: the vocabulary" grep -q "^vocabulary: trained on the training parts, 400 tokens (143 merges, stopped by vocabulary_full), <|endoftext|> 399, identity [0-9a-f]\{8\}$" out
check "the report: each split" test "$(grep -c '^\(train\|val\): [0-9]* bytes, [0-9]* tokens (3 <|endoftext|> included), [0-9.]* bytes per token, 1 shard$' out)" -eq 2
figures=$(check_folder one 0.1 100000000 a.txt b.txt c.txt)
check "one: headers, tokens and texts as llm.c's reader sees them ($figures)" test $? -eq 0
check "one holds the pair and a shard of each split" test "$(ls one | tr '\n' ' ')" = "encoder.json train_000000.bin val_000000.bin vocab.bpe "
code=$(run --text $texts --vocab-size 400 --out two --threads 2)
check "two threads (exit $code)" test "$code" -eq 0
check "1 and 2 threads write the same files" same_folders one two
code=$(run --text $texts --tokenizer one --out given)
check "--tokenizer with the folder written (exit $code: $(cat err))" test "$code" -eq 0
check "the report names the vocabulary's files" grep -q "^vocabulary: [0-9a-f]\{8\} (one/encoder.json,one/vocab.bpe): 400 tokens, <|endoftext|> 399$" out
check "the vocabulary written encodes to the same shards" same_folders one given

# Many shards: the tokens of the one-shard run, cut into shards of 20,000.
code=$(run --text $texts --tokenizer one/encoder.json,one/vocab.bpe --out many --shard-tokens 20000)
check "--shard-tokens 20000 (exit $code: $(cat err))" test "$code" -eq 0
figures=$(check_folder many 0.1 20000 a.txt b.txt c.txt)
check "many shards, each full but the last ($figures)" test $? -eq 0
check "more than 5 training shards" test "$(ls many/train_*.bin | wc -l)" -gt 5
tail_tokens() { for f in "$1"/"$2"_*.bin; do tail -c +1025 "$f"; done | md5sum; }
check "the training shards hold the one shard's tokens" test "$(tail_tokens many train)" = "$(tail_tokens one train)"
check "the validation shards hold the one shard's tokens" test "$(tail_tokens many val)" = "$(tail_tokens one val)"
reported=$(sed -n 's/^train: [0-9]* bytes, \([0-9]*\) tokens.*, \([0-9]*\) shards$/\1 \2/p' out)
check "the report counts the tokens and shards ($reported)" \
  test "$reported" = "$(( ($(cat many/train_*.bin | wc -c) - 1024 * $(ls many/train_*.bin | wc -l)) / 2 )) $(ls many/train_*.bin | wc -l)"
code=$(run --text c.txt --vocab-size 300 --val-fraction 0.5 --out half)
figures=$(check_folder half 0.5 100000000 c.txt)
check "--val-fraction 0.5 cuts at the rule's place (exit $code; $figures)" test $? -eq 0

# The KJV, once, on a terminal: a progress bar on stderr, the shards as the rule says.
if command -v script >/dev/null; then
  code=$(script -qec "timeout 60 $tokenize --text $kjv --vocab-size 8192 --out kjv --threads 2" /dev/null >out 2>&1; echo $?)
else
  code=$(run --text "$kjv" --vocab-size 8192 --out kjv --threads 2)
  echo "script(1) is missing: the progress bar is not tried"
fi
check "the KJV into shards (exit $code)" test "$code" -eq 0
check "its vocabulary fills 8192 tokens" grep -q "trained on the training parts, 8192 tokens (7935 merges, stopped by vocabulary_full)" out
command -v script >/dev/null && check "a progress bar on the terminal" grep -q $'\r.*xgrad-tokenize: encoding train \[#' out
figures=$(check_folder kjv 0.1 100000000 "$kjv")
check "the KJV's shards ($figures)" test $? -eq 0

# Bad input: one line naming the flag or the file, exit 2, and the output folder as it
# was (absent stays absent; an existing one holds the same files).
listing() {
  if [ -f "$1" ]; then md5sum <"$1"; elif [ -e "$1" ]; then ls -A "$1" | tr '\n' ' '; cat "$1"/* | md5sum; else echo absent; fi
}
untouched() {
  local name=$1 out=$2 text=$3; shift 3
  local before; before=$(listing "$out")
  refused "$name" "$text" "$@" --out "$out"
  check "$name writes nothing in $out" test "$(listing "$out")" = "$before"
}
refused "--out given twice" "^xgrad-tokenize: --out is given 2 times: give it once$" --out a --out b
check "and makes neither" test ! -e a -a ! -e b
: >empty.txt
printf 'x%.0s' {1..5000} >no_space.txt
printf 'In the beginning %05000d' 0 >early_space.txt
printf 'ab cd' >tiny.txt
mkdir folder
for text in empty.txt a.txt,empty.txt; do untouched "--text $text (empty)" fresh "--text empty.txt: the file is empty" --text $text --vocab-size 300; done
for text in missing.txt a.txt,missing.txt; do untouched "--text $text (missing)" fresh "--text missing.txt: no such file" --text $text --vocab-size 300; done
for text in folder a.txt,folder; do untouched "--text $text (a folder)" fresh "--text: 'folder' is a folder, not a file" --text $text --vocab-size 300; done
untouched "--text a.txt,,b.txt" fresh "--text a.txt,,b.txt: an empty file name" --text a.txt,,b.txt --vocab-size 300
untouched "--text a.txt," fresh "--text a.txt,: an empty file name" --text a.txt, --vocab-size 300
untouched "--text a.txt,a.txt" fresh "--text names a.txt twice" --text a.txt,a.txt --vocab-size 300
ln -s a.txt link.txt
for text in a.txt,./a.txt a.txt,link.txt; do
  untouched "--text $text (one file under two names)" fresh "--text names one file twice: a.txt and ${text#a.txt,}" --text $text --vocab-size 300
done
untouched "--text ''" fresh "--text needs a file name" --text '' --vocab-size 300
for text in no_space.txt early_space.txt tiny.txt; do
  untouched "--text $text (too short for a validation part)" fresh "--text $text: too short for a validation part" --text $text --vocab-size 300
done
untouched "both --vocab-size and --tokenizer" fresh "--vocab-size and --tokenizer are two vocabularies" --text a.txt --vocab-size 300 --tokenizer one
untouched "neither --vocab-size nor --tokenizer" fresh "no vocabulary: give --vocab-size N to train one on the texts, or --tokenizer FILES" --text a.txt
for size in 256 0 1; do untouched "--vocab-size $size" fresh "--vocab-size must be at least 257 .* got $size" --text a.txt --vocab-size $size; done
untouched "--vocab-size 1.5" fresh "--vocab-size" --text a.txt --vocab-size 1.5
for fraction in 0 0.6 -0.1 nan; do untouched "--val-fraction $fraction" fresh "--val-fraction must lie in (0, 0.5\]" --text a.txt --vocab-size 300 --val-fraction $fraction; done
untouched "--val-fraction abc" fresh "--val-fraction" --text a.txt --vocab-size 300 --val-fraction abc
untouched "--shard-tokens 0" fresh "--shard-tokens must be at least 1" --text a.txt --vocab-size 300 --shard-tokens 0
untouched "--shard-tokens 2^31" fresh "--shard-tokens must be at most 2147483647" --text a.txt --vocab-size 300 --shard-tokens 2147483648
# Output folders that hold shards or the vocabulary's files, or are no folder.
untouched "an --out that holds a run's files" one "--out one: already holds encoder.json and 3 more" --text a.txt --vocab-size 300
mkdir old_shards old_pair && : >old_shards/fineweb_train_000001.bin && echo '{}' >old_pair/encoder.json
untouched "an --out that holds another shard" old_shards "--out old_shards: already holds fineweb_train_000001.bin" --text a.txt --vocab-size 300
untouched "an --out that holds encoder.json" old_pair "--out old_pair: already holds encoder.json (refusing" --text a.txt --vocab-size 300
untouched "an --out that is a file" a.txt "--out a.txt: is a file, not a folder" --text b.txt --vocab-size 300
untouched "an --out below a file" a.txt/sub "--out a.txt/sub: a.txt is a file, not a folder" --text b.txt --vocab-size 300
refused "an --out that is a device" "--out /dev/null: is a device, not a folder" --text b.txt --vocab-size 300 \
  --out /dev/null
check "... /dev/null is still a device" test -c /dev/null
# Checked where the kernel writes: through a link, "link/.." is the link's parent.
mkdir -p linked/inner && ln -s linked/inner link
before=$(listing one)
refused "an --out through a link to a folder of a run's files" "--out link/../../one: already holds encoder.json" \
  --text a.txt --vocab-size 300 --out link/../../one
check "... writes nothing there" test "$(listing one)" = "$before"
check "... nor where the text alone would lead" test ! -e ../one
# Malformed vocabularies: each file of one's pair damaged in turn.
/usr/bin/python3 - <<'PY'
import json, os
encoder = json.load(open("one/encoder.json", encoding="utf-8"))
merges = open("one/vocab.bpe", encoding="utf-8").read().split("\n")
def pair(name, encoder_text, merge_lines):
    os.mkdir(name)
    open(f"{name}/encoder.json", "w", encoding="utf-8").write(encoder_text)
    open(f"{name}/vocab.bpe", "w", encoding="utf-8").write("\n".join(merge_lines))
def without(key):
    return json.dumps({k: v for k, v in encoder.items() if k != key})
pair("bad_json", json.dumps(encoder)[:-20], merges)
pair("unknown_symbol", json.dumps(encoder), merges[:3] + ["zzqq xxyy"] + merges[3:])
pair("missing_byte", without("!"), merges)
pair("no_eot", without("<|endoftext|>"), merges)
pair("duplicate_id", json.dumps(dict(encoder, **{"!": encoder['"']})), merges)
pair("gap", json.dumps(dict(encoder, **{"<|endoftext|>": len(encoder) + 40})), merges)
# A tiktoken rank file whose token of rank 256 is no merge of two lower ones: tiktoken
# encodes with it, vocab.bpe cannot hold it.
import base64
ranks = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
ranks.append(f"{base64.b64encode(b'the').decode()} 256")  # <|endoftext|> comes next, as to GPT-2's rank file
open("three.tiktoken", "w").write("\n".join(ranks) + "\n")
PY
untouched "--tokenizer with bad JSON" fresh "--tokenizer: bad_json/encoder.json: not valid JSON" --text a.txt --tokenizer bad_json
untouched "--tokenizer merging an unknown symbol" fresh "--tokenizer: unknown_symbol/vocab.bpe: line 4 merges \"zzqq\", which is no token yet" --text a.txt --tokenizer unknown_symbol
untouched "--tokenizer missing a single byte" fresh "--tokenizer: missing_byte/encoder.json: the single bytes 0x21 \"!\" are missing" --text a.txt --tokenizer missing_byte
untouched "--tokenizer without <|endoftext|>" fresh "--tokenizer no_eot: the vocabulary has no <|endoftext|> token" --text a.txt --tokenizer no_eot
untouched "--tokenizer with an id twice" fresh "--tokenizer: duplicate_id/encoder.json: tokens .* both have id" --text a.txt --tokenizer duplicate_id
untouched "--tokenizer whose ids leave a gap" fresh "--tokenizer gap: its ids leave gaps" --text a.txt --tokenizer gap
untouched "--tokenizer that vocab.bpe cannot hold" fresh "--tokenizer three.tiktoken: cannot be written as encoder.json and vocab.bpe" --text a.txt --tokenizer three.tiktoken
untouched "--tokenizer naming a missing folder" fresh "--tokenizer nowhere: no such file" --text a.txt --tokenizer nowhere
untouched "--tokenizer naming a folder without a pair" fresh "--tokenizer folder: the folder holds neither" --text a.txt --tokenizer folder
# A run that fails after writing every shard (its report cannot be written) leaves nothing.
code=$("$tokenize" --text $texts --tokenizer one --out full/sub >/dev/full 2>err; echo $?)
check "stdout to a full disk exits 2 (got $code)" test "$code" -eq 2
check "and says so in one line" test "$(wc -l <err)" -eq 1 -a -n "$(grep 'standard output' err)"
check "and removes the shards, the pair and the folders it made" test ! -e full
check "no temporary file is left anywhere" test -z "$(find . -name '.xgrad-*')"
# Files past the size limit (ulimit -f; SIGXFSZ ignored, each write told EFBIG): the same.
code=$( (ulimit -f 1; "$tokenize" --text $texts --tokenizer one --out limited/sub >/dev/null 2>err; echo $?) )
check "a shard past ulimit -f exits 2 (got $code)" test "$code" -eq 2
check "... says so in one line, naming the file ($(cat err))" test "$(wc -l <err)" -eq 1 -a -n "$(grep 'limited/sub/' err)"
check "... and removes what it made" test ! -e limited
check "... no temporary file left" test -z "$(find . -name '.xgrad-*')"
# Ctrl-C or SIGTERM part-way: the run stops at its next stretch, removes what it wrote and
# exits with 128 + the signal (the text is long enough to be still running when it comes).
for _ in $(seq 16); do cat "$kjv"; done >long.txt
for signal in INT TERM; do
  "$tokenize" --text long.txt --vocab-size 2000 --shard-tokens 20000 --out "stopped-$signal" >/dev/null 2>err &
  pid=$!
  # Its handlers are set before it makes the folder; a fixed sleep raced a slow start (the
  # sanitizer build), where the signal came first and a background job ignores SIGINT.
  for _ in $(seq 600); do [ -d "stopped-$signal" ] && break; sleep 0.05; done
  kill -s "$signal" "$pid"
  wait "$pid"
  code=$?
  expected=$([ "$signal" = INT ] && echo 130 || echo 143)
  check "SIG$signal part-way exits $expected (got $code)" test "$code" -eq "$expected"
  check "... says it was interrupted, in one line" test "$(wc -l <err)" -eq 1 -a -n "$(grep "interrupted by SIG$signal" err)"
  check "... and leaves nothing" test ! -e "stopped-$signal"
done
rm -f long.txt
finish
