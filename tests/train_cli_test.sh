#!/usr/bin/env bash
# End-to-end tests of xgrad-train: learning a task, resume equivalence, Ctrl-C, and the
# one-line errors with exit code 2 for bad flags; files never destroyed; xgrad-bench's
# flags (when given).   usage: train_cli_test.sh XGRAD_TRAIN [XGRAD_BENCH]
set -u
train=$1 bench=${2:-}
source "$(dirname "$0")/lib.sh"
exit_code() { "$@" >"$work/out" 2>"$work/err"; echo $?; }

# Learns reverse on 8 tokens to exact-match >= 0.99.
"$train" --task reverse --seq-len 8 --steps 2000 --eval-every 50 --eval-size 500 --quiet \
  --metrics "$work/reverse.jsonl" >"$work/reverse.out"
check "reverse reaches 0.99" grep -q '"reached_target": true' "$work/reverse.jsonl"
tail -n 2 "$work/reverse.jsonl"

# A run stopped at step 40 and resumed gives the same metrics as one never stopped.
common=(--task copy --seq-len 6 --vocab 8 --d-model 32 --heads 2 --dropout 0.1 --eval-every 20
        --eval-size 200 --target-exact 2 --quiet --seed 3)
"$train" "${common[@]}" --steps 60 --metrics "$work/whole.jsonl" --save "$work/whole.ckpt" >/dev/null
"$train" "${common[@]}" --steps 40 --metrics "$work/parts.jsonl" --save "$work/part.ckpt" >/dev/null
cp "$work/parts.jsonl" "$work/old.jsonl"  # for the older checkpoint's resume below
"$train" --resume "$work/part.ckpt" --steps 60 --metrics "$work/parts.jsonl" --quiet >/dev/null
evaluations() { timeless "$1" | grep '"step"' | grep -v final; }
check "three evaluations" test "$(evaluations "$work/whole.jsonl" | wc -l)" -eq 3
check "resume gives identical metrics" diff <(evaluations "$work/whole.jsonl") <(evaluations "$work/parts.jsonl")
check "resume keeps the run settings" grep -q '"reached_target": false' <(tail -n 1 "$work/parts.jsonl")
# Checkpoints written before optimizers saved every group's settings hold only the rates
# ("optimizer.lr", "optimizer.group.<g>.lr"); they resume the same.
/usr/bin/python3 - "$(dirname "$0")/reference" "$work/part.ckpt" "$work/old.ckpt" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import safetensors_numpy
arrays, metadata = safetensors_numpy.read(sys.argv[2])
old = {k: v for k, v in arrays.items() if not k.startswith("optimizer.group.") or k.endswith(".lr")}
old["optimizer.lr"] = old.pop("optimizer.group.0.lr")
safetensors_numpy.write(sys.argv[3], old, metadata)
PY
"$train" --resume "$work/old.ckpt" --steps 60 --metrics "$work/old.jsonl" --quiet >/dev/null
check "an older checkpoint resumes identically" diff <(evaluations "$work/whole.jsonl") <(evaluations "$work/old.jsonl")
"$train" "${common[@]}" --steps 60 --metrics "$work/again.jsonl" >/dev/null
check "a run is deterministic" diff <(evaluations "$work/whole.jsonl") <(evaluations "$work/again.jsonl")

# Ctrl-C in the middle of an evaluation, or between two, then --resume: the metrics of
# the run never stopped (the evaluation cut short runs again first; the training losses
# since the last evaluation, whose mean is train_loss, are kept in the checkpoint).
slow_eval=(--task sort --seq-len 6 --vocab 8 --d-model 32 --heads 2 --target-exact 2 --threads 1 --seed 4)
"$train" "${slow_eval[@]}" --steps 60 --eval-every 20 --eval-size 100000 --quiet --metrics "$work/calm.jsonl" \
  >/dev/null
began=$(date +%s%N)
"$train" "${slow_eval[@]}" --steps 60 --eval-every 20 --eval-size 100000 --metrics "$work/cut.jsonl" --save "$work/cut.ckpt" \
  >"$work/cut.out" &
for _ in $(seq 600); do [ -s "$work/cut.jsonl" ] && break; sleep 0.05; done  # the evaluation at step 20 is done
# Inside the one at step 40 on a machine of any speed: start-up, 20 steps and an evaluation
# took T; 20 steps are a small part of it, so half of T later the next evaluation is on.
sleep "$(( ($(date +%s%N) - began) / 2000000 ))e-3"
kill -INT $!
wait
check "the signal came during the evaluation at step 40" grep -q "interrupted at step 40;" "$work/cut.out"
"$train" --resume "$work/cut.ckpt" --quiet --metrics "$work/cut.jsonl" >/dev/null
check "an evaluation cut short runs again on resume" diff <(evaluations "$work/calm.jsonl") \
  <(evaluations "$work/cut.jsonl")
"$train" "${slow_eval[@]}" --steps 3000 --eval-every 500 --quiet --metrics "$work/calm.jsonl" >/dev/null
# New files, so that the wait below sees this run's first evaluation: a signal sent
# before the shell's child has become the trainer would end the child as the shell,
# running this script's exit trap (the scratch folder removed under the test).
"$train" "${slow_eval[@]}" --steps 3000 --eval-every 500 --metrics "$work/cut2.jsonl" --save "$work/cut2.ckpt" \
  >"$work/cut2.out" &
for _ in $(seq 200); do [ -s "$work/cut2.jsonl" ] && break; sleep 0.05; done  # the evaluation at step 500 is done
kill -INT $!
wait
check "the signal came between evaluations" grep -q "interrupted at step" "$work/cut2.out"
"$train" --resume "$work/cut2.ckpt" --quiet --metrics "$work/cut2.jsonl" >/dev/null
check "Ctrl-C between evaluations keeps train_loss exact" diff <(evaluations "$work/calm.jsonl") \
  <(evaluations "$work/cut2.jsonl")

# Ctrl-C with --save keeps a checkpoint that resumes.
"$train" --task sort --seq-len 6 --steps 1000000 --eval-every 1000000 --save "$work/int.ckpt" --quiet >"$work/int.out" &
pid=$!
sleep 3
kill -INT $pid
wait $pid
check "Ctrl-C exits with 130" test $? -eq 130
check "Ctrl-C saved a checkpoint" grep -q "checkpoint saved" "$work/int.out"
check "the interrupted checkpoint resumes" test "$(exit_code "$train" --resume "$work/int.ckpt" --steps 1 --quiet)" -eq 0 -o \
  "$(exit_code "$train" --resume "$work/int.ckpt" --steps 1000000 --eval-every 1 --target-exact 0 --quiet)" -eq 0

# Bad flags: one line on stderr, exit code 2.
bad() {  # bad NAME EXPECTED-TEXT ARGS...
  local name=$1 text=$2; shift 2
  local code; code=$(exit_code "$train" "$@")
  check "$name exits 2" test "$code" -eq 2
  check "$name says '$text'" grep -q -- "$text" "$work/err"
  check "$name is one line" test "$(wc -l <"$work/err")" -eq 1
}
bad "unknown task" "task" --task juggle
bad "--save where no file can be made" "--save /proc/xgrad-test.st: cannot" --steps 2 --save /proc/xgrad-test.st
printf 'In the beginning God created the heaven and the earth. %.0s' {1..40} >"$work/short.txt"
bad "evaluation windows larger than memory" "for the evaluation windows (--eval-batches 200000000 of each split)" \
  --task lm --text "$work/short.txt" --d-model 16 --heads 2 --layers 1 --seq-len 16 --batch 2 --steps 3 \
  --eval-batches 200000000
bad "heads not dividing" "does not divide" --d-model 30 --heads 4
bad "seq-len 0" "seq-len" --seq-len 0
bad "missing resume file" "no such file" --resume "$work/nothing.ckpt"
bad "another config" "another config" --resume "$work/whole.ckpt" --d-model 64
bad "a foreign file" "resume" --resume "$work/whole.jsonl"
bad "unknown flag" "juggle" --juggle
bad "dropout out of range" "dropout" --dropout 1.5

# No output destroys a file: none names an input (the resumed or --init-from checkpoint,
# directly or through a hard or symbolic link) or another output, --plot like the rest,
# all found before training; an existing --save file is replaced only when it is a
# checkpoint of the same task (or empty).
tiny=(--task reverse --seq-len 4 --eval-every 2 --eval-size 8 --d-model 16 --layers 1 --heads 2 --batch 4 --quiet
      --threads 1)
"$train" "${tiny[@]}" --steps 2 --save "$work/tiny.st" >/dev/null
cp "$work/tiny.st" "$work/base.st"
cp "$work/tiny.st" "$work/base-original.st"
ln "$work/base.st" "$work/base-hard.st"
ln -s base.st "$work/base-link.st"
bad "--plot over the resumed checkpoint" "checkpoint being resumed" --resume "$work/base.st" --steps 4 --plot \
  "$work/base-link.st"
for flag in --save --metrics --plot --attention-png; do
  bad "$flag over the --init-from checkpoint" "is the checkpoint the run starts from" --init-from "$work/base.st" \
    --steps 2 --quiet "$flag" "$work/base-hard.st"
done
bad "--eval-only --metrics over the --init-from checkpoint" "is the checkpoint the run starts from" \
  --init-from "$work/base.st" --eval-only --metrics "$work/base-link.st"
bad "--plot and --save on one file" "same file" "${tiny[@]}" --steps 2 --save "$work/o.st" --plot "$work/o.st"
bad "--plot and --metrics on one file" "same file" "${tiny[@]}" --steps 2 --metrics "$work/o" --plot "$work/o"
bad "--plot in a missing folder, before training" "cannot write in" "${tiny[@]}" --steps 2 --plot "$work/no/p.png"
bad "a --save name too long for the file system" "file name is 303 bytes long" "${tiny[@]}" --steps 2 \
  --save "$work/$(printf 'c%.0s' $(seq 300)).st"
printf 'notes\n' >"$work/notes.txt"
bad "--save over a text" "not a checkpoint of xgrad-train" "${tiny[@]}" --steps 2 --save "$work/notes.txt"
check "the text is untouched" test "$(cat "$work/notes.txt")" = notes
"$train" --task sort --seq-len 4 --d-model 16 --layers 1 --heads 2 --batch 4 --eval-size 8 --steps 1 --quiet \
  --save "$work/sort.st" >/dev/null
cp "$work/sort.st" "$work/sort-original.st"
bad "--save over another task's checkpoint" "holds a checkpoint of --task sort" "${tiny[@]}" --steps 2 \
  --save "$work/sort.st"
check "which is untouched" cmp -s "$work/sort.st" "$work/sort-original.st"
check "--save over a checkpoint of the same task starts again" \
  test "$(exit_code "$train" "${tiny[@]}" --steps 2 --save "$work/tiny.st")" -eq 0
: >"$work/empty.st"
check "--save over an empty file" test "$(exit_code "$train" "${tiny[@]}" --steps 2 --save "$work/empty.st")" -eq 0
# --metrics, --plot and --attention-png write over (or add to) only what they write.
for flag in --metrics --plot --attention-png; do
  bad "$flag over a text" "not a" "${tiny[@]}" --steps 2 "$flag" "$work/notes.txt"
done
bad "--metrics of a resumed run into a text" "not a metrics file" --resume "$work/base.st" --steps 4 \
  --metrics "$work/notes.txt"
bad "--plot over a checkpoint" "not a PNG" "${tiny[@]}" --steps 2 --plot "$work/sort.st"
# A resumed run's metrics file must hold its own lines up to its checkpoint: another run's
# there (the same steps, other losses) are refused, the file left as it was ...
sed -E 's/"val_loss": [0-9.]+/"val_loss": 9.5/' "$work/whole.jsonl" >"$work/foreign.jsonl"
cp "$work/foreign.jsonl" "$work/foreign-before.jsonl"
bad "--metrics of a resumed run holding another run's lines" \
  "foreign.jsonl: its line at step 20 is not this run's evaluation there" \
  --resume "$work/part.ckpt" --steps 60 --metrics "$work/foreign.jsonl"
check "... and left as it was" cmp "$work/foreign.jsonl" "$work/foreign-before.jsonl"
# Evaluations the file lacks (--metrics left out of one resume) are no other run's: it goes on.
partway=(--task copy --seq-len 6 --vocab 8 --d-model 32 --heads 2 --seed 3 --eval-every 10 --threads 1
  --target-exact 2 --quiet)
"$train" "${partway[@]}" --steps 20 --metrics "$work/partway.jsonl" --save "$work/partway.st" >/dev/null
"$train" --resume "$work/partway.st" --steps 40 --save "$work/partway.st" --quiet >/dev/null
code=$(exit_code "$train" --resume "$work/partway.st" --steps 50 --metrics "$work/partway.jsonl" --quiet)
check "a resume with --metrics after one without goes on ($code: $(head -c 200 "$work/err"))" test "$code" -eq 0
# ... but a run stopped before its first evaluation had written none: resumed, it replaces
# the other run's lines, as it would have at that evaluation.
"$train" --task copy --seq-len 6 --vocab 8 --d-model 32 --heads 2 --seed 3 --steps 1000000 --eval-every 1000000 \
  --metrics "$work/foreign.jsonl" --save "$work/first.ckpt" >"$work/first.out" &
pid=$!
sleep 2
kill -INT $pid
wait $pid
stopped=$(grep -o "interrupted at step [0-9]*" "$work/first.out" | grep -o "[0-9]*$")
check "a run stopped before its first evaluation (at step ${stopped:-?})" test -n "$stopped"
check "... leaves the other run's metrics file alone" cmp "$work/foreign.jsonl" "$work/foreign-before.jsonl"
check "... resumes with them" test "$(exit_code "$train" --resume "$work/first.ckpt" --steps $((${stopped:-0} + 1)) \
  --metrics "$work/foreign.jsonl" --quiet)" -eq 0
check "... and they are gone: its one evaluation and summary remain ($(head -c 300 "$work/foreign.jsonl"))" \
  test "$(grep -c '"step"' "$work/foreign.jsonl")" -eq 1 -a "$(grep -c '"final"' "$work/foreign.jsonl")" -eq 1
check "the text is untouched by them" test "$(cat "$work/notes.txt")" = notes
"$train" "${tiny[@]}" --steps 2 --metrics "$work/rerun.jsonl" --plot "$work/rerun.png" >/dev/null
check "a run started again writes over its own metrics and plot" \
  test "$(exit_code "$train" "${tiny[@]}" --steps 4 --metrics "$work/rerun.jsonl" --plot "$work/rerun.png")" -eq 0
check "the metrics are the new run's" grep -q '"steps": 4' "$work/rerun.jsonl"
check "the checkpoint is untouched by every refusal" cmp -s "$work/base.st" "$work/base-original.st"

# --eval-only prints what it measured (a toy task's train loss is that of the steps
# since the last evaluation: none here) and writes nothing but --metrics.
code=$(exit_code "$train" --resume "$work/base.st" --eval-only)
check "--eval-only exits 0 (got $code)" test "$code" -eq 0
check "--eval-only prints no unmeasured train loss" test -z "$(grep -i -e nan -e 'train loss' "$work/out")"
for flag in --save --plot --attention-png; do
  bad "--eval-only with $flag" "$flag is not used by --eval-only" --resume "$work/base.st" --eval-only "$flag" \
    "$work/x"
done
# ... and takes no flag that only shapes training steps.
for given in "--accum-steps 2" "--eval-every 5" "--target-exact 0.5" "--target-val-loss 1" "--clip 1"; do
  for start in --resume --init-from; do
    [ "$start $given" = "--resume --clip 1" ] && continue  # another learning setting than the checkpoint's: refused so
    # shellcheck disable=SC2086  # a flag and its value
    bad "$start --eval-only with $given" "${given% *} is not used by --eval-only (it trains no steps)" \
      "$start" "$work/base.st" --eval-only $given
  done
done
# Weights that are not numbers are refused, naming the tensor.
forge "$work/base.st" "$work/nan.st" nan=head.weight
bad "NaN weights resumed" "head.weight holds NaN" --resume "$work/nan.st" --eval-only
bad "NaN weights fine-tuned" "head.weight holds NaN" --init-from "$work/nan.st" --steps 2

# Flags that do nothing with the options chosen; decimal numbers read as strictly as whole ones.
bad "--beta2 with sgd" "--beta2 is not used by --optimizer sgd" "${tiny[@]}" --steps 2 --optimizer sgd --beta2 0.5
bad "--warmup with a constant rate" "--warmup is not used by --schedule constant" "${tiny[@]}" --steps 2 --warmup 1
bad "--warmup with --schedule step" "--warmup is not used by --schedule step" "${tiny[@]}" --steps 2 \
  --schedule step --warmup 1
bad "a negative --target-exact" "--target-exact cannot be negative" "${tiny[@]}" --steps 2 --target-exact -1
for value in "" 0x10 " 1"; do
  bad "--target-exact '$value'" "--target-exact: '$value' is not a decimal number" "${tiny[@]}" --steps 2 \
    --target-exact "$value"
  bad "--clip '$value'" "--clip: '$value' is not a decimal number" "${tiny[@]}" --steps 2 --clip "$value"
done
bad "another config, in short numbers" "--lr 0.1 here, 0.003 in the checkpoint" --resume "$work/base.st" --lr 0.1
code=$("$train" "${tiny[@]}" --steps 2 >/dev/full 2>"$work/err"; echo $?)
check "stdout to a full disk exits 2 (got $code) with one line" test "$code" -eq 2 -a "$(wc -l <"$work/err")" -eq 1
# A checkpoint past the file-size limit (ulimit -f; SIGXFSZ ignored, the write told EFBIG):
# one line, exit 2, no checkpoint and no temporary left.
mkdir -p "$work/limited"
code=$( (ulimit -f 1; "$train" "${tiny[@]}" --steps 2 --save "$work/limited/run.st" >/dev/null 2>"$work/err"; echo $?) )
check "a checkpoint past ulimit -f exits 2 (got $code) with one line" test "$code" -eq 2 -a "$(wc -l <"$work/err")" -eq 1
check "... naming the file" grep -q -- "limited/run.st" "$work/err"
check "... leaving nothing in its folder" test -z "$(ls -A "$work/limited")"
# Metrics past it (ulimit -f 0; what is said goes through a pipe, which no limit stops):
# the run's line names --metrics, and the file it would have begun is not left empty.
said=$( (ulimit -f 0; "$train" "${tiny[@]}" --steps 2 --metrics "$work/limited/m.jsonl" 2>&1 >/dev/null; echo "exit $?") )
check "metrics past ulimit -f exit 2 ($said)" grep -q "exit 2" <<<"$said"
check "... naming the file" grep -q -- "--metrics $work/limited/m.jsonl: writing failed" <<<"$said"
check "... leaving nothing in its folder" test -z "$(ls -A "$work/limited")"

# xgrad-bench: a bad flag is one line and exit code 2; whole numbers are decimal.
if [ -n "$bench" ]; then
  for args in "--threads 0" "--threads -1" "--threads 1000" "--threads abc" "--config foo" "--config" "--bogus" \
    "--steps -1" "--config sgemm --steps 2147483647" "--warmup -5" "--steps 0x10" "--config gpt2 --batch 2147483647" "--config gpt2 --batch 4096" \
    "--config gpt2 --seq-len 1025" "--config encoder-124m --seq-len 2147483647"; do
    # shellcheck disable=SC2086
    code=$(exit_code "$bench" $args)
    check "xgrad-bench $args exits 2 (got $code)" test "$code" -eq 2
    check "xgrad-bench $args says why in one line" test "$(wc -l <"$work/err")" -eq 1
  done
  exit_code "$bench" --config sgemm --steps 2147483647 >/dev/null
  check "xgrad-bench --steps past 10^6 names its bound" grep -q -- "--steps must be at most 1000000" "$work/err"
  "$bench" --config overhead --steps 010 --threads 1 >"$work/out"
  check "xgrad-bench --steps 010 is ten" grep -q '"steps": 10,' "$work/out"
  code=$("$bench" --config overhead --steps 1 --threads 1 >/dev/full 2>"$work/err"; echo $?)
  check "xgrad-bench to a full disk exits 2 (got $code)" test "$code" -eq 2
  check "and says so in one line" test "$(wc -l <"$work/err")" -eq 1 -a -n "$(grep 'standard output' "$work/err")"
fi

check "--version exits 0" test "$(exit_code "$train" --version)" -eq 0
check "--version names the version" grep -q "xgrad-train [0-9]*\.[0-9]*\.[0-9]*" "$work/out"
check "--help exits 0" test "$(exit_code "$train" --help)" -eq 0
check "--help shows defaults" grep -q "sort" "$work/out"

finish
