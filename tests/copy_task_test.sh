#!/usr/bin/env bash
# xgrad-copy-task end to end: nn::Transformer learns the Annotated Transformer's copy
# task and decodes it greedily, pre-LN and post-LN; bad flags are refused.
#   copy_task_test.sh XGRAD_COPY_TASK
set -uo pipefail
copy_task=$1
source "$(dirname "$0")/lib.sh"
cd "$work"
run() {
  timeout 300 "$copy_task" "$@" >out 2>err
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

refused "--heads not dividing --d-model" "must divide --d-model" --heads 3
refused "a fractional epoch count" "not a whole number" --epochs 1.5
refused "--seq-len 1" "--seq-len >= 2" --seq-len 1
refused "an unknown flag" "--bogus" --bogus
finish
