#!/usr/bin/env bash
# xgrad-train under mpirun (Open MPI): data parallelism gives bitwise the metrics of one
# process accumulating the same micro-batches; checkpoints move between job sizes; bad
# flags, a failing rank, a killed rank and Ctrl-C end the job, never hang it.
#   usage: distributed_test.sh XGRAD_TRAIN
set -u
train=$1
source "$(dirname "$0")/lib.sh"
cd "$work"
# Root in CI containers; --oversubscribe: more ranks than cores is allowed here.
mpi() { local n=$1; shift; timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "$@"; }
same() { diff <(timeless "$1" | grep -v final) <(timeless "$2" | grep -v final) >/dev/null; }
same_final() { diff <(timeless "$1" | tail -n 1) <(timeless "$2" | tail -n 1) >/dev/null; }

# np 2 == accum 2 and np 2 x accum 2 == accum 4, bitwise, over 200 steps of sort.
sort=(--task sort --eval-every 50 --quiet --batch 64)
"$train" "${sort[@]}" --steps 200 --accum-steps 2 --metrics accum2.jsonl >/dev/null
mpi 2 "$train" "${sort[@]}" --steps 200 --metrics np2.jsonl >/dev/null
check "np 2 gives the metrics of one process with --accum-steps 2" same accum2.jsonl np2.jsonl
check "and the same final line" same_final accum2.jsonl np2.jsonl
check "with four evaluations and a final line" test "$(grep -c '"step"' np2.jsonl)" -eq 4 -a \
  "$(grep -c '"final"' np2.jsonl)" -eq 1
"$train" "${sort[@]}" --steps 200 --accum-steps 4 --metrics accum4.jsonl >/dev/null
mpi 2 "$train" "${sort[@]}" --steps 200 --accum-steps 2 --metrics np2accum2.jsonl >/dev/null
check "np 2 with --accum-steps 2 is --accum-steps 4" same accum4.jsonl np2accum2.jsonl
"$train" "${sort[@]}" --steps 200 --metrics plain.jsonl >/dev/null
check "accumulation is another sum than one batch (the comparison can fail)" \
  bash -c "! diff -q <(sed -E 's/, \"(train_s|wall_s)\": [0-9.]+//g' plain.jsonl) \
    <(sed -E 's/, \"(train_s|wall_s)\": [0-9.]+//g' accum2.jsonl) >/dev/null"

# An uneven rank count: a batch 3 divides works and matches; one it does not is an error.
three=(--task reverse --seq-len 8 --steps 60 --eval-every 30 --quiet --batch 48 --dropout 0.1)
"$train" "${three[@]}" --accum-steps 3 --metrics accum3.jsonl >/dev/null
mpi 3 "$train" "${three[@]}" --metrics np3.jsonl >/dev/null
check "np 3 gives the metrics of --accum-steps 3 (dropout included)" same accum3.jsonl np3.jsonl
mpi 3 "$train" --task sort --batch 64 --steps 5 >out 2>err
check "np 3 with --batch 64 exits non-zero" test $? -ne 0
check "and says why, once" test "$(grep -c 'does not divide into 3 ranks' err)" -eq 1
mpi 2 "$train" --juggle >out 2>err
check "a bad flag ends every rank" test $? -ne 0
check "and is named" grep -q "juggle" err

# The language model too.
printf 'In the beginning God created the heaven and the earth.\n%.0s' $(seq 200) >text.txt
lm=(--task lm --text text.txt --seq-len 16 --batch 8 --layers 1 --heads 2 --d-model 16 --steps 30 --warmup 3
    --eval-every 15 --eval-batches 2 --quiet)
"$train" "${lm[@]}" --accum-steps 2 --metrics lm_accum2.jsonl >/dev/null
mpi 2 "$train" "${lm[@]}" --metrics lm_np2.jsonl >/dev/null
check "lm: np 2 gives the metrics of --accum-steps 2" same lm_accum2.jsonl lm_np2.jsonl

# Checkpoints move between job sizes: np 2 to one process and one process to np 2 give
# the run that never moved (the micro-batches per step travel in the checkpoint).
mpi 2 "$train" "${sort[@]}" --steps 100 --metrics moved.jsonl --save np2.st >/dev/null
"$train" --resume np2.st --steps 200 --metrics moved.jsonl --quiet >/dev/null
check "a checkpoint of np 2 resumes in one process" same np2.jsonl moved.jsonl
"$train" "${sort[@]}" --steps 100 --accum-steps 2 --metrics back.jsonl --save one.st >/dev/null
mpi 2 "$train" --resume one.st --steps 200 --metrics back.jsonl --quiet >/dev/null
check "a checkpoint of one process resumes under np 2" same np2.jsonl back.jsonl

# A rank that fails ends the job with its message, within 30 s: rank 0's checkpoint
# folder disappears under it.
mkdir gone
start=$(date +%s)
mpi 2 "$train" --task sort --steps 1000000 --eval-every 20 --eval-size 100 --target-exact 2 --save gone/x.st \
  >out 2>err &
job=$!
for _ in $(seq 300); do [ -s gone/x.st ] && break; sleep 0.1; done
rm -rf gone
wait $job
code=$?
check "a failing rank ends the job (exit $code)" test "$code" -ne 0
check "within 30 s" test $(($(date +%s) - start)) -le 30
check "with its message" grep -q "rank 0: save: cannot create a file in 'gone'" err
# A rank killed with SIGKILL ends the job (the rank: a process whose command line starts
# with the trainer, not mpirun's).
long=(--task sort --steps 1000000 --eval-every 100000 --target-exact 2)
start=$(date +%s)
mpi 2 "$train" "${long[@]}" --quiet >out 2>err &
job=$!
for _ in $(seq 300); do [ "$(pgrep -c -f "^$train ${long[*]}")" -eq 2 ] && break; sleep 0.1; done  # both ranks up
sleep 1
pkill -KILL -n -f "^$train ${long[*]}"
wait $job
check "a rank killed with SIGKILL ends the job" test $? -ne 0
check "within 30 s" test $(($(date +%s) - start)) -le 30
check "and no rank is left" bash -c "! pgrep -f '^$train ${long[*]}' >/dev/null"
# SIGTERM to one rank alone, in the middle of a long evaluation: every rank stops at the
# next step, rank 0 saving; the job never hangs.
slow=(--task sort --steps 1000000 --eval-every 1 --eval-size 20000 --target-exact 2 --threads 1)
start=$(date +%s)
mpi 2 "$train" "${slow[@]}" --save term.st >term.out 2>term.err &
job=$!
for _ in $(seq 300); do [ -s term.st ] && break; sleep 0.1; done  # both ranks training
pkill -TERM -n -f "^$train ${slow[*]}"  # the rank started last
wait $job
code=$?
check "SIGTERM to one rank ends the job (exit $code)" test "$code" -ne 0 -a "$code" -ne 124
check "within 30 s" test $(($(date +%s) - start)) -le 30
check "rank 0 saved" grep -q "checkpoint saved" term.out
check "and no rank is left" bash -c "! pgrep -f '^$train ${slow[*]}' >/dev/null"
# Training that diverges stops every rank at once: rank 0 says why, in one line.
code=$(mpi 3 "$train" --task sort --lr 1e38 --batch 63 --steps 5 --quiet 2>diverged.err >/dev/null; echo $?)
check "a diverged loss under np 3 ends the job (exit $code)" test "$code" -ne 0 -a "$code" -ne 124
check "with one message from rank 0" test "$(grep -c "xgrad-train: step [0-9]*: the loss is" diverged.err)" -eq 1
check "and no MPI_Abort" bash -c "! grep -q MPI_ABORT diverged.err"
# Ctrl-C on mpirun: rank 0 saves, and the checkpoint resumes.
mpirun --allow-run-as-root --oversubscribe -np 2 "$train" --task sort --steps 1000000 --target-exact 2 --eval-every 20 \
  --eval-size 50 --save ctrl.st >ctrl.out 2>/dev/null &
job=$!
for _ in $(seq 300); do [ -s ctrl.st ] && break; sleep 0.1; done  # training, its signal handlers set
kill -INT $job
wait $job
check "Ctrl-C on mpirun saves" grep -q "checkpoint saved" ctrl.out
check "and the checkpoint resumes" "$train" --resume ctrl.st --steps 1 --quiet
pkill -KILL -f "^$train ${long[*]}"  # nothing should be left; never leave a stray rank
finish
