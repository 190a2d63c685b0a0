#!/usr/bin/python3
"""Bits per byte of the char recipe against the same model on subword tokens, in the same
training time (docs/language-model.md, "Subword tokens").

The char recipe (xgrad-train --task lm: 4 layers, 4 heads, d-model 128, 12 windows of 64
tokens, its 2000 steps) learns the KJV's bytes. For each vocabulary size asked, the text is
tokenized (xgrad-tokenize: a vocabulary learnt on the training part, the last tenth the
validation split, as the char recipe's) and the same recipe learns its shards, with as many
steps as fit in the char run's training time (its ms per step measured by a short run
first). Both report validation bits per byte (the summed loss of the evaluation windows'
targets over the bytes they decode to); the script prints them, the training times, and a
sample of each model. Run on an idle machine: the step counts follow the measured speed.

    bench/subword_vs_char.py [--text data/kjv.txt] [--vocab 8192 2048] [--build build] [--out DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train(build, args, metrics):
    subprocess.run([os.path.join(build, "bin", "xgrad-train"), "--task", "lm", "--metrics", metrics, "--quiet"] + args,
                   check=True, stdout=subprocess.DEVNULL)
    return [json.loads(line) for line in open(metrics)]


def sample(build, checkpoint, tokens):
    out = subprocess.run([os.path.join(build, "bin", "xgrad-generate"), "--checkpoint", checkpoint, "--prompt",
                          "And God said", "--tokens", str(tokens), "--seed", "2"],
                         check=True, capture_output=True)
    return out.stdout.decode("utf-8", "replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", default=os.path.join(ROOT, "data", "kjv.txt"))
    parser.add_argument("--vocab", type=int, nargs="+", default=[8192, 2048])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=None, help="keep the shards and checkpoints here")
    a = parser.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="xgrad-subword-")
    os.makedirs(out, exist_ok=True)

    char = train(a.build, ["--text", a.text, "--save", os.path.join(out, "char.st")], os.path.join(out, "char.jsonl"))
    budget = char[-1]["train_s"]
    results = [("bytes (char recipe)", char[-1]["steps"], char[-1], sample(a.build, os.path.join(out, "char.st"), 400))]
    for vocab in a.vocab:
        shards = os.path.join(out, f"kjv-{vocab}")
        if not os.path.isdir(shards):
            subprocess.run([os.path.join(a.build, "bin", "xgrad-tokenize"), "--text", a.text, "--out", shards,
                            "--vocab-size", str(vocab)], check=True, stdout=subprocess.DEVNULL)
        probe = train(a.build, ["--data", shards, "--steps", "40", "--eval-every", "40", "--eval-batches", "1"],
                      os.path.join(out, f"probe-{vocab}.jsonl"))
        steps = int(budget / (probe[-1]["ms_per_step"] / 1e3))
        checkpoint = os.path.join(out, f"subword-{vocab}.st")
        lines = train(a.build, ["--data", shards, "--steps", str(steps), "--eval-every", str(max(steps // 8, 1)),
                                "--save", checkpoint], os.path.join(out, f"subword-{vocab}.jsonl"))
        results.append((f"{vocab} BPE tokens", steps, lines[-1], sample(a.build, checkpoint, 100)))

    print(f"same training time: {budget:.1f} s (the char recipe's {char[-1]['steps']} steps)\n")
    print("| tokens | steps | training s | val loss (nats/token) | val bits per byte |")
    print("|---|---|---|---|---|")
    for name, steps, last, _ in results:
        print(f"| {name} | {steps} | {last['train_s']:.1f} | {last['val_loss']:.4f} | {last['val_bits_per_byte']:.4f} |")
    for name, _, _, text in results:
        print(f"\n{name}:\n{text}")
    print(f"\n(files in {out})", file=sys.stderr)


if __name__ == "__main__":
    main()
