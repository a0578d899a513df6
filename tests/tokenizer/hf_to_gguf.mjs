// Writes a vocabulary-only GGUF (tokenizer.* metadata, no tensors) from a Hugging
// Face tokenizer.json, the way llama.cpp's convert_hf_to_gguf.py lays out a
// byte-level BPE vocabulary: tokens by id (gaps become "[PAD<id>]"), token types
// (added special tokens are control, other added tokens user-defined), merges as
// "left right", and the pre-tokenizer name llama.cpp would record.
//
//   import {writeVocabGGUF} from "./hf_to_gguf.mjs";
//   writeVocabGGUF(tokenizerJSON, tokenizerConfig, "llama-bpe", "out.gguf");
import fs from "node:fs";

const T = {U32: 4, I32: 5, BOOL: 7, STRING: 8, ARRAY: 9};

class Writer {
  constructor() { this.chunks = []; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.chunks.push(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v | 0); this.chunks.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.chunks.push(b); }
  u8(v) { this.chunks.push(Buffer.from([v])); }
  str(s) { const b = Buffer.from(s, "utf8"); this.u64(b.length); this.chunks.push(b); }
  bytes() { return Buffer.concat(this.chunks); }
}

export function writeVocabGGUF(tokenizerJSON, tokenizerConfig, pre, outPath) {
  const model = tokenizerJSON.model;
  if (model.type !== "BPE") throw new Error(`unsupported model type ${model.type}`);
  const byId = new Map();
  for (const [text, id] of Object.entries(model.vocab)) byId.set(id, {text, type: 1});
  for (const t of tokenizerJSON.added_tokens ?? []) byId.set(t.id, {text: t.content, type: t.special ? 3 : 4});
  let n = 0;
  for (const id of byId.keys()) n = Math.max(n, id + 1);
  const tokens = [], types = [];
  for (let i = 0; i < n; ++i) {
    const t = byId.get(i) ?? {text: `[PAD${i}]`, type: 5};
    tokens.push(t.text);
    types.push(t.type);
  }
  const merges = (model.merges ?? []).map(m => (Array.isArray(m) ? m.join(" ") : m));
  const idOf = name => {
    const s = typeof name === "string" ? name : name?.content;
    if (s === undefined) return undefined;
    const i = tokens.indexOf(s);
    return i >= 0 ? i : undefined;
  };

  const kv = [];
  kv.push(["general.architecture", T.STRING, "llama"]);
  kv.push(["tokenizer.ggml.model", T.STRING, "gpt2"]);
  kv.push(["tokenizer.ggml.pre", T.STRING, pre]);
  kv.push(["tokenizer.ggml.tokens", T.ARRAY, [T.STRING, tokens]]);
  kv.push(["tokenizer.ggml.token_type", T.ARRAY, [T.I32, types]]);
  kv.push(["tokenizer.ggml.merges", T.ARRAY, [T.STRING, merges]]);
  const bos = idOf(tokenizerConfig?.bos_token), eos = idOf(tokenizerConfig?.eos_token);
  if (bos !== undefined) kv.push(["tokenizer.ggml.bos_token_id", T.U32, bos]);
  if (eos !== undefined) kv.push(["tokenizer.ggml.eos_token_id", T.U32, eos]);

  const w = new Writer();
  w.chunks.push(Buffer.from("GGUF"));
  w.u32(3);          // version
  w.u64(0);          // tensors
  w.u64(kv.length);  // metadata entries
  for (const [key, type, value] of kv) {
    w.str(key);
    w.u32(type);
    if (type === T.STRING) w.str(value);
    else if (type === T.U32) w.u32(value);
    else if (type === T.ARRAY) {
      const [elem, items] = value;
      w.u32(elem);
      w.u64(items.length);
      for (const it of items) (elem === T.STRING ? w.str(it) : w.i32(it));
    }
  }
  let out = w.bytes();
  const pad = (32 - (out.length % 32)) % 32;  // data section alignment
  out = Buffer.concat([out, Buffer.alloc(pad)]);
  fs.writeFileSync(outPath, out);
  return {n_tokens: n, n_merges: merges.length};
}
