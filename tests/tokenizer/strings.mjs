// Random and adversarial test strings for the tokenizer comparisons (compare_hf.mjs,
// compare_hf_files.mjs): mixed scripts, emoji, whitespace runs, digits, code, English
// contractions, and the model's special tokens, from a seeded generator.
export function mulberry32(a) {
  return () => {
    a |= 0; a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const POOLS = [
  "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
  " \t\n\r\v\f", "\u00a0\u1680\u2000\u2003\u200a\u2028\u2029\u202f\u205f\u3000\u0085",
  "àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿŁłŒœŠšŸŽžǅǈ", "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΆΈΉ", "абвгдежзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖ",
  "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里",
  "あいうえおかきくけこアイウエオカキクケコーッ々〇", "가나다라마바사아자차카타파하한국어ㄱㄴㄷㅏㅑ", "ابتثجحخدذرزسشصضطظعغفقكلمنهوي٠١٢٣",
  "कखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसह्ािीुूृेैोौंः", "กขคงจฉชซญดตถทธนบปผพฟภมยรลวศษสหอฮะัาำิีึืุู็่้๊๋์",
  "\u0300\u0301\u0302\u0303\u0308\u030a\u0327\u20dd", "²³¹¼½¾ⅠⅡⅢⅣ①②③０１２３٤٥߀৪௫", "€£¥©®°±×÷←→∀∂∃∅∇∈∑−√∞≈≠≤≥■□▲○●★☆♠♣♥♦♪✓✗",
  "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩👍🏽🔥💯", "，。、；：？！“”‘’（）【】《》「」『』…—～·", "ＡＢＣａｂｃ！？＃＄％＆",
  "\u200b\u200c\u200d\ufeff\u2060\u00ad\ufffd",
];
const WORDS = ["the", "The", "it's", "I'm", "we'll", "they're", "you've", "he'd", "SHE'S", "DON'T", "'s", "'t", "'re",
  "'ll", "'D", "Hello", " world", "tokenizer", "http://example.com/a?b=c&d=e", "foo_bar", "fooBar", "XMLHttpRequest",
  "ÉCOLE", "École", "straße", "ΑΘΗΝΑ", "Москва", "iPhone", "McDonald's", "3.14159", "1,234,567", "0x1F", "2024-05-01",
  "$100", "C++", "->", "...", "!!!", "__init__", "#include", "<div>", "    ", "\n\n", "\r\n", "\t\t", "  \n  ", "\u3000\u3000"];

export function makeStrings(rnd, n, specials) {
  const pick = arr => arr[Math.floor(rnd() * arr.length)];
  const out = [];
  for (let i = 0; i < n; ++i) {
    let s = "";
    const k = 1 + Math.floor(rnd() * 12);
    for (let j = 0; j < k; ++j) {
      const r = rnd();
      if (r < 0.3) s += pick(WORDS);
      else if (r < 0.34 && specials.length) s += (rnd() < 0.3 ? " " : "") + pick(specials) + (rnd() < 0.3 ? " " : "");
      else if (r < 0.37) s += pick([" ", "\n", "a", "1", "!", "\u3000", "中", "\t"]).repeat(2 + Math.floor(rnd() * 60));
      else {
        const pool = Array.from(pick(POOLS));
        const m = 1 + Math.floor(rnd() * 7);
        for (let q = 0; q < m; ++q) s += pick(pool);
      }
    }
    if (rnd() < 0.3) s = " " + s;
    out.push(s || "x");
  }
  return out;
}
