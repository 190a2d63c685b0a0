#!/usr/bin/env bash
# --profile end to end: xgrad-train on the lm recipe and xgrad-bench write the trace (a
# Chrome trace: JSON whose begins and ends pair up, thread by thread) and the timeline
# (a PNG), and print the table; the profiled steps give the same metrics as unprofiled
# ones; bad paths, and files --profile must not replace, are one line and exit 2 before
# any training.
#   usage: profile_test.sh XGRAD_TRAIN XGRAD_BENCH KJV_TEXT
set -u
train=$1 bench=$2 text=$3
source "$(dirname "$0")/lib.sh"
cd "$work"
run() { timeout 300 "$@" >out 2>err; echo $?; }
# A trace as Chrome and Perfetto read it: every begin ended on its thread, in time order;
# and the ops named after the file are in it.
valid_trace() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
open_, last, names = {}, {}, set()
for e in events:
    if e["ph"] == "M":
        continue
    tid, ts = e["tid"], e["ts"]
    assert ts >= last.get(tid, 0), f"time goes back on thread {tid}"
    last[tid] = ts
    if e["ph"] == "B":
        open_.setdefault(tid, []).append(e["name"]); names.add(e["name"])
    else:
        assert e["ph"] == "E" and open_.get(tid), f"an end without a begin on thread {tid}"
        open_[tid].pop()
assert not any(open_.values()), "events left open"
for op in sys.argv[2:]:
    assert op in names, f"no {op} in the trace"
PY
}
is_png() { test "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a; }

lm=(--task lm --text "$text" --steps 12 --eval-every 6 --seed 3)
code=$(run "$train" "${lm[@]}" --metrics plain.jsonl --quiet)
check "the unprofiled run ends (exit $code)" test "$code" -eq 0
code=$(run "$train" "${lm[@]}" --metrics profiled.jsonl --profile lm --profile-steps 2 --quiet)
check "the profiled run ends (exit $code)" test "$code" -eq 0
[ "$code" -eq 0 ] || cat out err
check "it prints the table" grep -q "share" out
check "the table names the lm's ops" grep -q "scaled_dot_product_attention" out
check "it says how many steps it profiled" grep -q "profile of 2 steps (from step 4)" out
check "the trace is a valid Chrome trace of the step" valid_trace lm.json linear linear_gelu layer_norm \
  scaled_dot_product_attention cross_entropy "optimizer step"
check "the timeline is a PNG" is_png lm.png
check "profiling changes no metric" diff <(timeless plain.jsonl) <(timeless profiled.jsonl)
code=$(run "$train" "${lm[@]}" --profile lm --profile-steps 1 --quiet)
check "a second profile replaces the first's files (exit $code)" grep -q "profile of 1 step " out

# An evaluation ends the recording early (step 6 here: steps 4 to 6, not 4 to 8).
code=$(run "$train" "${lm[@]}" --profile early --profile-steps 5)
check "a profile up to an evaluation (exit $code)" grep -q "profile of 3 steps (from step 4)" out

code=$(run "$bench" --config tiny --steps 3 --profile tiny)
check "xgrad-bench --profile ends (exit $code)" test "$code" -eq 0
check "xgrad-bench keeps one JSON line on stdout" test "$(wc -l <out)" -eq 1
check "xgrad-bench prints the table on stderr" grep -q "share" err
check "xgrad-bench's trace is valid" valid_trace tiny.json linear_relu layer_norm scaled_dot_product_attention \
  cross_entropy "optimizer step"
check "xgrad-bench's timeline is a PNG" is_png tiny.png
code=$(run "$bench" --config tiny --steps 3 --profile tiny --profile-steps 2)
check "xgrad-bench replaces its own profile (exit $code)" grep -q "profile of 2 steps" err

# Refused before any step, in one line, naming the flag.
mkdir folder.json
refused "a folder where the trace goes" "is a folder" "$train" "${lm[@]}" --profile folder
refused "a missing folder" "cannot write in" "$train" "${lm[@]}" --profile missing/run
echo "my notes" >notes.png
refused "a file that is not a PNG" "is not a PNG" "$train" "${lm[@]}" --profile notes
echo "my notes" >notes2.json
refused "a file that is not a trace" "is not a trace" "$train" "${lm[@]}" --profile notes2
refused "--profile beside --plot on one file" "are the same file" "$train" "${lm[@]}" --profile same --plot same.png
refused "--profile-steps 0" "--profile-steps must be at least 1" "$train" "${lm[@]}" --profile p --profile-steps 0
refused "--profile-steps without --profile" "give --profile PATH too" "$train" "${lm[@]}" --profile-steps 2
refused "an empty --profile" "--profile needs a file name" "$train" "${lm[@]}" --profile ""
refused "xgrad-bench into a missing folder" "cannot write in" "$bench" --config tiny --profile missing/run
for config in sgemm optimizers overhead; do
  refused "xgrad-bench --profile of $config" "--profile is not used by --config $config" "$bench" --config $config \
    --profile s
  refused "xgrad-bench --warmup of $config" "--warmup is not used by --config $config" "$bench" --config $config \
    --warmup 1
done
for config in optimizers overhead; do
  refused "xgrad-bench --precision of $config" "--precision is not used by --config $config" "$bench" --config $config \
    --precision bf16
done
# Under mpirun every rank would time its own copy on the same cores: only allreduce runs there.
for config in tiny sgemm optimizers; do
  code=$(ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 \
    "$bench" --config $config --steps 1 >out 2>err; echo $?)
  check "xgrad-bench --config $config under mpirun -np 2 is refused (exit $code)" test "$code" -ne 0
  check "... saying it runs alone ($(head -c 200 err))" grep -q "^xgrad-bench: --config $config runs alone, not under mpirun" err
  check "... and times nothing" test ! -s out
done
check "nothing was written by a refused run" test ! -e notes.json -a ! -e p.json -a ! -e s.json -a ! -e same.json
check "the files found are kept" grep -q "my notes" notes.png
finish
