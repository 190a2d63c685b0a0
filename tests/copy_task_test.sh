#!/usr/bin/env bash
# xgrad-copy-task end to end: nn::Transformer learns the Annotated Transformer's copy
# task and decodes it greedily, pre-LN and post-LN; bad flags are refused.
#   copy_task_test.sh XGRAD_COPY_TASK
set -uo pipefail
copy_task=$1
source "$(dirname "$0")/lib.sh"
cd "$work"
run() {
  timeout "${limit:-300}" "$copy_task" "$@" >out 2>err
  echo $?
}

code=$(run --require-accuracy 0.9)
check "the default run copies 90% of held-out sequences exactly (exit $code; $(tail -3 out | head -1))" test "$code" -eq 0
check "20 epochs are reported" test "$(grep -c '^epoch ' out)" -eq 20
source_line=$(sed -n 's/^source: *//p' out)
check "the counting example decodes to itself ($(sed -n 's/^decoded: *//p' out))" \
  test "$(sed -n 's/^decoded: *//p' out)" = "$source_line"
code=$(run --post-ln --epochs 12 --require-accuracy 0.5)
check "post-LN learns too (exit $code; $(tail -3 out | head -1))" test "$code" -eq 0
code=$(run --epochs 1 --require-accuracy 1)
check "an accuracy below --require-accuracy exits 1 (got $code)" test "$code" -eq 1
check "and says so" grep -q "below --require-accuracy" err
# A requirement a hair above the accuracy is written in full, never rounded to equal it.
code=$(run --epochs 1 --steps-per-epoch 1 --require-accuracy 1e-320)
check "an untrained model below --require-accuracy 1e-320 exits 1 (got $code)" test "$code" -eq 1
check "and says 0 is below 1e-320" grep -q "copy accuracy 0 (0 of [0-9]* held-out sequences) is below --require-accuracy 1e-320" err

refused "--heads not dividing --d-model" "must divide --d-model" --heads 3
refused "a fractional epoch count" "not a whole number" --epochs 1.5
refused "--seq-len 1" "--seq-len must be at least 2" --seq-len 1
refused "an unknown flag" "--bogus" --bogus
for flag in --epochs --steps-per-epoch --layers --ff --d-model; do
  refused "$flag 0" "$flag must be at least 1" "$flag" 0
done
for value in nan 1.5 -0.1; do
  refused "--require-accuracy $value" "--require-accuracy must lie in \[0, 1\]" --require-accuracy "$value"
done
refused "--dropout nan" "--dropout must lie in" --dropout nan
refused "--label-smoothing ''" "is not a decimal number" --label-smoothing ""
# Sizes beyond the machine: refused at once, naming the flag (not a hang, not bad_alloc).
for flag in --layers --seq-len --batch --eval-sequences; do
  limit=20 refused "$flag 99999999999" "GiB of memory" "$flag" 99999999999
  check "$flag 99999999999 names the flag" grep -q -- "$flag 99999999999" err
done
code=$("$copy_task" --epochs 1 --steps-per-epoch 1 --eval-sequences 4 --batch 4 --d-model 16 --heads 2 --ff 32 \
  --seq-len 5 >/dev/full 2>err; echo $?)
check "stdout to a full disk exits 2 (got $code)" test "$code" -eq 2
check "and says so in one line" test "$(wc -l <err)" -eq 1 -a -n "$(grep 'standard output' err)"
finish
