#!/usr/bin/env bash
# Mixed precision end to end. By default: xgrad-train --precision bf16 writes float32
# checkpoints that record the precision, resumes in it, refuses to change it, needs (and
# says) more memory; xgrad-generate and xgrad-bench take the flag; bad values are one line
# and exit 2. With --sort, bf16 learns as float32 does: sort reaches 0.99 exact-match in
# every one of ten seeds, the mean within 1.25x float32's steps. With --lm, the KJV
# language model's validation loss after the recipe's 2000 steps is within 0.03 of
# float32's. (The two learning checks run only in the Release build: under the sanitizers
# their thousands of steps take longer than the test's limit while exercising nothing
# the default checks' training runs do not.)
#   usage: precision_test.sh XGRAD_TRAIN XGRAD_GENERATE XGRAD_BENCH [--sort | --lm KJV_TEXT]
set -u
train=$1 generate=$2 bench=$3 mode=${4:-} lm_text=${5:-}
source "$(dirname "$0")/lib.sh"
cd "$work"
run() { timeout 300 "$@" >out 2>err; echo $?; }
# The final metrics line's KEY (nothing when the run wrote none).
final() {
  /usr/bin/python3 -c "import json, sys
line = json.loads(open(sys.argv[1]).readlines()[-1])
print(line[sys.argv[2]] if line.get('final') else '')" "$@" 2>/dev/null
}

if [ "$mode" = --lm ]; then
  for precision in float32 bf16; do
    "$train" --task lm --text "$lm_text" --precision "$precision" --quiet --metrics "lm_$precision.jsonl" >/dev/null
    check "the $precision run ends (exit $?)" test $? -eq 0
    check "after the recipe's 2000 steps" test "$(final "lm_$precision.jsonl" steps)" = 2000
  done
  f32=$(final lm_float32.jsonl val_loss) b16=$(final lm_bf16.jsonl val_loss)
  echo "lm, 2000 steps: validation loss $f32 in float32, $b16 in bf16"
  check "bf16's validation loss $b16 is within 0.03 of float32's $f32" \
    /usr/bin/python3 -c "import sys; sys.exit(abs($b16 - $f32) > 0.03)"
  finish
  exit
fi

if [ "$mode" = --sort ]; then
  # Steps to the target, by seed: one run's count is a lottery on its bits (seeds 0-9 took
  # 550-1,200 steps on one machine, and bf16's own bits differ between AMX and
  # AVX512_BF16), so the means of ten seeds are compared, each precision on the same seeds.
  # (Five seeds' medians were a lottery too: a change of attention's rounding alone moved
  # them from 1.03x to 1.29x, while the means of ten stayed at 1.07x and 1.06x.)
  seeds=(0 1 2 3 4 5 6 7 8 9)
  for precision in float32 bf16; do
    for seed in "${seeds[@]}"; do
      "$train" --task sort --precision "$precision" --seed "$seed" --quiet --eval-every 50 \
        --metrics "sort_${precision}_$seed.jsonl" >/dev/null
      check "sort in $precision, seed $seed, ends (exit $?)" test $? -eq 0
      check "sort in $precision, seed $seed, reaches the target" \
        test "$(final "sort_${precision}_$seed.jsonl" reached_target)" = True
    done
  done
  total_steps() {
    local total=0 seed
    for seed in "${seeds[@]}"; do total=$((total + $(final "sort_${1}_$seed.jsonl" steps_to_target))); done
    echo "$total"
  }
  f32=$(total_steps float32) b16=$(total_steps bf16)
  echo "sort to 0.99 exact-match, mean of ten seeds: $((f32 / 10)) steps in float32, $((b16 / 10)) in bf16"
  check "bf16's mean within 1.25x float32's ($b16 against $f32 steps in all)" \
    /usr/bin/python3 -c "import sys; sys.exit(not (0 < 4 * int('$b16') <= 5 * int('$f32')))"
  finish
  exit
fi

# The memory check counts what bf16 adds (each product's operands rounded and kept for
# backward): the same run too large for this machine needs more in bf16, and says why.
for precision in float32 bf16; do
  refused "--d-model 20000 in $precision" "GiB of memory" "$train" --task sort --d-model 20000 --precision "$precision"
  sed -n 's/.*needs about \([0-9.]*\) GiB.*/\1/p' err >"needed_$precision"
done
check "the memory check says what bf16 keeps" grep -q "and bf16 copies" err
check "bf16 needs more memory ($(cat needed_bf16) GiB) than float32 ($(cat needed_float32) GiB)" \
  /usr/bin/python3 -c "import sys; sys.exit(not $(cat needed_bf16) > $(cat needed_float32))"

# Resume keeps the precision: stopped and resumed equals the run that never stopped.
"$train" --task sort --precision bf16 --steps 100 --eval-every 50 --quiet --save half.st >/dev/null
"$train" --task sort --precision bf16 --steps 200 --eval-every 50 --quiet --save whole.st >/dev/null
"$train" --resume half.st --steps 200 --save half.st --verbose >resumed.out
check "a bf16 checkpoint resumes in bf16" grep -q "products in bf16" resumed.out
check "to the bits of the run that never stopped" same_checkpoint whole.st half.st
"$train" --task sort --precision float32 --steps 200 --eval-every 50 --quiet --save whole32.st >/dev/null
check "the checkpoint holds the tensors of float32's, as float32's, and records bf16" \
  /usr/bin/python3 - whole32.st whole.st <<'PY'
import json, struct, sys
def header(path):
    data = open(path, "rb").read()
    return json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
f32, b16 = header(sys.argv[1]), header(sys.argv[2])
meta_f32, meta_b16 = f32.pop("__metadata__"), b16.pop("__metadata__")
same_tensors = {k: (v["dtype"], v["shape"]) for k, v in f32.items()} == {k: (v["dtype"], v["shape"]) for k, v in b16.items()}
sys.exit(not (same_tensors and meta_b16["config.precision"] == "bf16" and meta_f32["config.precision"] == "float32"))
PY

check "bf16 trains other weights than float32 (the products were rounded)" \
  bash -c "test -s whole.st -a -s whole32.st && ! same_checkpoint whole.st whole32.st --tensors 2>/dev/null"
code=$(run "$train" --resume half.st --steps 300 --precision float32)
check "resuming with another precision exits 2 (got $code)" test "$code" -eq 2
check "and says which" grep -q -- "--precision float32 here, bf16 in the checkpoint" err
"$train" --task sort --steps 20 --quiet --save old.st >/dev/null
/usr/bin/python3 - old.st older.st "$references" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
import safetensors_numpy
arrays, metadata = safetensors_numpy.read(sys.argv[1])
del metadata["config.precision"]
safetensors_numpy.write(sys.argv[2], arrays, metadata)
PY
"$train" --resume older.st --steps 30 --verbose >older.out
check "a checkpoint from before --precision resumes in float32" grep -q "products in float32" older.out

for args in "--precision bf8" "--precision BF16" "--precision"; do
  refused "xgrad-train $args" "precision" "$train" --task sort --steps 1 $args
done
refused "xgrad-generate --precision fp16" "precision" "$generate" --checkpoint whole.st --precision fp16
refused "xgrad-bench --precision half" "precision" "$bench" --config tiny --precision half
check "xgrad-train --version names the bf16 kernels" grep -q "bf16 products: " <("$train" --version)

# The language model and generation in bf16: a short run, then text from its checkpoint.
printf 'In the beginning God created the heaven and the earth.\n%.0s' $(seq 200) >text.txt
"$train" --task lm --text text.txt --seq-len 16 --batch 8 --layers 1 --heads 2 --d-model 16 --steps 30 --warmup 3 \
  --eval-every 15 --eval-batches 2 --quiet --precision bf16 --save lm.st >/dev/null
code=$(run "$generate" --checkpoint lm.st --precision bf16 --tokens 40 --prompt "In")
check "xgrad-generate --precision bf16 writes text (exit $code)" test "$code" -eq 0 -a "$(wc -c <out)" -ge 40
code=$(run "$bench" --config sgemm --precision bf16 --steps 2)
check "xgrad-bench --precision bf16 reports its kernels (exit $code)" /usr/bin/python3 -c '
import json, sys
r = json.loads(open("out").readline())
sys.exit(not (r["precision"] == "bf16" and r["bf16"].startswith(("oneDNN", "OpenBLAS"))))' 
finish
