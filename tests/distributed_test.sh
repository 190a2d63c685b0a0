#!/usr/bin/env bash
# xgrad-train under mpirun (Open MPI): bad flags, a failing rank, a killed rank, a
# diverged loss and Ctrl-C end the job, never hang it. (That data parallelism gives the
# bits of one process accumulating the same micro-batches: determinism_test.sh.)
#   usage: distributed_test.sh XGRAD_TRAIN
set -u
train=$1
source "$(dirname "$0")/lib.sh"
cd "$work"
# Root in CI containers; --oversubscribe: more ranks than cores is allowed here.
mpi() { local n=$1; shift; timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "$@"; }

# A batch the ranks do not divide is an error, said once; a bad flag ends every rank.
mpi 3 "$train" --task sort --batch 64 --steps 5 >out 2>err
check "np 3 with --batch 64 exits non-zero" test $? -ne 0
check "and says why, once" test "$(grep -c 'does not divide into 3 ranks' err)" -eq 1
mpi 2 "$train" --juggle >out 2>err
check "a bad flag ends every rank" test $? -ne 0
check "and is named" grep -q "juggle" err
# A checkpoint of one process's single micro-batch: two ranks cannot share its steps
# (--accum-steps is asked for), but evaluate it as it is.
"$train" --task sort --steps 5 --eval-size 100 --quiet --save one.st >/dev/null
mpi 2 "$train" --resume one.st --steps 10 >out 2>err
check "np 2 resuming 1 micro-batch a step exits non-zero" test $? -ne 0
check "and asks for --accum-steps" grep -q "1 micro-batch per step, which 2 ranks cannot share" err
# (Under the sanitizers, leaks in the Open MPI components unloaded at exit, which no
# suppression can name, would make the status 1: this status is the tool's own.)
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 mpi 2 "$train" --resume one.st --eval-only >out 2>err
code=$?
check "np 2 --eval-only of it exits 0 (got $code: $(head -c 300 err))" test "$code" -eq 0
check "and prints its losses" grep -q "at step 5" out

# Ranks given other runs (each rank its own folder, as hosts each have theirs; the same
# flags): another text of the same name, a stale copy of the checkpoint, another rate.
# Each is refused before training, once, naming the rank; nothing is written.
mpmd() { timeout 300 mpirun --allow-run-as-root --oversubscribe -np 1 --wdir r0 "$train" "$@" : -np 1 --wdir r1 "$train" "$@"; }
mkdir r0 r1
/usr/bin/python3 -c "print('the quick brown fox jumps over the lazy dog ' * 40)" >r0/t.txt
/usr/bin/python3 -c "print('the quick brown fox jumps over the lazy cat ' * 40)" >r1/t.txt
small=(--task lm --text t.txt --seq-len 16 --batch 4 --layers 1 --d-model 16 --heads 2 --eval-every 2 --threads 1
  --eval-batches 1 --quiet)
refused_ranks() {
  local name=$1 expected=$2
  shift 2
  ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 mpmd "$@" >out 2>err
  local code=$?
  check "$name: exits non-zero (got $code)" test "$code" -ne 0
  check "... says so once ($(grep xgrad-train err | head -c 300))" test "$(grep -c "$expected" err)" -eq 1
  check "... writes nothing" test ! -e r0/new.st -a ! -e r1/new.st
}
refused_ranks "another text under the same name" \
  "rank 1 was given other data (another text, or other shards or tokenizer) than rank 0" \
  "${small[@]}" --steps 4 --save new.st
# A rank whose set-up takes far longer than --comm-timeout (its text 100,000 times larger,
# read, counted and fingerprinted) is waited for: the ranks still meet to compare runs.
/usr/bin/python3 -c "import sys; sys.stdout.write('the quick brown fox jumps over the lazy cat\n' * 4000000)" >r1/t.txt
refused_ranks "a rank slower to set up than --comm-timeout" \
  "rank 1 was given other data (another text, or other shards or tokenizer) than rank 0" \
  "${small[@]}" --steps 4 --save new.st --comm-timeout 0.05
check "... no wait ran out ($(grep -o 'no answer within.*' err | head -c 200))" test "$(grep -c 'no answer within' err)" -eq 0
cp r0/t.txt r1/t.txt
(cd r0 && "$train" "${small[@]}" --accum-steps 2 --steps 2 --save c.st >/dev/null && cp c.st ../r1/c.st &&
  "$train" --resume c.st --steps 4 --threads 1 --save c.st >/dev/null)
refused_ranks "a stale copy of the checkpoint" "rank 1 was given other checkpoint to start from" \
  --resume c.st --steps 6 --threads 1 --save new.st
cp r0/c.st r1/c.st
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 mpmd --resume c.st --steps 6 --threads 1 --save new.st >out 2>err
code=$?
check "the same copy goes on (got $code: $(grep xgrad-train err | head -c 300))" test "$code" -eq 0
rm -f r0/new.st
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 timeout 300 mpirun --allow-run-as-root --oversubscribe \
  -np 1 --wdir r0 "$train" --resume c.st --steps 6 --threads 1 --save new.st : \
  -np 1 --wdir r1 "$train" --init-from c.st --text t.txt --steps 6 --threads 1 --accum-steps 1 --save new.st \
  >out 2>err
check "one rank resuming, the other starting from the same file, exits non-zero" test $? -ne 0
check "... naming the settings" test "$(grep -c "rank 1 was given other settings" err)" -eq 1
check "... writes nothing" test ! -e r0/new.st -a ! -e r1/new.st
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 timeout 300 mpirun --allow-run-as-root --oversubscribe \
  -np 1 --wdir r0 "$train" --task sort --steps 4 --lr 0.01 --threads 1 --save new.st : \
  -np 1 --wdir r1 "$train" --task sort --steps 4 --lr 0.02 --threads 1 --save new.st >out 2>err
check "another --lr on one rank exits non-zero" test $? -ne 0
check "... naming the settings" test "$(grep -c "rank 1 was given other settings" err)" -eq 1
check "... writes nothing" test ! -e r0/new.st -a ! -e r1/new.st

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
check "with its message" grep -q "rank 0: --save gone/x.st: save: cannot create a file in 'gone'" err
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
mpi 2 "$train" "${slow[@]}" --save term.st >term.out 2>term.err &
job=$!
for _ in $(seq 300); do [ -s term.st ] && break; sleep 0.1; done  # both ranks training
# (The first evaluation, before that, takes 20-25 s under the sanitizers: the clock starts
# at the signal.)
start=$(date +%s)
pkill -TERM -n -f "^$train ${slow[*]}"  # the rank started last
wait $job
code=$?
check "SIGTERM to one rank ends the job (exit $code)" test "$code" -ne 0 -a "$code" -ne 124
check "within 30 s of the signal" test $(($(date +%s) - start)) -le 30
check "rank 0 saved" grep -q "checkpoint saved" term.out
check "and no rank is left" bash -c "! pgrep -f '^$train ${slow[*]}' >/dev/null"
# A rank that stops answering (SIGSTOP: stuck, not gone): after --comm-timeout rank 0
# saves the last step, says so in one line, and the job ends; the checkpoint resumes.
stuck=(--task sort --steps 1000000 --eval-every 100 --target-exact 2 --threads 1 --quiet --comm-timeout 2)
rank_pid() {
  for p in $(pgrep -f "^$train ${stuck[*]}"); do
    tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
}
mpi 2 "$train" "${stuck[@]}" --save stuck.st >stuck.out 2>stuck.err &
job=$!
for _ in $(seq 300); do [ -s stuck.st ] && break; sleep 0.1; done
stopped=$(rank_pid 1)
[ -n "$stopped" ] && kill -STOP $stopped
start=$(date +%s)
wait $job
code=$?
check "a stuck rank ends the job (exit $code)" test "$code" -ne 0 -a "$code" -ne 124
check "within 30 s" test $(($(date +%s) - start)) -le 30
check "rank 0 says so, saved, in one line" grep -qE "^xgrad-train: rank 0: step [0-9]+: [a-z_ ]+( rank 1)?: no answer \
within 2.0 s: .*; checkpoint saved at step [0-9]+: continue with --resume stuck.st$" stuck.err
check "and only rank 0 speaks" test "$(grep -c '^xgrad-train' stuck.err)" -eq 1
check "and no rank is left" bash -c "! pgrep -f '^$train ${stuck[*]}' >/dev/null"
saved=$(grep -oE 'checkpoint saved at step [0-9]+' stuck.err | grep -oE '[0-9]+$')
"$train" --resume stuck.st --steps $((${saved:-0} + 10)) --quiet >/dev/null
check "and the checkpoint resumes" test $? -eq 0 -a -n "$saved"
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
