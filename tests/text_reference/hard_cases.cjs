// The hard cases of GPT-2's encoding (docs/text.md): texts that hold every class of
// character GPT-2's pre-tokenizer treats apart, in every arrangement that has broken an
// implementation. The same corpus on every run (a seeded generator). Each case is
// {group, text, special}: special "none" (special tokens' texts read as ordinary text) or
// "all" (every special token allowed). Used by text_reference/compare.cjs (tiktoken) and
// export_reference/gguf_check.mjs (llama.cpp's tokenizer).
'use strict';

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

module.exports = {hardCases};
