// xgrad's GGUF files held to llama.cpp itself (node-llama-cpp's prebuilt CPU build):
//   usage: node gguf_check.mjs NPM_DIR MANIFEST.json
// The manifest (written by gguf_export_test.sh) lists
//   logits:    {name, gguf, family, type, layers, rows, xgrad, greedy?}: llama.cpp's logits at
//              every position of each row (rows.json: [[ids...], ...]) against xgrad's
//              (raw float32 [rows, T, vocab]), within bound() below, relative to the largest
//              |logit|; with greedy {prompt, expected}: llama.cpp's 32-token greedy
//              continuation of the prompt equals xgrad's.
//   tokenize:  {gguf, cases, xgrad}: llama.cpp's tokenization of each case (the hard cases
//              of text_reference/hard_cases.cjs) equals xgrad's (text_bpe_probe's ids).
//   quantized: {name, reference, quantized, windows}: the Q8_0 file's top-1 token equals the
//              F32 file's at >= 95% of the positions of the windows, its perplexity within 2%.
// Every file is also read by @huggingface/gguf, a second reader of the format: version 3,
// the architecture, a token per id, data and tensors aligned to 32 bytes.
// The contexts keep K and V in F32 (llama.cpp's default cache is F16, which alone moves
// logits by about 1e-4 of their range): what is tested is the file, not the cache.
import fs from 'fs';
import path from 'path';

const [npmDir, manifestPath] = process.argv.slice(2).map((arg) => path.resolve(arg));
const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
const {getLlama, LlamaLogLevel} = await import(path.join(npmDir, 'node_modules/node-llama-cpp/dist/index.js'));
const {gguf: readGguf} = await import(path.join(npmDir, 'node_modules/@huggingface/gguf/dist/index.mjs'));
const llama = await getLlama({gpu: false, build: 'never', skipDownload: true, logLevel: LlamaLogLevel.error});

let failures = 0;
const started = Date.now();
const seconds = () => ((Date.now() - started) / 1000).toFixed(1) + ' s';
function check(ok, message) {
  if (!ok) {
    failures++;
    console.log('FAILED: ' + message);
  }
  return ok;
}

// The largest difference the file may show, relative to the largest |logit|, derived from
// what llama.cpp rounds (u: the unit roundoff of a format, 2^-11 for F16, 2^-8 for BF16):
//   - float32 sums in another order: 1e-4 (the figure for F32);
//   - GPT-2's GELU goes through a table of F16 values indexed by the input rounded to F16:
//     each hidden value moves by at most (max gelu' + 1) u16 = 2.13 * 2^-11 of itself, once
//     per block;
//   - F16 and BF16 weights: ggml rounds both operands of every product to the weights'
//     format (2 u per product); the deepest path goes through 4 products a block (q/k/v,
//     output, up, down) and the head.
// First order, assuming no layer amplifies a relative error: the measured differences
// (printed) sit one to two orders below.
function bound({family, type, layers}) {
  const f16 = 2 ** -11, unit = {f32: 0, f16, bf16: 2 ** -8}[type];
  const gelu = family === 'gpt2' ? layers * 2.13 * f16 : 0;
  return 1e-4 + gelu + 2 * unit * (4 * layers + 1);
}

const readFloats = (file) => {
  const bytes = fs.readFileSync(file);
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
};
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
// node-llama-cpp's logits are a Map from token to logit, sorted by logit.
const dense = (logits) => Float32Array.from({length: logits.size}, (_, v) => logits.get(v));
const argmax = (values) => values.reduce((best, v, i) => (v > values[best] ? i : best), 0);

const models = new Map();
async function load(gguf) {
  if (!models.has(gguf)) models.set(gguf, await llama.loadModel({modelPath: gguf}));
  return models.get(gguf);
}
// A context longer than the tokens: node-llama-cpp shifts a full context (drops its first
// tokens) before it evaluates the last one. One thread: its default takes more threads than
// this machine's 2 cores and spins them (265 ms a call for a tiny model, 1 ms on one).
async function withSequence(model, length, body) {
  const size = Math.max(length + 1, 32);
  const context = await model.createContext({contextSize: size, batchSize: size, threads: 1,
                                             flashAttention: false, experimentalKvCacheKeyType: 'F32',
                                             experimentalKvCacheValueType: 'F32'});
  try {
    return await body(context.getSequence());
  } finally {
    await context.dispose();
  }
}
// Every position's logits, as arrays of the model's vocabulary.
async function positionLogits(model, tokens) {
  return withSequence(model, tokens.length, async (sequence) => {
    const results = await sequence.controlledEvaluate(tokens.map((t) => [t, {generateNext: {logits: true}}]));
    return results.map((r) => dense(r.next.logits));
  });
}
// Greedy decoding: each next token the argmax of llama.cpp's logits, fed back through the
// cache (what sequence.evaluate with temperature 0 picks, with every step's logits at hand).
async function greedy(model, prompt, count) {
  return withSequence(model, prompt.length + count, async (sequence) => {
    const out = [];
    let step = prompt.map((t, i) => [t, i === prompt.length - 1 ? {generateNext: {logits: true}} : {}]);
    while (out.length < count) {
      const results = await sequence.controlledEvaluate(step);
      const next = argmax(dense(results[results.length - 1].next.logits));
      out.push(next);
      step = [[next, {generateNext: {logits: true}}]];
    }
    return out;
  });
}

async function secondReader(c, vocab) {
  const {metadata, tensorInfos, tensorDataOffset} = await readGguf(c.gguf, {allowLocalFile: true});
  check(metadata.version === 3 && metadata['general.architecture'] === c.family,
        `${c.name}: @huggingface/gguf reads version ${metadata.version}, ${metadata['general.architecture']}`);
  check(metadata['tokenizer.ggml.tokens'].length === vocab,
        `${c.name}: @huggingface/gguf reads ${metadata['tokenizer.ggml.tokens'].length} tokens, not ${vocab}`);
  check(tensorDataOffset % 32n === 0n && tensorInfos.every((t) => t.offset % 32n === 0n),
        `${c.name}: @huggingface/gguf finds data not aligned to 32 bytes`);
}

for (const c of manifest.logits ?? []) {
  const model = await load(c.gguf);
  const rows = readJson(c.rows), ours = readFloats(c.xgrad);
  const vocab = ours.length / (rows.length * rows[0].length);
  await secondReader(c, vocab);
  let worst = 0, largest = 0;
  for (const [r, row] of rows.entries()) {
    const theirs = await positionLogits(model, row);
    check(theirs.every((logits) => logits.length === vocab), `${c.name}: llama.cpp has ${theirs[0].length} logits, ` +
          `xgrad ${vocab}`);
    theirs.forEach((logits, t) => logits.forEach((value, v) => {
      const mine = ours[(r * row.length + t) * vocab + v];
      worst = Math.max(worst, Math.abs(value - mine));
      largest = Math.max(largest, Math.abs(mine));
    }));
  }
  const relative = worst / Math.max(largest, 1e-30), limit = bound(c);
  check(relative <= limit, `${c.name}: llama.cpp's logits differ by ${relative.toExponential(2)} of the largest ` +
        `|logit| (${largest.toFixed(2)}), over the bound ${limit.toExponential(2)}`);
  let said = `${c.name.padEnd(34)} logits within ${relative.toExponential(2)} (bound ${limit.toExponential(2)})`;
  if (c.greedy) {
    const expected = readJson(c.greedy.expected), got = await greedy(model, c.greedy.prompt, expected.length);
    const same = check(got.length === expected.length && got.every((t, i) => t === expected[i]),
                       `${c.name}: llama.cpp continues greedily with ${got.join(' ')}, xgrad with ${expected.join(' ')}`);
    said += same ? `; greedy ${expected.length} tokens the same` : '';
  }
  console.log(said + ` (${seconds()})`);
}

for (const c of manifest.tokenize ?? []) {
  const model = await load(c.gguf);
  const cases = readJson(c.cases), ours = readJson(c.xgrad);
  const groups = new Map();
  cases.forEach((tokenCase, i) => {
    const theirs = Array.from(model.tokenize(tokenCase.text, tokenCase.special === 'all'));
    const same = check(theirs.length === ours[i].ids.length && theirs.every((t, k) => t === ours[i].ids[k]),
                       `tokenization of ${JSON.stringify(tokenCase.text.slice(0, 60))} (${tokenCase.group}): ` +
                       `llama.cpp ${theirs.slice(0, 20).join(' ')}..., xgrad ${ours[i].ids.slice(0, 20).join(' ')}...`);
    const stats = groups.get(tokenCase.group) ?? {cases: 0, same: 0};
    groups.set(tokenCase.group, stats);
    stats.cases++;
    if (same) stats.same++;
  });
  const total = [...groups.values()].reduce((sum, s) => sum + s.cases, 0);
  const same = [...groups.values()].reduce((sum, s) => sum + s.same, 0);
  console.log(`tokenization (${path.basename(c.gguf)}): ${same} of ${total} cases as xgrad's, in ${groups.size} groups`);
}

for (const c of manifest.quantized ?? []) {
  const reference = await load(c.reference), quantized = await load(c.quantized);
  let positions = 0, agree = 0, referenceNll = 0, quantizedNll = 0;
  const nll = (logits, target) => {
    const top = Math.max(...logits);
    return Math.log(logits.reduce((sum, v) => sum + Math.exp(v - top), 0)) + top - logits[target];
  };
  for (const window of readJson(c.windows)) {
    const inputs = window.slice(0, -1);
    const [a, b] = [await positionLogits(reference, inputs), await positionLogits(quantized, inputs)];
    a.forEach((logits, t) => {
      positions++;
      if (argmax(logits) === argmax(b[t])) agree++;
      referenceNll += nll(logits, window[t + 1]);
      quantizedNll += nll(b[t], window[t + 1]);
    });
  }
  const share = agree / positions;
  const [pplF32, pplQ8] = [Math.exp(referenceNll / positions), Math.exp(quantizedNll / positions)];
  const change = Math.abs(pplQ8 / pplF32 - 1);
  check(share >= 0.95, `${c.name}: Q8_0's top-1 token is F32's at ${(100 * share).toFixed(1)}% of positions (< 95%)`);
  check(change <= 0.02, `${c.name}: Q8_0's perplexity ${pplQ8.toFixed(3)} is ${(100 * change).toFixed(2)}% from ` +
        `F32's ${pplF32.toFixed(3)} (> 2%)`);
  console.log(`${c.name}: Q8_0 top-1 as F32's at ${(100 * share).toFixed(1)}% of ${positions} positions; ` +
              `perplexity ${pplQ8.toFixed(3)} against ${pplF32.toFixed(3)} (${(100 * change).toFixed(2)}%)`);
}

for (const model of models.values()) await model.dispose();
await llama.dispose();
console.log(failures ? `${failures} checks failed` : 'every check passed');
process.exit(failures ? 1 : 0);
