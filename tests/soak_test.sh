#!/usr/bin/env bash
# A long run that survives anything: the lm recipe trained to --steps while SIGKILL,
# SIGTERM and SIGINT arrive at random moments every few seconds, each followed by
# --resume. At the end the metrics and the weights must be bitwise those of a run that
# was never interrupted (same seed), nothing may be left beside the outputs, and the
# uninterrupted run's resident memory must stay flat (at its last evaluation within 5% of
# the one a tenth of the way in: no leak).
#   usage: soak_test.sh XGRAD_TRAIN TEXT [STEPS [SECONDS_BETWEEN_SIGNALS]]
#   CI runs 600 steps, a signal every 1-2 s; the long run is 20000 steps, every 2-6 s.
set -u
train=$1 text=$2 steps=${3:-600} every=${4:-2}
source "$(dirname "$0")/lib.sh"  # check, finish, timeless, same_checkpoint, $work
cd "$work"
eval_every=$((steps >= 100 ? steps / 100 : 1))  # each evaluation saves a checkpoint
recipe=(--task lm --text "$text" --steps "$steps" --eval-every "$eval_every" --eval-batches 4 --sample-every 0
        --seed 3 --threads 2)

# Resident memory of process $1, in KiB.
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null; }

# The uninterrupted run; its memory is read as it prints each evaluation.
early_step=$((steps / 10 / eval_every * eval_every))
[ "$early_step" -ge "$eval_every" ] || early_step=$eval_every
mkfifo progress
stdbuf -oL "$train" "${recipe[@]}" --save whole.st --metrics whole.jsonl >progress 2>whole.err &  # a line per evaluation
pid=$!
early_rss="" late_rss="" late_step=""
while read -r line; do
  case "$line" in
    "step "*/*) ;;
    *) continue ;;
  esac
  step=${line#step }
  step=${step%%/*}
  now=$(rss $pid)
  [ -n "$now" ] || continue  # the run had ended
  [ "$step" -eq "$early_step" ] && early_rss=$now
  [ "$step" -gt "$early_step" ] && late_rss=$now late_step=$step
done <progress
wait $pid
check "the uninterrupted run ends (exit $?)" test -s whole.st

# The interrupted one.
RANDOM=11  # repeatable "random" moments and signals
signals=(KILL TERM INT)
starts=0 sent=0
declare -A by_signal=([KILL]=0 [TERM]=0 [INT]=0)
while :; do
  if [ -f soak.st ]; then args=(--resume soak.st --threads 2); else args=("${recipe[@]}"); fi
  "$train" "${args[@]}" --save soak.st --metrics soak.jsonl >soak.out 2>soak.err &
  pid=$!
  starts=$((starts + 1))
  # A moment in [every/2, every * 3/2) seconds, in tenths.
  sleep "$(awk -v t=$((every * 5 + RANDOM % (every * 10))) 'BEGIN {print t / 10}')"
  signal=${signals[RANDOM % 3]}
  if kill -0 $pid 2>/dev/null && kill -"$signal" $pid 2>/dev/null; then
    sent=$((sent + 1))
    by_signal[$signal]=$((by_signal[$signal] + 1))
  fi
  wait $pid 2>/dev/null
  code=$?
  [ "$code" -eq 0 ] && break
  if [ "$code" -ne 137 ] && [ "$code" -ne 143 ] && [ "$code" -ne 130 ]; then
    check "an interrupted run ends by its signal, not with exit $code ($(cat soak.err))" false
    break
  fi
  [ "$starts" -lt $((steps / 5)) ] || { check "the run finishes" false; break; }
done

check "signals were sent: ${by_signal[KILL]} SIGKILL, ${by_signal[TERM]} SIGTERM, ${by_signal[INT]} SIGINT" \
  test "${by_signal[KILL]}" -ge 1 -a "${by_signal[TERM]}" -ge 1 -a "${by_signal[INT]}" -ge 1
check "the metrics are bitwise the uninterrupted run's (timings aside)" \
  test "$(timeless soak.jsonl)" = "$(timeless whole.jsonl)"
check "the weights and optimizer state are bitwise the uninterrupted run's" same_checkpoint whole.st soak.st --tensors
left=$(ls -A | grep -v -x -e progress -e whole.st -e whole.jsonl -e whole.err -e soak.st -e soak.jsonl -e soak.out \
  -e soak.err || true)
check "nothing is left beside the outputs${left:+: $left}" test -z "$left"
growth=$(awk -v a="${early_rss:-0}" -v b="${late_rss:-0}" 'BEGIN {if (a > 0) printf "%.1f", (b - a) * 100 / a}')
check "resident memory was read at steps $early_step and ${late_step:-?} (${early_rss:-?} and ${late_rss:-?} KiB)" \
  test -n "$early_rss" -a -n "$late_rss"
if [ "$steps" -ge 10000 ]; then
  check "resident memory is flat: ${growth}% from step $early_step to $late_step (at most 5%)" \
    awk -v g="$growth" 'BEGIN {exit !(g <= 5)}'
fi
echo "soak: $steps steps, $starts starts, $sent signals (${by_signal[KILL]} KILL, ${by_signal[TERM]} TERM," \
  "${by_signal[INT]} INT); resident memory $early_rss KiB at step $early_step, $late_rss KiB at step $late_step" \
  "(${growth}%); $(timeless whole.jsonl | tail -n 1)"
finish
