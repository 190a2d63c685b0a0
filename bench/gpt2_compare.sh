#!/usr/bin/env bash
# The GPT-2 124M training step, xgrad against PyTorch at its best, in one run: each round
# runs xgrad-bench --config gpt2 in float32 and bf16, the bf16 and float32 1024^3 product
# rates, then bench/gpt2_124m.py (PyTorch 1.13 in float32 and bf16 autocast, each under
# both of Debian's OpenBLAS builds and both wait policies), alternating. Prints a markdown
# table of the medians: each side in each precision (PyTorch's fastest environment named),
# best against best, and the bf16 step's rate of model FLOPs against the bf16 product rate.
#
#   bench/gpt2_compare.sh [--rounds 3] [--batch 4] [--seq-len 64] [--steps 4] [--warmup 2] [--threads 2]
#
# Both sides get the same untimed steps. B 8, T 256 wants --warmup 6: xgrad's heap grows
# to its size over the first steps, and every fresh page is a fault (about 15 us each on a
# VM whose host backs memory lazily), after which the steps stay on pages they have.
#
# As shipped, like compare.sh: OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, OPENBLAS_NUM_THREADS
# and OMP_NUM_THREADS are unset first. Needs build/ (./run build) and Debian's
# python3-torch (compare.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 batch=4 seq_len=64 steps=4 warmup=2 threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --seq-len) seq_len=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: bench/gpt2_compare.sh [--rounds N] [--batch B] [--seq-len T] [--steps N] [--warmup N] [--threads N]" >&2
       exit 2 ;;
  esac
done
for variable in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS OMP_NUM_THREADS; do
  [ -n "${!variable+set}" ] && echo "gpt2_compare.sh: measuring without $variable=${!variable}, as shipped" >&2
  unset "$variable"
done
config=custom
[ "$batch $seq_len" = "4 64" ] && config=b4t64
[ "$batch $seq_len" = "8 256" ] && config=b8t256
[ "$config" = custom ] && { echo "gpt2_compare.sh: gpt2_124m.py times B 4, T 64 or B 8, T 256" >&2; exit 2; }
[ -x build/bin/xgrad-bench ] || ./run build >/dev/null
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq "$rounds"); do
  for precision in float32 bf16; do
    build/bin/xgrad-bench --config gpt2 --batch "$batch" --seq-len "$seq_len" --precision "$precision" \
      --steps "$steps" --warmup "$warmup" --threads "$threads" >>"$results"
    build/bin/xgrad-bench --config sgemm --precision "$precision" --threads "$threads" >>"$results"
  done
  /usr/bin/python3 bench/gpt2_124m.py --configs "$config" --rounds 1 --steps "$steps" --warmup "$warmup" \
    --threads "$threads" >>"$results"
  echo "gpt2_compare.sh: round $round of $rounds done" >&2
done

/usr/bin/python3 - "$results" "$threads" <<'PY'
import json, os, statistics, sys, datetime
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
med = statistics.median
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
flags = next((set(l.split(":", 1)[1].split()) for l in open("/proc/cpuinfo") if l.startswith("flags")), set())
units = ", ".join(f for f in ("avx512_bf16", "amx_bf16") if f in flags) or "no bf16 units"
xgrad = {p: [r for r in rows if r.get("config") == "gpt2" and r["precision"] == p] for p in ("float32", "bf16")}
torch = {p: [r for r in rows if r.get("impl", "").startswith("pytorch") and r.get("precision") == p]
         for p in ("float32", "bf16")}
rate = {p: med([r["gflops"] for r in rows if r.get("config") == "sgemm" and r["precision"] == p])
        for p in ("float32", "bf16")}
first = xgrad["bf16"][0]
print(f"Machine: {cpu} ({units}), {os.cpu_count()} cores; {sys.argv[2]} threads; {datetime.date.today()}; "
      f"{len(xgrad['bf16'])} rounds, alternating, medians.")
print(f"xgrad: {first['blas']}; bf16: {first['bf16']}. PyTorch: Debian's {torch['bf16'][0]['impl']}, "
      "at its best: the fastest of OpenBLAS's pthread and openmp builds x libgomp's PASSIVE and ACTIVE wait.\n")
print(f"GPT-2 124M, B {first['batch']}, T {first['seq_len']}: forward, cross-entropy, backward, gradient clipping, "
      "AdamW.\n")
print("| | float32 ms/step | bf16 ms/step | best |")
print("|---|---|---|---|")
x = {p: med([r["ms_per_step"] for r in xgrad[p]]) for p in xgrad}
t, named = {}, {}
for p, lines in torch.items():
    per_variant = {}
    for line in lines:
        for variant, ms in line["variants"].items(): per_variant.setdefault(variant, []).append(ms)
    medians = {v: med(ms) for v, ms in per_variant.items()}
    named[p] = min(medians, key=medians.get)
    t[p] = medians[named[p]]
xbest, tbest = min(x, key=x.get), min(t, key=t.get)
print(f"| xgrad | {x['float32']:.0f} | {x['bf16']:.0f} | {x[xbest]:.0f} ({xbest}) |")
print(f"| PyTorch 1.13 at its best | {t['float32']:.0f} ({named['float32']}) | {t['bf16']:.0f} ({named['bf16']}) | "
      f"{t[tbest]:.0f} ({tbest}) |")
print(f"| PyTorch / xgrad | {t['float32'] / x['float32']:.2f}x | {t['bf16'] / x['bf16']:.2f}x | "
      f"{t[tbest] / x[xbest]:.2f}x best against best |")
gflop = first["model_gflop"]
print(f"\nThe bf16 step does {gflop:.1f} GFLOP of products: {gflop / x['bf16'] * 1e3:.0f} GFLOP/s, "
      f"{gflop / x['bf16'] * 1e3 / rate['bf16']:.0%} of the 1024^3 bf16 product rate measured in the same run "
      f"({rate['bf16']:.0f} GFLOP/s; sgemm {rate['float32']:.0f}). Peak RSS: xgrad "
      f"{med([r['peak_rss_mb'] for r in xgrad['float32']]):.0f} MB float32, "
      f"{med([r['peak_rss_mb'] for r in xgrad['bf16']]):.0f} MB bf16.")
PY
