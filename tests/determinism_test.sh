#!/usr/bin/env bash
# xgrad-train's determinism promise, end to end: for one seed, the same bits on any thread
# count; under mpirun, the bits of one process accumulating the same micro-batches; and a
# checkpoint resumed in another job size or thread count continues the run that never
# stopped. "The same bits": every weight, optimizer moment and loss of the checkpoints,
# not only the printed metrics. ctest runs this under each family of BLAS kernels the CPU
# supports (tests/with_blas_kernels.sh), and as the environment has it.
#   usage: determinism_test.sh XGRAD_TRAIN
set -u
train=$1
source "$(dirname "$0")/lib.sh"
cd "$work"
# Root in CI containers; --oversubscribe: more ranks than cores is allowed here.
mpi() { local n=$1; shift; timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "$@"; }
same() { test -s "$1" -a -s "$2" && diff <(timeless "$1" | grep -v final) <(timeless "$2" | grep -v final) >/dev/null; }
same_final() { test -s "$1" -a -s "$2" && diff <(timeless "$1" | tail -n 1) <(timeless "$2" | tail -n 1) >/dev/null; }

if [ -n "${XGRAD_EXPECTED_BLAS_CORE:-}" ]; then
  check "xgrad-train runs $XGRAD_EXPECTED_BLAS_CORE kernels, the user's" \
    grep -q "$XGRAD_EXPECTED_BLAS_CORE kernels (OPENBLAS_CORETYPE set by the user)" <("$train" --version)
fi

# Thread counts: 1, 2, 3, 5 and 8 threads (more than the cores) train the same weights.
sort=(--task sort --eval-every 50 --quiet --batch 64)
for threads in 1 2 3 5 8; do
  "$train" "${sort[@]}" --steps 200 --accum-steps 2 --threads "$threads" --metrics "t$threads.jsonl" \
    --save "t$threads.st" >/dev/null
done
for threads in 2 3 5 8; do
  check "$threads threads train the bits of 1 thread" same_checkpoint t1.st "t$threads.st"
done

# np 2 == accum 2 and np 2 x accum 2 == accum 4, bitwise, over 200 steps of sort; the
# ranks with 1 thread each, and with 3.
mpi 2 "$train" "${sort[@]}" --steps 200 --threads 1 --metrics np2.jsonl --save np2.st >/dev/null
check "np 2 gives the weights of one process with --accum-steps 2" same_checkpoint t1.st np2.st
check "and its metrics" same t1.jsonl np2.jsonl
check "and the same final line" same_final t1.jsonl np2.jsonl
check "with four evaluations and a final line" test "$(grep -c '"step"' np2.jsonl)" -eq 4 -a \
  "$(grep -c '"final"' np2.jsonl)" -eq 1
"$train" "${sort[@]}" --steps 200 --accum-steps 4 --save accum4.st >/dev/null
mpi 2 "$train" "${sort[@]}" --steps 200 --accum-steps 2 --threads 3 --save np2accum2.st >/dev/null
check "np 2 with --accum-steps 2 is --accum-steps 4" same_checkpoint accum4.st np2accum2.st
"$train" "${sort[@]}" --steps 200 --save plain.st >/dev/null
check "accumulation is another sum than one batch (the comparison can fail)" \
  bash -c "test -s plain.st -a -s t1.st && ! same_checkpoint plain.st t1.st --tensors 2>/dev/null"

# Mixed precision keeps the promise: bf16 products on 1 and 5 threads, and under np 2.
for threads in 1 5; do
  "$train" "${sort[@]}" --steps 100 --accum-steps 2 --precision bf16 --threads "$threads" --save "bf16_t$threads.st" \
    >/dev/null
done
check "bf16: 5 threads train the bits of 1 thread" same_checkpoint bf16_t1.st bf16_t5.st
mpi 2 "$train" "${sort[@]}" --steps 100 --precision bf16 --threads 1 --save bf16_np2.st >/dev/null
check "bf16: np 2 gives the weights of one process with --accum-steps 2" same_checkpoint bf16_t1.st bf16_np2.st

# An uneven rank count, with dropout.
three=(--task reverse --seq-len 8 --steps 60 --eval-every 30 --quiet --batch 48 --dropout 0.1)
"$train" "${three[@]}" --accum-steps 3 --save accum3.st >/dev/null
mpi 3 "$train" "${three[@]}" --save np3.st >/dev/null
check "np 3 gives the weights of --accum-steps 3 (dropout included)" same_checkpoint accum3.st np3.st

# The language model too.
printf 'In the beginning God created the heaven and the earth.\n%.0s' $(seq 200) >text.txt
lm=(--task lm --text text.txt --seq-len 16 --batch 8 --layers 1 --heads 2 --d-model 16 --steps 30 --warmup 3
    --eval-every 15 --eval-batches 2 --quiet)
"$train" "${lm[@]}" --accum-steps 2 --save lm_accum2.st >/dev/null
mpi 2 "$train" "${lm[@]}" --save lm_np2.st >/dev/null
check "lm: np 2 gives the weights of --accum-steps 2" same_checkpoint lm_accum2.st lm_np2.st

# Checkpoints move between job sizes and thread counts: np 2 to one process on 5 threads,
# one process on 1 thread to np 2, give the run that never moved (the micro-batches per
# step travel in the checkpoint).
mpi 2 "$train" "${sort[@]}" --steps 100 --metrics moved.jsonl --save moved.st >/dev/null
"$train" --resume moved.st --steps 200 --threads 5 --metrics moved.jsonl --save moved.st --quiet >/dev/null
check "a checkpoint of np 2 resumes in one process on 5 threads" same_checkpoint np2.st moved.st
check "with the metrics of the run that never stopped" same np2.jsonl moved.jsonl
"$train" "${sort[@]}" --steps 100 --accum-steps 2 --threads 1 --metrics back.jsonl --save back.st >/dev/null
mpi 2 "$train" --resume back.st --steps 200 --metrics back.jsonl --save back.st --quiet >/dev/null
check "a checkpoint of one process on 1 thread resumes under np 2" same_checkpoint np2.st back.st
check "with the metrics of the run that never stopped" same np2.jsonl back.jsonl
finish
