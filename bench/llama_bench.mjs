// llama.cpp's speed on a GGUF, measured through node-llama-cpp the way llama-bench
// measures: pp = one batch of N prompt tokens from an empty context; tg = N tokens
// evaluated one at a time (teacher-forced random ids, since random-weight models
// loop when generating freely). Prints one JSON line per test:
//   {"engine":"llama.cpp","test":"pp","n":64,"tokens_per_second":...,"seconds":...}
// usage: node bench/llama_bench.mjs --model M.gguf [-p 64] [-n 32] [-r 3] [-t THREADS] [--no-mmap]
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const model = opt("--model");
const nP = +opt("-p", 64), nG = +opt("-n", 32), reps = +opt("-r", 3), threads = +opt("-t", 2);
const useMmap = !args.includes("--no-mmap");
if (!model) { process.stderr.write("usage: llama_bench.mjs --model M.gguf [-p N] [-n N] [-r N] [-t N]\n"); process.exit(2); }

let nlc;
for (const dir of [process.env.DELTAFIN_ORACLE_DIR, path.join(REPO, "build", "oracle")].filter(Boolean)) {
  const entry = path.join(dir, "node_modules", "node-llama-cpp", "dist", "index.js");
  if (fs.existsSync(entry)) { nlc = await import(pathToFileURL(entry).href); break; }
}
if (!nlc) { process.stderr.write("llama_bench: node-llama-cpp not installed (scripts/install-oracle)\n"); process.exit(3); }

const llama = await nlc.getLlama({gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
  progressLogs: false, maxThreads: threads, logLevel: nlc.LlamaLogLevel.error});
const m = await llama.loadModel({modelPath: path.resolve(model), gpuLayers: 0, useMmap, ignoreMemorySafetyChecks: true});
const embd = (m.fileInfo.tensorInfo ?? []).find(t => t.name === "token_embd.weight");
const nVocab = embd ? Number(embd.dimensions[1]) : 256;
let seed = 12345;
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed; };
const ids = (n) => Array.from({length: n}, () => rnd() % Math.min(Number(nVocab), 30000));
const noShift = {contextShift: {size: 0, strategy: () => { throw new Error("context overflow"); }}};
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const ctx = await m.createContext({contextSize: Math.max(nP + nG + 16, 256), batchSize: Math.max(nP, 1), sequences: 1,
  flashAttention: false, threads: {ideal: threads, min: threads}, ignoreMemorySafetyChecks: true});
const seq = ctx.getSequence();
const last = {generateNext: {logits: {filter: {tokens: [], includeTop: 1}}}};
for (const test of ["pp", "tg"]) {
  const n = test === "pp" ? nP : nG;
  if (n <= 0) continue;
  const times = [];
  for (let r = 0; r < reps + 1; ++r) {  // the first repetition warms up
    await seq.clearHistory();
    const toks = ids(n);
    const t0 = process.hrtime.bigint();
    if (test === "pp") {
      await seq.controlledEvaluate(toks.map((t, i) => i === n - 1 ? [t, last] : t), noShift);
    } else {
      // Each token is its own decode (as llama-bench tg); the logits stay in llama.cpp.
      for (const t of toks) await seq.controlledEvaluate([t], noShift);
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (r > 0) times.push(s);
  }
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  out({engine: "llama.cpp", test, n, threads, reps, seconds: mean, tokens_per_second: n / mean});
}
await llama.dispose();
