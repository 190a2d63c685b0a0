#!/usr/bin/python3
"""PyTorch side of the GPT-2 124M training step (issue 38): Hugging Face's GPT2LMHeadModel
as tests/reference/hf_models.py writes it in plain PyTorch (12 layers, 12 heads, 768 wide,
vocabulary 50,257, 1,024 positions, head tied to the token embedding), one step = forward,
mean cross-entropy, backward, AdamW step, on uniform random tokens, for B 4, T 64 and B 8,
T 256, in float32 and in bf16 autocast (torch.autocast("cpu", torch.bfloat16), the loss in
float32). Debian's python3-torch (1.13), the system interpreter:

    /usr/bin/python3 bench/gpt2_124m.py [--threads 2] [--steps 5] [--warmup 2] [--rounds 1]
                                        [--configs b4t64,b8t256] [--precisions float32,bf16]

PyTorch at its best, as ../shared/bench/fair_env.py and bench/compare.sh measure it: each
config runs in a process of its own (its peak memory its own) under every variant of
PyTorch's environment, alternating, --rounds times: each of Debian's OpenBLAS builds that is
installed (openblas-pthread, the default, and openblas-openmp, which shares PyTorch's OpenMP
threads; apt-get install libopenblas0-openmp), chosen by LD_LIBRARY_PATH, times libgomp's
wait policy (OMP_WAIT_POLICY PASSIVE and ACTIVE: either can be the faster on a virtual
machine). OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are
unset first, as compare.sh does, then OPENBLAS_CORETYPE is set from the CPU's flags
(OpenBLAS 0.3.21 does not know recent CPUs and falls back to SSE3 kernels) unless
XGRAD_TORCH_AS_IS=1. Weights are GPT-2's init (N(0, 0.02), the residual projections
N(0, 0.02 / sqrt(2 layers)), LayerNorm 1 and 0, biases 0); AdamW lr 6e-4, betas (0.9, 0.95),
weight decay 0.1 on every parameter.
One JSON line per config and precision: the fastest variant's median ms per step, its peak
resident memory, and every variant's median:

    {"config": "gpt2_124m", "batch", "seq_len", "precision", "threads", "ms_per_step",
     "peak_rss_mb", "final_loss", "blas", "omp_wait_policy", "blas_core", "variants": {...},
     "steps", "warmup", "rounds", "impl"}

With --batch, --seq-len and --precision, one measurement in this process, in the
environment as given (what the variants run): the same line for that variant alone, with
"step_ms" (every timed step) and "blas" read from the library actually loaded.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {"b4t64": (4, 64), "b8t256": (8, 256)}
WAIT_POLICIES = ["PASSIVE", "ACTIVE"]


def best_openblas_core():
    """The OpenBLAS kernels for this CPU's instructions (fair_env.py's rule), or None."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return None
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def openblas_builds():
    """{name: folder} of Debian's OpenBLAS builds installed here."""
    lib = os.path.join("/usr/lib", sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu")
    builds = {}
    for name in ("openblas-pthread", "openblas-openmp"):
        folder = os.path.join(lib, name)
        if os.path.exists(os.path.join(folder, "libopenblas.so.0")):
            builds[name] = folder
    return builds


def loaded_openblas():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libopenblas" in line}
    return ", ".join(sorted(os.path.basename(os.path.dirname(p)) for p in paths)) or "none"


def gpt2_init(model, layers):
    import torch
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                residual = name.endswith("c_proj.weight")
                p.normal_(0.0, 0.02 / (2 * layers) ** 0.5 if residual else 0.02)
            else:  # LayerNorm weights 1, every bias 0
                p.fill_(1.0 if name.endswith("weight") else 0.0)
    return model


def measure(args):
    """One config and precision in this process; returns its JSON line."""
    os.environ.update(variant_env(None, None))  # before torch loads OpenBLAS, below
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    import hf_models

    torch.set_num_threads(args.threads)
    config = hf_models.gpt2_config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    model = gpt2_init(hf_models.empty_model(config, torch.float32), layers=12)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 50257, (args.batch, args.seq_len + 1), generator=generator)
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(args.precision == "bf16")):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - start) * 1e3)
    return {"config": "gpt2_124m", "batch": args.batch, "seq_len": args.seq_len, "precision": args.precision,
            "threads": args.threads, "ms_per_step": round(statistics.median(times), 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
            "final_loss": round(loss, 4), "blas": loaded_openblas(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
            "blas_core": os.environ.get("OPENBLAS_CORETYPE", "as shipped"), "step_ms": [round(t, 1) for t in times],
            "steps": args.steps, "warmup": args.warmup, "impl": "pytorch-" + torch.__version__}


def variant_env(folder, policy):
    """The environment of a variant: an OpenBLAS build's folder first on the library path
    and a wait policy (None: as given), and the CPU's OpenBLAS kernels (fair_env.py's rule)."""
    env = dict(os.environ)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    if folder:
        env["LD_LIBRARY_PATH"] = folder + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    core = best_openblas_core()
    if env.get("XGRAD_TORCH_AS_IS") != "1" and "OPENBLAS_CORETYPE" not in env and core:
        env["OPENBLAS_CORETYPE"] = core
    return env


def at_its_best(args):
    # As bench/compare.sh: a shell's OpenBLAS or OpenMP settings would pick other kernels or
    # threads than the variants do.
    for variable in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if variable in os.environ:
            print("gpt2_124m.py: measuring without %s=%s" % (variable, os.environ.pop(variable)), file=sys.stderr)
    builds = openblas_builds()
    if not builds:
        sys.exit("gpt2_124m.py: no OpenBLAS build of Debian's found (apt-get install libopenblas0-pthread)")
    if "openblas-openmp" not in builds:
        print("gpt2_124m.py: libopenblas0-openmp is not installed: PyTorch measured on %s only"
              % ", ".join(builds), file=sys.stderr)
    variants = [(name, folder, policy) for name, folder in builds.items() for policy in WAIT_POLICIES]
    for config in args.configs.split(","):
        batch, seq_len = CONFIGS[config]
        for precision in args.precisions.split(","):
            runs = {}
            for _ in range(args.rounds):
                for name, folder, policy in variants:
                    command = [sys.executable, os.path.abspath(__file__), "--batch", str(batch), "--seq-len",
                               str(seq_len), "--precision", precision, "--threads", str(args.threads),
                               "--steps", str(args.steps), "--warmup", str(args.warmup)]
                    result = subprocess.run(command, env=variant_env(folder, policy), capture_output=True, text=True)
                    if result.returncode != 0:
                        sys.exit("gpt2_124m.py: %s/%s, %s %s failed:\n%s" % (name, policy, config, precision,
                                                                             result.stderr))
                    line = json.loads(result.stdout.strip().splitlines()[-1])
                    if line["blas"] != name:
                        sys.exit("gpt2_124m.py: asked for %s, PyTorch loaded %s" % (name, line["blas"]))
                    runs.setdefault("%s/%s" % (name, policy), []).append(line)
            medians = {variant: statistics.median(r["ms_per_step"] for r in lines) for variant, lines in runs.items()}
            best = min(medians, key=medians.get)
            row = dict(runs[best][-1], ms_per_step=round(medians[best], 1), rounds=args.rounds,
                       variants={v: round(ms, 1) for v, ms in medians.items()})
            row.pop("step_ms")
            print(json.dumps(row), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per process (their median)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--rounds", type=int, default=1, help="processes per variant (the median of theirs)")
    parser.add_argument("--configs", default="b4t64,b8t256", help="of %s" % ", ".join(CONFIGS))
    parser.add_argument("--precisions", default="float32,bf16")
    parser.add_argument("--batch", type=int, help="with --seq-len and --precision: one measurement, here")
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--precision", choices=["float32", "bf16"])
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.rounds < 1 or args.threads < 1:
        parser.error("--steps, --rounds and --threads are at least 1, --warmup at least 0")
    one = (args.batch, args.seq_len, args.precision)
    if any(v is not None for v in one):
        if None in one:
            parser.error("--batch, --seq-len and --precision go together")
        print(json.dumps(measure(args)), flush=True)
        return
    for name in args.configs.split(","):
        if name not in CONFIGS:
            parser.error("--configs: %r is not one of %s" % (name, ", ".join(CONFIGS)))
    for name in args.precisions.split(","):
        if name not in ("float32", "bf16"):
            parser.error("--precisions: %r is not float32 or bf16" % name)
    at_its_best(args)


if __name__ == "__main__":
    main()
