#!/usr/bin/env bash
# Runs xgrad-bench and PyTorch's ../shared/bench/torch_reference.py for every config,
# each config in its own process, alternating between the two, and prints a markdown
# table of the medians: ms per step each, speed-up (PyTorch ms / xgrad ms), peak memory.
#
#   bench/compare.sh [--rounds N] [--threads N]     (after ./run test or ./run build)
#   bench/compare.sh --train [--rounds N]           time to 0.99 exact-match instead
#   bench/compare.sh --lm [--rounds N]              the language model: 2000 steps on the KJV
#   ... --precision bf16                            with --train or --lm: xgrad in bf16
# The step table shows xgrad in float32 and bf16 beside PyTorch at its best: float32
# (torch_reference.py) and its own bf16 autocast (../shared/bench/device/torch_variants.py
# --variant bf16), each under both of Debian's OpenBLAS builds (pthread, openmp) and both
# of libgomp's wait policies (PASSIVE, ACTIVE), the fastest named; then each side's faster
# precision, best against best. --lm times PyTorch under the four environments too.
#
# Installs Debian's python3-torch when missing (it runs with /usr/bin/python3).
# Both run exactly as shipped: OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, OPENBLAS_NUM_THREADS
# and OMP_NUM_THREADS are unset first.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 threads=2 mode=steps precision=float32
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --train) mode=train; shift ;;
    --lm) mode=lm; shift ;;
    --precision) precision=$2; shift 2 ;;
    *) echo "usage: bench/compare.sh [--train | --lm] [--precision float32|bf16] [--rounds N] [--threads N]" >&2
       exit 2 ;;
  esac
done
case "$precision" in float32 | bf16) ;; *) echo "compare.sh: --precision is float32 or bf16, not '$precision'" >&2; exit 2 ;; esac
# Both sides as shipped on a clean machine: a shell's OpenBLAS or OpenMP settings would
# pick other kernels or threads for one of them (fair_env.py sets PyTorch's own).
for variable in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS OMP_NUM_THREADS; do
  [ -n "${!variable+set}" ] && echo "compare.sh: measuring without $variable=${!variable}, as shipped" >&2
  unset "$variable"
done
reference=${XGRAD_TORCH_BENCH:-../shared/bench}
[ -f "$reference/torch_reference.py" ] || {
  echo "compare.sh: the PyTorch side ($reference/torch_reference.py) is missing; set XGRAD_TORCH_BENCH to its" \
       "folder, or run xgrad's side alone: build/bin/xgrad-bench --config tiny|medium|long|xlong" >&2
  exit 2
}
# PyTorch runs under each of Debian's OpenBLAS builds: the pthread one (xgrad's, which
# Debian then makes the default) and the OpenMP one, which shares PyTorch's own OpenMP
# threads, chosen by LD_LIBRARY_PATH; and under each of libgomp's wait policies: either
# can be the faster on a virtual machine (2026-11-26, Intel Xeon: passive 1.5x slower).
openmp_blas=/usr/lib/$(gcc -print-multiarch)/openblas-openmp
missing=()
/usr/bin/python3 -c "import torch" 2>/dev/null || missing+=(python3-torch)
[ -f "$openmp_blas/libopenblas.so.0" ] || missing+=(libopenblas0-openmp)
if [ ${#missing[@]} -gt 0 ]; then
  echo "compare.sh: installing ${missing[*]}" >&2
  sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
environments=("pthread PASSIVE" "pthread ACTIVE" "openmp PASSIVE" "openmp ACTIVE")
# torch BUILD POLICY SCRIPT ARGS...: one PyTorch run (POLICY "default": libgomp's own),
# its JSON line tagged with the two.
torch() {
  local build=$1 policy=$2 settings=()
  shift 2
  [ "$build" = openmp ] && settings+=(LD_LIBRARY_PATH="$openmp_blas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  [ "$policy" != default ] && settings+=(OMP_WAIT_POLICY="$policy")
  env "${settings[@]}" /usr/bin/python3 "$@" |
    sed "s/}\s*\$/, \"blas_build\": \"$build\", \"wait_policy\": \"$policy\"}/"
}
[ -x build/bin/xgrad-bench ] && [ -x build/bin/xgrad-train ] && [ -s data/kjv.txt ] || ./run build >/dev/null
results=$(mktemp)
trap 'rm -f "$results"' EXIT

# The CPU's best OpenBLAS kernels, as fair_env.py picks them for PyTorch.
best=$(grep -m1 '^flags' /proc/cpuinfo | grep -qw avx512bw && echo SkylakeX || echo Haswell)
if [ "$mode" = steps ]; then
  for round in $(seq "$rounds"); do
    for config in tiny medium long xlong; do
      build/bin/xgrad-bench --config "$config" --threads "$threads" >>"$results"
      build/bin/xgrad-bench --config "$config" --threads "$threads" --precision bf16 >>"$results"
      for environment in "${environments[@]}"; do
        # shellcheck disable=SC2086 # "BUILD POLICY", two words
        torch $environment "$reference/torch_reference.py" --config "$config" --threads "$threads" >>"$results"
        # torch_variants.py imports torch before fair_env.py: its kernels, given here.
        # shellcheck disable=SC2086
        PYTHONPATH=$reference OPENBLAS_CORETYPE=$best torch $environment "$reference/device/torch_variants.py" \
          --config "$config" --threads "$threads" --variant bf16 >>"$results"
      done
    done
    echo "compare.sh: round $round of $rounds done" >&2
  done
  # sgemm as shipped, and with the CPU's best OpenBLAS kernels forced by hand (what
  # fair_env.py gives PyTorch), alternating.
  for round in $(seq "$rounds"); do
    build/bin/xgrad-bench --config sgemm --threads "$threads" >>"$results"
    OPENBLAS_CORETYPE=$best build/bin/xgrad-bench --config sgemm --threads "$threads" |
      sed 's/"config": "sgemm"/"config": "sgemm_best"/' >>"$results"
    build/bin/xgrad-bench --config sgemm --threads "$threads" --precision bf16 |
      sed 's/"config": "sgemm"/"config": "bf16gemm"/' >>"$results"
  done
  build/bin/xgrad-bench --config overhead --threads "$threads" >>"$results"
  # Its verdict is reported, never the end of the report.
  for p in float32 bf16; do
    bench/concurrency.sh --precision "$p" --rounds "$rounds" | tee -a "$results" >&2 ||
      echo "compare.sh: two processes sharing the cores went past concurrency.sh's limit in $p (above)" >&2
  done
elif [ "$mode" = train ]; then
  for round in $(seq "$rounds"); do
    for task in sort reverse copy; do
      build/bin/xgrad-train --task "$task" --threads "$threads" --precision "$precision" --quiet --metrics /dev/stdout \
        2>/dev/null |
        grep '"final"' | sed 's/"impl": "xgrad[^"]*"/"impl": "xgrad"/' >>"$results"
      torch openmp default "$reference/torch_train_reference.py" --task "$task" --threads "$threads" |
        grep '"final"' | sed 's/"impl": "pytorch[^"]*"/"impl": "pytorch"/' >>"$results"
    done
    echo "compare.sh: round $round of $rounds done" >&2
  done
  build/bin/xgrad-bench --config sgemm --threads "$threads" >>"$results"
else
  # Both with their defaults: nanoGPT's shakespeare_char recipe, 2000 steps, seed 0.
  for round in $(seq "$rounds"); do
    build/bin/xgrad-train --task lm --text data/kjv.txt --threads "$threads" --precision "$precision" --quiet \
      --metrics /dev/stdout 2>/dev/null | grep '"final"' >>"$results"
    for environment in "${environments[@]}"; do
      # shellcheck disable=SC2086 # "BUILD POLICY", two words
      torch $environment "$reference/torch_lm_reference.py" --text data/kjv.txt --threads "$threads" |
        grep '"final"' >>"$results"
    done
    echo "compare.sh: round $round of $rounds done" >&2
  done
  build/bin/xgrad-bench --config sgemm --threads "$threads" >>"$results"
fi

/usr/bin/python3 - "$results" "$mode" "$threads" "$precision" <<'PY'
import json, statistics, sys, platform, datetime, os
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip().startswith("{")]
mode, threads, precision = sys.argv[2], sys.argv[3], sys.argv[4]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
core = next((r["blas_core"] for r in rows if "blas_core" in r), "?")
print(f"Machine: {cpu}, {os.cpu_count()} cores; {threads} threads; {datetime.date.today()}; medians of alternating runs.")
print(f"xgrad as shipped (OpenBLAS kernels: {core}); PyTorch through ../shared/bench (fair_env.py: the CPU's "
      "OpenBLAS kernels) under each OpenBLAS build and wait policy.\n")
med = lambda xs: statistics.median(xs) if xs else float("nan")
if mode == "steps":
    torch_version = next((r["impl"] for r in rows if r.get("impl", "").startswith("pytorch")), "pytorch-?")
    print(f"PyTorch: Debian's {torch_version}; float32 is torch_reference.py, bf16 torch.autocast('cpu', "
          "dtype=torch.bfloat16); each the fastest of OpenBLAS's pthread and openmp builds under libgomp's PASSIVE "
          "and ACTIVE wait (named). Best: each side's faster precision.\n")
    print("| config | B, L, d, heads, layers | xgrad fp32 ms | xgrad bf16 ms | PyTorch fp32 ms (at its best) | "
          "PyTorch bf16 ms (at its best) | fp32 vs fp32 | bf16 vs bf16 | best vs best | xgrad GFLOP/s fp32, bf16 | "
          "xgrad peak MB fp32, bf16 | PyTorch peak MB fp32 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for config in ["tiny", "medium", "long", "xlong"]:
        of = lambda impl, prec: [r for r in rows if r.get("config") == config and r.get("impl", "").startswith(impl)
                                 and r.get("precision", r.get("variant", "float32")) in prec]
        x, xb = of("xgrad", ("float32",)), of("xgrad", ("bf16",))
        t, tb = of("pytorch", ("float32",)), of("torch", ("bf16",))
        if not x or not t or not xb or not tb: continue
        c = x[0]
        ms = lambda rs: med([r["ms_per_step"] for r in rs])
        def at_best(rs):  # the fastest environment's median, and its name
            by_env = {}
            for r in rs: by_env.setdefault((r.get("blas_build", "?"), r.get("wait_policy", "?")), []).append(r)
            (build, policy), best_rows = min(by_env.items(), key=lambda kv: ms(kv[1]))
            return ms(best_rows), f"{build}, {policy.lower()}", best_rows
        xm, xbm = ms(x), ms(xb)
        (tm, tenv, trows), (tbm, tbenv, _) = at_best(t), at_best(tb)
        xbest, tbest = min(xm, xbm), min(tm, tbm)
        xname, tname = ("fp32" if xm <= xbm else "bf16"), ("fp32" if tm <= tbm else "bf16")
        print(f"| {config} | {c['batch']}, {c['seq_len']}, {c['d_model']}, {c['heads']}, {c['layers']} | {xm:.1f} | "
              f"{xbm:.1f} | {tm:.1f} ({tenv}) | {tbm:.1f} ({tbenv}) | {tm / xm:.2f}x | {tbm / xbm:.2f}x | "
              f"{tbest / xbest:.2f}x (xgrad {xname}, PyTorch {tname}) | "
              f"{med([r['gflops'] for r in x]):.0f}, {med([r['gflops'] for r in xb]):.0f} | "
              f"{med([r['peak_rss_mb'] for r in x]):.0f}, {med([r['peak_rss_mb'] for r in xb]):.0f} | "
              f"{med([r['peak_rss_mb'] for r in trows]):.0f} |")
    shipped = med([r["gflops"] for r in rows if r.get("config") == "sgemm"])
    best = [r for r in rows if r.get("config") == "sgemm_best"]
    print(f"\nsgemm 1024 x 1024 as shipped: {shipped:.1f} GFLOP/s ({core} kernels)", end="")
    if best:
        print(f"; with {best[0]['blas_core']} kernels forced: {med([r['gflops'] for r in best]):.1f} GFLOP/s "
              f"(ratio {shipped / med([r['gflops'] for r in best]):.2f})")
    bf16gemm = [r for r in rows if r.get("config") == "bf16gemm"]
    if bf16gemm:
        print(f"bf16 products 1024 x 1024 ({bf16gemm[0]['bf16']}): {med([r['gflops'] for r in bf16gemm]):.1f} GFLOP/s")
    for r in rows:
        if r.get("config") == "overhead": print(f"per-op overhead (forward + backward, chain of {r['chain']} tiny ops): {r['us_per_op']:.2f} us")
    for line in open(sys.argv[1]):
        if line.startswith("concurrency.sh ("):  # "concurrency.sh (tiny, bf16): two at once ..."
            setting, verdict = line[len("concurrency.sh "):].split(": ", 1)
            print(f"two processes sharing the cores (bench/concurrency.sh, {setting.strip('()')}): {verdict.strip()}")
elif mode == "lm":
    x = [r for r in rows if r.get("final") and r["impl"].startswith("xgrad")]
    t_all = [r for r in rows if r.get("final") and r["impl"].startswith("pytorch")]
    by_env = {}
    for r in t_all: by_env.setdefault((r.get("blas_build", "?"), r.get("wait_policy", "?")), []).append(r)
    (build, policy), t = min(by_env.items(), key=lambda kv: med([r["train_s"] for r in kv[1]]))
    others = ", ".join(f"{b} {p.lower()} {med([r['train_s'] for r in rs]):.1f} s" for (b, p), rs in sorted(by_env.items()))
    print(f"--task lm, KJV (data/kjv.txt), 2000 steps of 12 x 64 tokens, {len(x)} runs each; xgrad in {precision}; "
          f"PyTorch float32 at its best: OpenBLAS {build} build, {policy.lower()} wait (every environment: {others}).\n")
    print("| | xgrad | PyTorch | xgrad / PyTorch |")
    print("|---|---|---|---|")
    for key, label, fmt in [("val_loss", "validation loss after 2000 steps", "{:.4f}"),
                            ("train_s", "training time (s)", "{:.1f}"), ("ms_per_step", "ms per step", "{:.1f}"),
                            ("tokens_per_s", "tokens/s", "{:.0f}")]:
        xm, tm = med([r[key] for r in x]), med([r[key] for r in t])
        ratio = f"{xm - tm:+.4f}" if key == "val_loss" else f"{xm / tm:.2f}"
        print(f"| {label} | {fmt.format(xm)} | {fmt.format(tm)} | {ratio} |")
    sgemm = [r["gflops"] for r in rows if r.get("config") == "sgemm"]
    if sgemm: print(f"\nsgemm 1024 x 1024 in the same run: {med(sgemm):.1f} GFLOP/s ({core} kernels)")
else:
    print(f"xgrad in {precision}, PyTorch in float32.\n")
    print("| task | xgrad s to 0.99 | PyTorch s to 0.99 | time ratio | xgrad steps | PyTorch steps |")
    print("|---|---|---|---|---|---|")
    for task in ["sort", "reverse", "copy"]:
        x = [r for r in rows if r.get("task") == task and r["impl"] == "xgrad" and r["reached_target"]]
        t = [r for r in rows if r.get("task") == task and r["impl"] == "pytorch" and r["reached_target"]]
        if not x or not t:
            print(f"| {task} | {'-' if not x else ''} | {'-' if not t else ''} | target not reached in some run | | |"); continue
        xs, ts = med([r["seconds_to_target"] for r in x]), med([r["seconds_to_target"] for r in t])
        print(f"| {task} | {xs:.1f} | {ts:.1f} | {xs / ts:.2f} | {med([r['steps_to_target'] for r in x]):.0f} | "
              f"{med([r['steps_to_target'] for r in t]):.0f} |")
PY
