#!/usr/bin/env bash
# Crash safety: kill xgrad-train --save with SIGKILL at random moments, several times.
# Each time the checkpoint on disk must load, and resuming until the end must give the
# same final metrics as a run that was never killed. Then: the finished run resumed
# changes nothing, an output over the checkpoint is refused, SIGTERM saves like SIGINT.   usage: crash_test.sh XGRAD_TRAIN
set -u
train=$1
source "$(dirname "$0")/lib.sh"
# Checkpoints every 10 steps: plenty of writes for a kill to land in.
common=(--task copy --seq-len 6 --vocab 8 --d-model 32 --heads 2 --steps 1500 --eval-every 10
        --eval-size 100 --target-exact 2 --quiet --seed 5 --threads 1)
"$train" "${common[@]}" --metrics "$work/whole.jsonl" >/dev/null

RANDOM=7  # repeatable "random" moments
kills=0
for attempt in 1 2 3 4 5; do
  args=("${common[@]}")
  [ -f "$work/run.ckpt" ] && args=(--resume "$work/run.ckpt" --quiet --threads 1)
  "$train" "${args[@]}" --save "$work/run.ckpt" --metrics "$work/killed.jsonl" >/dev/null 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))"
  if kill -KILL "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
  wait "$pid" 2>/dev/null
  if [ -f "$work/run.ckpt" ]; then
    "$train" --resume "$work/run.ckpt" --steps 1 --quiet --threads 1 >/dev/null 2>&1
    check "checkpoint loads after kill $attempt" test $? -eq 0
  fi
done
check "the run was killed several times" test "$kills" -ge 3
# Finish the run from wherever the last checkpoint left it.
if [ -f "$work/run.ckpt" ]; then args=(--resume "$work/run.ckpt" --quiet --threads 1); else args=("${common[@]}"); fi
"$train" "${args[@]}" --save "$work/run.ckpt" --metrics "$work/killed.jsonl" >/dev/null
last_eval() { timeless "$1" | grep '"step": 1500,' | tail -n 1; }
check "the final metrics match an uninterrupted run" test "$(last_eval "$work/whole.jsonl")" = "$(last_eval "$work/killed.jsonl")"
check "there is a final evaluation" test -n "$(last_eval "$work/whole.jsonl")"
# The finished run resumed changes nothing; an output over the checkpoint is refused.
before=$(md5sum <"$work/run.ckpt")
metrics_before=$(md5sum <"$work/killed.jsonl")
"$train" --resume "$work/run.ckpt" --save "$work/run.ckpt" --metrics "$work/killed.jsonl" --quiet >/dev/null
check "resuming the finished run exits 0" test $? -eq 0
check "resuming the finished run changes nothing" test "$(md5sum <"$work/run.ckpt")" = "$before" -a \
  "$(md5sum <"$work/killed.jsonl")" = "$metrics_before"
"$train" --resume "$work/run.ckpt" --steps 3000 --metrics "$work/run.ckpt" --quiet >/dev/null 2>&1
check "an output over the checkpoint is refused" test $? -eq 2
check "and the checkpoint is intact" test "$(md5sum <"$work/run.ckpt")" = "$before"
# SIGTERM saves like SIGINT.
"$train" --task copy --seq-len 6 --vocab 8 --d-model 32 --heads 2 --steps 1000000 --eval-every 100 --eval-size 100 --target-exact 2 --threads 1 --save "$work/term.ckpt" >"$work/term.out" 2>&1 &
pid=$!
sleep 2
kill -TERM "$pid"
wait "$pid"
check "SIGTERM exits 143" test $? -eq 143
check "SIGTERM saved" grep -q "checkpoint saved" "$work/term.out"
"$train" --resume "$work/term.ckpt" --steps 1 --quiet --threads 1 >/dev/null 2>&1
check "the SIGTERM checkpoint loads" test $? -eq 0
echo "killed $kills times; $(last_eval "$work/whole.jsonl")"
finish
