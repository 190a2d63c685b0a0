#!/usr/bin/python3
"""A written model of data parallelism across machines: step time = compute / N + the
time to all-reduce the gradients, for xgrad's benchmark models (compute measured on one
2-core machine, docs/benchmarks.md's tables) and a 100M-parameter model, at 10 and 100 Gb/s.

    /usr/bin/python3 bench/scaling_model.py      # prints docs/benchmarks.md's table

All-reduce, per step, of `bytes` = 4 x parameters (float32 gradients) over N machines:
  ring (the bandwidth-optimal textbook algorithm, what NCCL and Open MPI's large-message
  allreduce do):      2 (N-1)/N x bytes / B  +  2 (N-1) x latency
  xgrad's fixed-order chain (rank r adds to rank r-1's sum, the last rank broadcasts:
  bitwise equal to one process), pipelined over 1 MiB buckets:
                      2 x bytes / B  +  2 (N-1) x (bucket / B + latency)
Latency: 25 us per message at 10 Gb/s (TCP Ethernet), 5 us at 100 Gb/s (RDMA).
No overlap is counted: overlapping with backward (what the reducer does) can hide up to
the backward pass, about 2/3 of the compute, so these are upper bounds on the cost.
Speed-up = compute / step time; data parallelism stops paying where adding machines no
longer lowers the step time (the best N), and is worth little once efficiency
(speed-up / N) falls below 50%.
"""

BUCKET = 1 << 20


def params(d, layers, vocab, seq_len, ff=4):
    per_layer = 4 * d * d + 4 * d + 2 * ff * d * d + ff * d + d + 4 * d  # attention, MLP, two LayerNorms
    return layers * per_layer + vocab * d + seq_len * d + vocab * d + vocab


# name: (parameters, compute ms per step on one machine)
MODELS = {
    "tiny (B32 L16 d64 x2)": (params(64, 2, 16, 16), 4.1),
    "medium (B32 L64 d256 x2)": (params(256, 2, 16, 64), 130.8),
    "long (B8 L512 d128 x2)": (params(128, 2, 16, 512), 149.9),
    "xlong (B1 L4096 d128 x1)": (params(128, 1, 16, 4096), 273.2),
    "lm (GPT B12 L64 d128 x4)": (810880, 38.6),
    # 100M parameters, 64 x 1024 tokens per step: 6 x 1e8 x 65536 FLOP at the 150 GFLOP/s
    # this machine's products reach.
    "100M-parameter GPT, 65k tokens/step": (100_000_000, 6 * 1e8 * 65536 / 150e9 * 1e3),
}
LINKS = {"10 Gb/s": (10e9 / 8, 25e-6), "100 Gb/s": (100e9 / 8, 5e-6)}
NS = [2, 4, 8, 16, 32, 64]


def ring(bytes_, n, bandwidth, latency):
    return 2 * (n - 1) / n * bytes_ / bandwidth + 2 * (n - 1) * latency


def chain(bytes_, n, bandwidth, latency):
    return 2 * bytes_ / bandwidth + 2 * (n - 1) * (min(BUCKET, bytes_) / bandwidth + latency)


def main():
    print("| model | link | all-reduce | " + " | ".join(f"N={n}" for n in NS) + " | best N |")
    print("|---|---|---|" + "---|" * len(NS) + "---|")
    for name, (p, compute_ms) in MODELS.items():
        for link, (bandwidth, latency) in LINKS.items():
            for algorithm, cost in (("ring", ring), ("xgrad chain", chain)):
                compute = compute_ms / 1e3
                step = {n: compute / n + cost(4 * p, n, bandwidth, latency) for n in range(1, 257)}
                best = min(range(2, 257), key=lambda n: step[n])
                cells = []
                for n in NS:
                    speedup = compute / step[n]
                    cells.append(f"{speedup:.1f}x" + ("" if speedup / n >= 0.5 else "*"))
                print(f"| {name} ({p / 1e6:.2f}M) | {link} | {algorithm} | " + " | ".join(cells) +
                      f" | {best} ({compute / step[best]:.1f}x) |")
    print("\nSpeed-up over one machine; * marks efficiency below 50%. Best N: the job size with the"
          " shortest step (up to 256).")


if __name__ == "__main__":
    main()
