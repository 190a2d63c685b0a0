#!/usr/bin/env bash
# On the device machine (16 cores, PyTorch 2.x, nothing installable): the GPT-2 124M step
# (B 4, T 64) and the four configs, xgrad in float32 and bf16 against PyTorch's eager float32
# and bf16 autocast, at each thread count, alternating, each run in a process of its own.
# Rounds go on until --seconds is spent, so that a lease's limit cuts no run in half.
# Here, after ./run build:
#   ../shared/bench/device/pack.sh
# then the device tool with carry [".device"] and the command
#   bash bench/device_compare.sh [--threads "16 2"] [--seconds 480]
# It writes $OUT/perf.jsonl (one JSON line a run, tagged "side") and $OUT/machine.txt;
# bench/device_table.py perf.jsonl turns them into the table of docs/benchmarks.md.
set -u
cd "$(dirname "$0")/.."
threads="16 2" seconds=480
usage() { echo "usage: bench/device_compare.sh [--threads \"16 2\"] [--seconds 480]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "device_compare.sh: --seconds $seconds is not a whole number of seconds" >&2; exit 2; }
for t in $threads; do
  [[ "$t" =~ ^[1-9][0-9]*$ ]] || { echo "device_compare.sh: --threads: $t is not a thread count" >&2; exit 2; }
done
out=${OUT:-/tmp/out}; mkdir -p "$out"; log=$out/perf.jsonl; : >"$log"
[ -f .device/xgrad.tar.xz ] || { echo "device_compare.sh: no .device/xgrad.tar.xz (run ../shared/bench/device/pack.sh)" >&2; exit 2; }
pkg=$(mktemp -d); trap 'rm -rf "$pkg"' EXIT
tar xJf .device/xgrad.tar.xz -C "$pkg" || exit 1
export LD_LIBRARY_PATH=$pkg/lib XGRAD_TORCH_AS_IS=1
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS OMP_NUM_THREADS OMP_WAIT_POLICY
bench=$pkg/bin/xgrad-bench python=${PYTHON:-python3}
{ lscpu; "$python" -c "import torch; print('torch', torch.__version__, torch.backends.cpu.get_cpu_capability())"
  "$bench" --version; } >"$out/machine.txt" 2>&1
deadline=$((SECONDS + seconds))

# run SIDE LIMIT COMMAND...: one process, its JSON line tagged, if the time left allows it.
run() {
  local side=$1 limit=$2; shift 2
  if [ $((SECONDS + limit)) -gt "$deadline" ]; then return 1; fi
  timeout "$limit" "$@" 2>>"$out/err.txt" | grep '^{' | sed "s/^{/{\"side\": \"$side\", /" >>"$log"
}

round=0
while :; do
  round=$((round + 1))
  for t in $threads; do
    if [ "$round" = 1 ]; then
      for p in float32 bf16; do run product 30 "$bench" --config sgemm --precision "$p" --threads "$t" || break 3; done
    fi
    for p in float32 bf16; do
      run xgrad 60 "$bench" --config gpt2 --batch 4 --seq-len 64 --precision "$p" --steps 4 --warmup 2 --threads "$t" || break 3
      run torch 90 "$python" bench/gpt2_124m.py --batch 4 --seq-len 64 --precision "$p" --steps 4 --warmup 2 \
        --threads "$t" || break 3
    done
    for c in tiny medium long xlong; do
      for p in float32 bf16; do run xgrad 40 "$bench" --config "$c" --precision "$p" --threads "$t" || break 4; done
      for v in eager bf16; do
        run torch 40 "$python" .device/torch_variants.py --config "$c" --threads "$t" --variant "$v" || break 4
      done
    done
  done
  echo "round $round done at ${SECONDS}s" >>"$out/machine.txt"
done
echo "stopped in round $round at ${SECONDS}s of $seconds" >>"$out/machine.txt"
