#!/usr/bin/env bash
# xgrad-train against inputs that once lost data, hung or gave silent nonsense (issue 14),
# several of each class: every one ends in one line on stderr and exit code 2 (or 128 +
# the signal), and no file is damaged.   usage: train_reliability_test.sh XGRAD_TRAIN
set -u
train=$1
source "$(dirname "$0")/lib.sh"
cd "$work"
run() { timeout 60 "$train" "$@" >out 2>err; echo $?; }
base=(--task copy --heads 2 --eval-size 50 --quiet --threads 1)
small=("${base[@]}" --seq-len 6 --vocab 8 --d-model 32)
"$train" "${small[@]}" --steps 20 --eval-every 10 --save run.st >/dev/null
sum() { md5sum "$1" | cut -d' ' -f1; }
original=$(sum run.st)

# ---- outputs that alias the checkpoint or each other -------------------------------
ln -s run.st link.st
ln run.st hard.st
mkdir sub
ln -s z.st z-link
refused "metrics over the resumed file" "checkpoint being resumed" --resume run.st --metrics run.st
refused "png over the resumed file" "checkpoint being resumed" --resume run.st --attention-png run.st
# A combination the checkpoint's setting cannot meet names the flag given beside it.
refused "an --accum-steps the checkpoint's batch cannot split" \
  "--resume run.st: the checkpoint's config.batch = '64' cannot be used with --accum-steps: 64 does not divide into" \
  --resume run.st --accum-steps 7 --steps 30
refused "metrics through a symlink" "checkpoint being resumed" --resume run.st --metrics link.st
refused "metrics through a hard link" "checkpoint being resumed" --resume run.st --metrics hard.st
refused "metrics spelled another way" "checkpoint being resumed" --resume run.st --metrics ./sub/../run.st
refused "save = metrics" "same file" "${small[@]}" --steps 5 --save x.st --metrics x.st
refused "metrics = png" "same file" "${small[@]}" --steps 5 --metrics y --attention-png ./y
refused "save = png via a link" "same file" "${small[@]}" --steps 5 --save z.st --attention-png z-link
check "the checkpoint is untouched by every refusal" test "$(sum run.st)" = "$original"
check "nothing was created by a refusal" test ! -e x.st -a ! -e y -a ! -e z.st

# ---- saving to devices, folders, symlinks, long names ------------------------------
refused "save to /dev/null" "not a file" "${small[@]}" --steps 5 --save /dev/null
check "/dev/null is still a device" test -c /dev/null
mkdir folder
refused "save to a folder" "folder" "${small[@]}" --steps 5 --save folder
refused "png to a folder" "folder" "${small[@]}" --steps 5 --attention-png folder
refused "metrics to a folder" "folder" "${small[@]}" --steps 5 --metrics folder
refused "save into a missing folder" "cannot write in" "${small[@]}" --steps 5 --save missing/run.st
mkfifo pipe
refused "metrics to a FIFO nobody reads" "FIFO" "${small[@]}" --steps 5 --metrics pipe
refused "save to a FIFO" "not a file" "${small[@]}" --steps 5 --save pipe
cp run.st target.st
ln -s target.st saved-link.st
check "save through a symlink works" test "$(run "${small[@]}" --steps 10 --eval-every 10 --save saved-link.st)" -eq 0
check "the symlink is still a symlink" test -L saved-link.st
check "its target holds the new checkpoint" test "$(sum target.st)" != "$original"
ln -s not-yet.st dangling.st
check "save through a dangling symlink works" test "$(run "${small[@]}" --steps 10 --eval-every 10 --save dangling.st)" -eq 0
check "it created the link's target" test -f not-yet.st -a -L dangling.st
long=$(printf 'c%.0s' $(seq 1 250)).st
check "a 253-byte file name saves" test "$(run "${small[@]}" --steps 10 --eval-every 10 --save "$long")" -eq 0
check "and resumes" test "$(run --resume "$long" --steps 20 --eval-every 10 --quiet)" -eq 0
check "no temporary file is left" test -z "$(ls -A | grep -e '\.tmp' || true)"

# ---- every flag, given what it cannot take -------------------------------------------
# One line, exit 2, naming the flag (and what is wrong with it). The table must hold every
# flag --help lists (but --help and --version, which print whatever follows them): a new
# flag without a row here fails the test.
"$train" --help | grep -oE '^  --[a-z0-9-]+' | tr -d ' ' | grep -vx -e --help -e --version | sort >flags
table=$(cat <<'TABLE'
--task|lm2|--task: lm2 not in
--text|nowhere.txt|--text
--data|nowhere|--data is not used
--tokenizer|nowhere|--tokenizer is not used
--seq-len|0|--seq-len must be at least 1, got 0
--vocab|-3|--vocab must be at least 1, got -3
--d-model|x|--d-model: 'x' is not a whole number
--heads|0|--heads must be at least 1, got 0
--layers|-1|--layers must be at least 1, got -1
--ff|-2|--ff cannot be negative, got -2
--dropout|1.5|--dropout must lie in \[0, 1), got 1.5
--positions|wavy|--positions: wavy not in
--model|gpt2|--model is not used by --task sort
--model-config|nowhere.json|--model-config is not used by --model gpt
--lora|2|--lora is not used by --model gpt
--lora-alpha|0|--lora-alpha is not used by --lora 0
--lora-dropout|1|--lora-dropout is not used by --lora 0
--lora-targets|q_proj|--lora-targets is not used by --lora 0
--recompute|x|argument was not expected: x
--keep-denormals|x|argument was not expected: x
--save-hf|out-hf|--save-hf is not used by --model gpt
--batch|0|--batch must be at least 1, got 0
--steps|-5|--steps must be at least 1, got -5
--lr|nan|--lr must be a finite number, got nan
--min-lr|-1|--min-lr -1.0 must lie in
--weight-decay|-0.5|--weight-decay cannot be negative, got -0.5
--optimizer|lion|--optimizer: lion not in
--beta2|1|--beta2 must lie in \[0, 1), got 1.0
--schedule|wobbly|--schedule: wobbly not in
--warmup|-1|--warmup
--clip|-1|--clip cannot be negative, got -1.0
--seed|-1|--seed: '-1' is not a whole number
--precision|fp8|--precision: fp8 not in
--threads|-2|--threads cannot be negative, got -2
--comm-timeout|0|--comm-timeout must lie in \[0.001, 1000000\] seconds, got 0.0
--accum-steps|0|--accum-steps must be at least 1, got 0
--eval-every|0|--eval-every must be at least 1, got 0
--eval-size|0|--eval-size must be at least 1, got 0
--eval-batches|0|--eval-batches
--target-exact|nan|--target-exact must be a finite number, got nan
--target-val-loss|-1|--target-val-loss must be positive
--sample-every|-1|--sample-every
--save||--save needs a file name
--resume|nowhere.st|--resume nowhere.st: no such file
--init-from|nowhere.st|--init-from nowhere.st: no such file
--eval-only|x|argument was not expected: x
--metrics|nowhere/m.jsonl|--metrics nowhere/m.jsonl: cannot write in nowhere
--plot|nowhere/p.png|--plot nowhere/p.png: cannot write in nowhere
--attention-png|nowhere/a.png|--attention-png nowhere/a.png: cannot write in nowhere
--profile|nowhere/p|--profile nowhere/p.json: cannot write in nowhere
--profile-steps|0|--profile-steps
--quiet|x|argument was not expected: x
--verbose|x|argument was not expected: x
--allow-nonfinite|x|argument was not expected: x
TABLE
)
while IFS='|' read -r flag value says; do
  refused "$flag '$value'" "$says" --task sort $flag "$value"
done <<<"$table"
# CLI11's words said plainly: a flag twice, a flag without its value.
refused "--steps given twice" "^xgrad-train: --steps is given 2 times: give it once$" --task sort --steps 1 --steps 2
refused "--lr with no value" "^xgrad-train: --lr needs a value$" --task sort --lr
# A flag for ranks, without ranks: it would do nothing.
refused "--comm-timeout in a run of one process" \
  "^xgrad-train: --comm-timeout is used by ranks waiting for each other: a run of one process has no other rank" \
  --task sort --comm-timeout 5
check "the table holds every flag of --help ($(comm -23 flags <(cut -d'|' -f1 <<<"$table" | sort) | tr '\n' ' '))" \
  test -z "$(comm -23 flags <(cut -d'|' -f1 <<<"$table" | sort))"

# ---- a checkpoint's every field, wrong --------------------------------------------
# Each entry damaged alone, or made to contradict the others or the tensors: the resume
# is refused in one line that names the file and the field. (The table: field=value,
# then what the message must say.)
"$train" "${small[@]}" --steps 20 --eval-every 10 --save whole.st --target-exact 2 >/dev/null
while IFS='|' read -r entry says; do
  printf -v value '%b' "$entry"  # \n in the table is a line break
  forge whole.st forged.st "$value"
  refused "a checkpoint with $entry" "--resume forged.st: the checkpoint${says}" --resume forged.st --steps 30
done <<'TABLE'
step=99999999| contradicts itself: its step = 99999999 but its optimizer state has made 20 steps
step=-4|'s step = '-4' is not a whole number
step=ten|'s step = 'ten' is not a whole number
wall_s=-1|'s wall_s = '-1' is not a number in
train_s=nan|'s train_s = 'nan' is not a number in
eval.val_loss=-2|'s eval.val_loss = '-2' is not a number in
eval.train_loss=x|'s eval.train_loss = 'x' is not a number in
eval.token_acc=1.5|'s eval.token_acc = '1.5' is not a number in
eval.exact_match=-0.1|'s eval.exact_match = '-0.1' is not a number in
best_val_loss=0.0001| contradicts itself: best_val_loss = 1e-04 is not the lowest validation loss of its curve
recent_steps=999|'s recent_steps = '999' is not a whole number in \[0, step\]
recent_loss_sum=-1|'s recent_loss_sum = '-1' is not a number in
curve=garbage|'s curve = 'garbage' is not lines of step
curve=30 1.0 1.0\n| contradicts itself: its curve has an evaluation at step 30 in a run at step 20
curve=10 1 1\n5 1 1\n| contradicts itself: its curve has an evaluation at step 5 after one at step 10
reached_target=maybe|'s reached_target = 'maybe' is not true or false
config.seq-len=-5|'s config.seq-len = '-5' cannot be used: must be at least 1
config.seq-len=abc|'s config.seq-len = 'abc' is not a whole number
config.vocab=0|'s config.vocab = '0' cannot be used
config.heads=3|'s config.heads = '3' cannot be used: 3 does not divide --d-model 32
config.layers=-1|'s config.layers = '-1' cannot be used
config.batch=0|'s config.batch = '0' cannot be used
config.optimizer=bogus|'s config.optimizer = 'bogus' cannot be used
config.schedule=sometimes|'s config.schedule = 'sometimes' cannot be used
config.lr=inf|'s config.lr = 'inf' cannot be used
config.lr=-1|'s config.lr = '-1' cannot be used
config.beta2=2|'s config.beta2 = '2' cannot be used
config.dropout=1.5|'s config.dropout = '1.5' cannot be used
config.precision=fp8|'s config.precision = 'fp8' cannot be used
config.task=nope|'s config.task = 'nope' cannot be used
config.lora=2|'s config.lora = '2' cannot be used: 2: LoRA adapts the published families (--model gpt2 or llama), not --model gpt
run.eval-every=0|'s run.eval-every = '0' cannot be used
run.eval-size=-2|'s run.eval-size = '-2' cannot be used
TABLE
forge whole.st forged.st run.steps=-3
refused "a checkpoint's run.steps = -3, not given again" "--resume forged.st: the checkpoint's run.steps = '-3' cannot be used" \
  --resume forged.st
check "--steps given again overrides the checkpoint's run.steps" test "$(run --resume forged.st --steps 30)" -eq 0
ln -sf loop-a loop-b
ln -sf loop-b loop-a
refused "--resume through a symlink loop" "--resume loop-a: Too many levels of symbolic links" --resume loop-a

# ---- a resume after lines were written past the checkpoint -------------------------
# A run killed after its metrics got lines its checkpoint does not cover (and in the
# middle of a line) is resumed: the file holds each evaluation once, in order, exactly
# the lines of an uninterrupted run (timings aside).
never=("${small[@]}" --target-exact 2)  # trains every step asked
"$train" "${never[@]}" --steps 20 --eval-every 5 --metrics whole.jsonl >/dev/null
"$train" "${never[@]}" --steps 10 --eval-every 5 --save at10.st --metrics cut.jsonl >/dev/null
cp at10.st resume.st
"$train" --resume resume.st --steps 15 --metrics cut.jsonl --quiet >/dev/null  # lines past step 10
printf '{"step": 20, "train_loss": 1.2' >>cut.jsonl  # and a line cut off by the kill
check "the metrics of a killed run hold lines past its checkpoint" grep -q '"step": 15' cut.jsonl
cp at10.st resume.st
check "the resume runs" test "$(run --resume resume.st --steps 20 --metrics cut.jsonl)" -eq 0
check "each evaluation once, in order, as an uninterrupted run writes them" \
  test "$(timeless cut.jsonl)" = "$(timeless whole.jsonl)"
before=$(sum cut.jsonl)
check "a finished run resumed leaves the metrics alone" test "$(run --resume resume.st --metrics cut.jsonl)" -eq 0
check "(the same file)" test "$(sum cut.jsonl)" = "$before"

# ---- hangs ---------------------------------------------------------------------------
refused "resume from a FIFO" "FIFO" --resume pipe
refused "resume from a folder" "folder" --resume folder
refused "64k threads" "threads" "${small[@]}" --steps 5 --threads 65536
refused "negative threads" "threads" "${small[@]}" --steps 5 --threads=-2
# Ctrl-C or SIGTERM in the middle of a long evaluation: stopped within a second, saved.
for signal in INT TERM; do
  "$train" --task sort --seq-len 16 --steps 100000 --eval-every 1 --eval-size 10000000 --save "sig-$signal.st" \
    --quiet --threads 1 >"sig-$signal.out" 2>&1 &
  pid=$!
  sleep 2
  start=$(date +%s%N)
  kill "-$signal" $pid
  wait $pid
  code=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  expected=$((128 + $(kill -l "$signal")))
  check "SIG$signal exits $expected (got $code)" test "$code" -eq "$expected"
  check "SIG$signal during evaluation stops within a second (${took} ms)" test "$took" -lt 1500
  check "SIG$signal saved a checkpoint" grep -q "checkpoint saved" "sig-$signal.out"
  check "the SIG$signal checkpoint loads" test "$(run --resume "sig-$signal.st" --steps 1 --eval-size 10 --quiet)" -eq 0
done
# A second Ctrl-C exits at once, whatever the first one was doing.
"$train" --task sort --seq-len 16 --steps 100000 --eval-every 1 --eval-size 10000000 --quiet --threads 1 >/dev/null 2>&1 &
pid=$!
sleep 2
kill -INT $pid; kill -INT $pid
wait $pid
check "two Ctrl-C exit 130" test $? -eq 130

# ---- silent wrong results ----------------------------------------------------------------
# In bf16 too: a loss past bf16's range (or NaN) stops the run before the update.
for precision in float32 bf16; do
  code=$(run "${small[@]}" --steps 50 --eval-every 10 --lr 1e300 --save div.st --metrics div.jsonl --precision $precision)
  check "a diverging $precision run exits 2" test "$code" -eq 2
  check "it names the step and the loss ($precision)" grep -q "step [0-9]*: the loss is" err
  check "no NaN checkpoint was written ($precision)" test ! -e div.st
  check "no NaN in the metrics ($precision)" test -z "$(grep -i nan div.jsonl || true)"
done
# A validation loss that is not finite is divergence too: those weights are written
# nowhere; a run failing before its first evaluation leaves no metrics file either.
code=$(run "${small[@]}" --steps 50 --eval-every 1 --lr 1e300 --save nan-eval.st --metrics nan-eval.jsonl \
  --plot nan-eval.png)
check "a non-finite validation loss stops the run (got $code)" test "$code" -eq 2
check "... naming it" grep -q "step 1: the validation loss is" err
check "... writing no checkpoint, metrics or plot" test ! -e nan-eval.st -a ! -e nan-eval.jsonl -a ! -e nan-eval.png
code=$(run "${small[@]}" --steps 30 --eval-every 10 --lr 1e300 --allow-nonfinite --metrics nan.jsonl)
check "--allow-nonfinite goes on" test "$code" -eq 0
check "its metrics are valid JSON" /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]): json.loads(line)' nan.jsonl
check "a non-finite loss is written as null" grep -q '"train_loss": null, "val_loss": null' nan.jsonl
code=$(run "${small[@]}" --steps 30 --eval-every 10 --lr 1e300 --clip 1 --allow-nonfinite --metrics nan-clip.jsonl)
check "--allow-nonfinite goes on with --clip too (got $code)" test "$code" -eq 0
code=$(run "${small[@]}" --steps 50 --eval-every 10 --lr 1e300 --clip 1)
check "with --clip a diverging run names the loss, not the clipping" grep -q "step [0-9]*: the loss is" err
# Flags given to a resume are compared as the run will have them: --ff 0 is 4 x the
# checkpoint's --d-model (32), not the default's.
code=$(run --resume run.st --ff 0 --steps 20)
check "--ff 0 agrees with a checkpoint of --d-model 32 (got $code: $(cat err))" test "$code" -eq 0
refused "--ff other than the checkpoint's" "--ff 64 here, 128 in the checkpoint" --resume run.st --ff 64 --steps 20
# --eval-only trains nothing: the learning flags are refused, not taken and ignored.
for flag in "--lr 0.1" "--optimizer sgd" "--schedule noam" "--weight-decay 0.5" "--steps 30"; do
  refused "$flag with --eval-only" "${flag%% *} is not used by --eval-only" --resume run.st --eval-only $flag
done
# A finished run resumed: reported, nothing written.
"$train" --task reverse --seq-len 6 --vocab 8 --steps 2000 --eval-every 50 --eval-size 200 --quiet --threads 1 \
  --save done.st --metrics done.jsonl >/dev/null
done_sum=$(sum done.st)
metrics_sum=$(sum done.jsonl)
for extra in "" "--steps 5000" "--eval-every 7"; do
  code=$(run --resume done.st --save done.st --metrics done.jsonl --attention-png done.png $extra)
  check "resuming a run that reached its target ($extra) exits 0" test "$code" -eq 0
  check "it reports the finished result ($extra)" grep -q "finished" out
  check "it changes nothing ($extra)" test "$(sum done.st)" = "$done_sum" -a "$(sum done.jsonl)" = "$metrics_sum" \
    -a ! -e done.png
done
check "the reported score is the measured one" grep -q "exact-match $(tail -n 2 done.jsonl | head -n 1 |
  sed 's/.*"exact_match": \([0-9.]*\).*/\1/')" out
code=$(run --resume run.st --steps 20)
check "resuming at --steps reports and exits 0" test "$code" -eq 0 -a "$(sum run.st)" = "$original"
check "a run past its steps prints no unmeasured score" test -z "$(grep 'final loss 0.0000' out || true)"
code=$(run --resume run.st --steps 10 --save run.st)
check "resuming below the checkpoint's step changes nothing" test "$code" -eq 0 -a "$(sum run.st)" = "$original"
# Write errors.
refused "metrics to a full disk" "writing failed" "${small[@]}" --steps 10 --eval-every 10 --metrics /dev/full
code=$("$train" "${small[@]}" --steps 10 --eval-every 10 >/dev/full 2>err; echo $?)
check "stdout to a full disk exits 2" test "$code" -eq 2
check "and says so" grep -q "standard output" err

# ---- damaged checkpoint settings ------------------------------------------------------------
# edit IN OUT KEY VALUE: a copy of a checkpoint with one metadata entry changed (or a
# header key duplicated with DUPLICATE).
edit() {
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
src, dst, key, value = sys.argv[1:5]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
if key == "DUPLICATE":
    text = json.dumps(header)[:-1] + ', "' + value + '": ' + json.dumps(header[value]) + "}"
else:
    header["__metadata__"][key] = value
    text = json.dumps(header)
text += " " * ((8 - len(text) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text.encode() + data[8 + n:])
PY
}
edit run.st neg.st step -5 && refused "a negative step" "step = '-5'" --resume neg.st
edit run.st abc.st step abc && refused "a step that is not a number" "step = 'abc'" --resume abc.st
edit run.st huge.st step 99999999999999999999999 && refused "a step beyond 64 bits" "step" --resume huge.st
edit run.st opt.st config.optimizer lion && refused "an unknown optimizer" "config.optimizer = 'lion'" --resume opt.st
edit run.st sched.st config.schedule wobbly && refused "an unknown schedule" "config.schedule = 'wobbly'" --resume sched.st
edit run.st lr.st config.lr nan && refused "a NaN learning rate" "config.lr = 'nan'" --resume lr.st
edit run.st seq.st config.seq-len 12x && refused "a damaged seq-len" "config.seq-len = '12x'" --resume seq.st
edit run.st dm.st config.d-model 1000000000 && refused "a checkpoint claiming d_model 1e9" "GiB" --resume dm.st
edit run.st dup.st DUPLICATE tok.weight && refused "a duplicate header key" "twice" --resume dup.st
head -c 0 run.st >empty.st && refused "an empty file" "bytes" --resume empty.st

# ---- option values that make no sense ---------------------------------------------------------
for value in nan inf -inf; do
  refused "--lr $value" "--lr" "${small[@]}" --steps 5 "--lr=$value"
  refused "--clip $value" "--clip" "${small[@]}" --steps 5 "--clip=$value"
  refused "--dropout $value" "--dropout" "${small[@]}" --steps 5 "--dropout=$value"
  refused "--target-exact $value" "--target-exact" "${small[@]}" --steps 5 "--target-exact=$value"
done
for flag in --save --resume --metrics --attention-png; do
  refused "empty $flag" "needs a file name" "${small[@]}" --steps 5 "$flag" ""
done
refused "seed beyond 64 bits" "--seed" "${small[@]}" --steps 5 --seed 18446744073709551616
refused "a negative seed" "--seed" "${small[@]}" --steps 5 --seed=-1
refused "a fractional batch" "--batch" "${small[@]}" --steps 5 --batch 2.5
refused "seq-len beyond int" "--seq-len" "${small[@]}" --steps 5 --seq-len 99999999999
"$train" "${base[@]}" --d-model 32 --steps 20 --eval-every 10 --seq-len 010 --metrics octal.jsonl >/dev/null
"$train" "${base[@]}" --d-model 32 --steps 20 --eval-every 10 --seq-len 10 --metrics decimal.jsonl >/dev/null
check "--seq-len 010 is ten" diff <(timeless octal.jsonl) <(timeless decimal.jsonl)

# ---- sizes too large for the machine: refused at once, naming the flags ---------------------
for args in "--seq-len 100000" "--batch 1000000" "--vocab 2000000000" "--d-model 100000" "--d-model 536870912" \
            "--layers 100000"; do
  start=$(date +%s%N)
  # shellcheck disable=SC2086
  refused "$args" "GiB" "${base[@]}" --steps 5 $args
  check "$args is refused within a second" test $(( ($(date +%s%N) - start) / 1000000 )) -lt 1000
  check "$args names the flag" grep -q -- "${args%% *}" err
done
refused "an unwritable --save found before training" "cannot write" "${small[@]}" --steps 100000 --save run.st/x.st
# Under an address-space limit (ulimit -v) each thread's reserved memory (its BLAS buffer
# and allocator arena) counts, and so does --save's buffer: a run below its need is refused
# at once, one given it trains and saves (it failed at its first save: std::bad_alloc, no
# checkpoint; or OpenBLAS waited forever for a buffer). Not under the sanitizers, whose
# shadow memory no address-space limit holds.
if ! ldd "$train" | grep -q asan; then
  /usr/bin/python3 -c "
import random; random.seed(3); words = ['the', 'lord', 'said', 'unto', 'moses', 'and', 'of', 'in', 'his', 'land']
print(' '.join(random.choice(words) for _ in range(60000)))" >limited.txt
  wide=(--task lm --text limited.txt --d-model 512 --layers 8 --steps 2 --eval-every 2 --eval-batches 2 --threads 2
    --quiet)
  code=$( (ulimit -v $((1300 * 1024)); "$train" "${wide[@]}" --save limited.st >/dev/null 2>err; echo $?) )
  check "ulimit -v 1300 MiB: refused at once (exit $code)" test "$code" -eq 2
  check "... counting the threads' reserved memory ($(cut -c1-200 err))" grep -q "reserved by 2 threads" err
  check "... nothing written" test ! -e limited.st
  code=$( (ulimit -v $((1700 * 1024)); "$train" "${wide[@]}" --save limited.st >/dev/null 2>err; echo $?) )
  check "ulimit -v 1700 MiB: trains and saves (exit $code: $(cut -c1-200 err))" test "$code" -eq 0 -a -s limited.st
fi

finish
