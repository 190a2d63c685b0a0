#!/usr/bin/python3
"""The table of bench/device_compare.sh's perf.jsonl: per config and thread count, the median
ms per step of xgrad in float32 and bf16 and of PyTorch eager float32 and bf16 autocast, and
best against best (PyTorch's faster precision over xgrad's faster precision).
    bench/device_table.py perf.jsonl [machine.txt]"""
import json
import statistics
import sys



def fail(message):
    print(message, file=sys.stderr)
    sys.exit(2)


if len(sys.argv) not in (2, 3):
    fail("usage: bench/device_table.py perf.jsonl [machine.txt]")
try:
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
except (OSError, ValueError) as error:
    fail(f"device_table.py: {sys.argv[1]}: {error}")
CONFIGS = ["gpt2", "tiny", "medium", "long", "xlong"]
TORCH_NAME = {"gpt2_124m": "gpt2"}


def key(row):
    """(config, threads, side/precision) of a run."""
    config = TORCH_NAME.get(row["config"], row["config"])
    if row["side"] == "torch":
        precision = row.get("precision") or ("bf16" if row.get("variant") == "bf16" else "float32")
        return config, row["threads"], "torch " + precision
    return config, row["threads"], row["side"] + " " + row.get("precision", "float32")


runs = {}
for row in rows:
    runs.setdefault(key(row), []).append(row["ms_per_step"] if "ms_per_step" in row else row.get("gflops"))
median = {k: statistics.median(v) for k, v in runs.items()}
torch_version = next((r["impl"] for r in rows if r["side"] == "torch"), "?")
threads = sorted({k[1] for k in runs}, reverse=True)
if len(sys.argv) > 2:
    lines = open(sys.argv[2]).read().splitlines()
    print("Machine: " + "; ".join(l.split(":", 1)[1].strip() for l in lines if l.startswith("Model name")))
for t in threads:
    rate = {p: median.get(("sgemm", t, "product " + p)) for p in ("float32", "bf16")}
    print(f"\n{t} threads; 1024^3 product: float32 {rate['float32']} GFLOP/s, bf16 {rate['bf16']} GFLOP/s; "
          f"{torch_version}\n")
    print("| config | xgrad float32 | xgrad bf16 | PyTorch float32 | PyTorch bf16 autocast | best vs best | rounds |")
    print("|---|---|---|---|---|---|---|")
    for c in CONFIGS:
        cells = [median.get((c, t, s)) for s in ("xgrad float32", "xgrad bf16", "torch float32", "torch bf16")]
        if all(v is None for v in cells):
            continue
        xs = [v for v in cells[:2] if v is not None]
        ts = [v for v in cells[2:] if v is not None]
        ratio = f"{min(ts) / min(xs):.2f}x" if xs and ts else "-"
        n = min(len(runs.get((c, t, s), [])) for s in ("xgrad float32", "xgrad bf16", "torch float32", "torch bf16"))
        print(f"| {c} | " + " | ".join("-" if v is None else f"{v:,.1f}" for v in cells) + f" | {ratio} | {n} |")
