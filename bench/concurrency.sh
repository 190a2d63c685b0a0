#!/usr/bin/env bash
# Two xgrad processes sharing the cores must not stall each other: runs
# `xgrad-bench --config CONFIG` alone, then two at once, ROUNDS times each, and fails
# (exit 1) when the median step time of the pair is more than LIMIT times the median
# alone. With 2 threads each on 2 cores the fair share is 2x; spin-waiting thread pools
# measured 4.8x. xgrad is run as shipped: no OMP_* or OPENBLAS_* variable is set.
#
#   bench/concurrency.sh [--config tiny] [--precision float32|bf16] [--rounds 3] [--limit 2.5]
#                                                                      (after ./run build)
set -euo pipefail
cd "$(dirname "$0")/.."
config=tiny precision=float32 rounds=3 limit=2.5
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    *) echo "usage: bench/concurrency.sh [--config NAME] [--precision float32|bf16] [--rounds N] [--limit X]" >&2
       exit 2 ;;
  esac
done
bench=build/bin/xgrad-bench
[ -x "$bench" ] || { echo "concurrency.sh: no $bench; run ./run build first" >&2; exit 2; }
step_ms() { grep -o '"ms_per_step": [0-9.]*' | cut -d' ' -f2; }
alone=() pair=()
for _ in $(seq "$rounds"); do
  alone+=("$("$bench" --config "$config" --precision "$precision" --steps 100 | step_ms)")
  out=$(mktemp)
  "$bench" --config "$config" --precision "$precision" --steps 100 >"$out" &
  other=$!
  pair+=("$("$bench" --config "$config" --precision "$precision" --steps 100 | step_ms)")
  wait "$other"
  pair+=("$(step_ms <"$out")")
  rm -f "$out"
done
/usr/bin/env python3 - "$limit" "${alone[*]}" "${pair[*]}" "$config, $precision" <<'PY'
import statistics, sys
limit = float(sys.argv[1])
alone = [float(x) for x in sys.argv[2].split()]
pair = [float(x) for x in sys.argv[3].split()]
ratio = statistics.median(pair) / statistics.median(alone)
print(f"concurrency.sh ({sys.argv[4]}): alone {statistics.median(alone):.2f} ms/step, two at once {statistics.median(pair):.2f} "
      f"ms/step each: {ratio:.2f}x (limit {limit}x)")
sys.exit(0 if ratio <= limit else 1)
PY
