#!/usr/bin/env node
// llama.cpp reference ("oracle") for deltafin tests.
//
// Runs a GGUF model through llama.cpp (the prebuilt CPU binary of the npm
// package node-llama-cpp 3.22.1, installed by scripts/install-oracle) and
// prints what llama.cpp computes, as JSON lines on stdout.  Logs go to stderr.
//
//   node llama_ref.mjs --model M.gguf --ids 1,2,3 [--top K] [--mode batch|single] [--lse]
//       one line per position i:  {"pos":i,"top":[[id,logit],...]}
//       the top-K RAW logits (llama_get_logits_ith, nothing applied) of the
//       next-token distribution after ids[0..i], highest first; default K 10,
//       --top 0 = the whole vocab.  NaN/inf logits print as null.
//       --lse adds "lse": log(sum(exp(logit))) over the whole vocab.
//       batch:  the whole sequence in one llama_decode (one ubatch), logits
//               requested for every token (teacher forcing).
//       single: one llama_decode per token (the decode path).
//   node llama_ref.mjs --model M.gguf --ids 1,2,3 --greedy N [--stop-eog]
//       {"ids":[...]}: N tokens generated greedily (argmax, lowest id wins a
//       tie) after the prompt ids; the prompt is decoded in one batch, the
//       generated tokens one by one.  EOS/EOG do not stop generation unless
//       --stop-eog (the EOG token is then the last one printed).
//   node llama_ref.mjs --model M.gguf --tokenize TEXT [--no-special] [--no-add-special]
//       {"ids":[...]}: llama.cpp's tokenization, parsing special tokens in the
//       text (unless --no-special) and adding BOS/EOS as the model's metadata
//       says (tokenizer.ggml.add_bos_token / add_eos_token), unless --no-add-special.
//   node llama_ref.mjs --model M.gguf --tokenize-json FILE|- [--no-special] [--no-add-special]
//       the same for each string of a JSON array (in FILE, or on stdin for -),
//       one {"ids":[...]} line per string, in order.  Both tokenize modes load
//       the vocabulary only: tokenizer-only GGUFs work too.
//   node llama_ref.mjs --model M.gguf --info
//       one JSON object: what llama.cpp reports about the model.
//
// Other options: --ctx N (context size; default: just what the tokens need),
// --threads N (CPU threads, default 1, 0 = all; on the tiny test models the
// logits were bit-identical for 1 and 2 threads),
// --kv f16|f32 (KV cache type; llama.cpp's default is f16, f32 is exact),
// --oracle-dir DIR (where scripts/install-oracle put node-llama-cpp; default
// $DELTAFIN_ORACLE_DIR, else <repo>/build/oracle, else plain node resolution),
// --verbose (llama.cpp info logs on stderr).
// Exit status: 0 ok, 1 llama.cpp failed (load/decode), 2 usage error,
// 3 node-llama-cpp not installed.
//
// Everything runs on the CPU (gpu: false), offline (no download, no build),
// flash attention off, with a fixed thread count: repeated runs give
// bit-identical output.

import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import {fileURLToPath, pathToFileURL} from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");

function usage(msg) {
    if (msg) process.stderr.write(`llama_ref: ${msg}\n`);
    process.stderr.write(
        "usage: node llama_ref.mjs --model M.gguf (--ids 1,2,3 [--top K] [--mode batch|single] [--greedy N [--stop-eog]]\n" +
        "                                        | (--tokenize TEXT | --tokenize-json FILE|-) [--no-special] [--no-add-special]\n" +
        "                                        | --info)\n" +
        "       [--ctx N] [--threads N] [--kv f16|f32] [--lse] [--oracle-dir DIR] [--verbose]\n");
    process.exit(2);
}

function parseArgs(argv) {
    const flags = new Set(["info", "lse", "stop-eog", "no-special", "no-add-special", "verbose", "help"]);
    const valued = new Set(["model", "ids", "top", "mode", "greedy", "ctx", "threads", "kv", "tokenize", "tokenize-json",
                            "oracle-dir"]);
    const o = {};
    for (let i = 0; i < argv.length; i++) {
        let a = argv[i];
        if (!a.startsWith("--")) usage(`unexpected argument '${a}'`);
        a = a.slice(2);
        let v;
        const eq = a.indexOf("=");
        if (eq >= 0) { v = a.slice(eq + 1); a = a.slice(0, eq); }
        if (flags.has(a)) {
            if (v !== undefined) usage(`--${a} takes no value`);
            o[a] = true;
        } else if (valued.has(a)) {
            if (v === undefined) {
                if (i + 1 >= argv.length) usage(`--${a} needs a value`);
                v = argv[++i];
            }
            o[a] = v;
        } else usage(`unknown option --${a}`);
    }
    return o;
}

function intArg(o, name, def, min = 0) {
    if (o[name] === undefined) return def;
    const s = String(o[name]).trim();
    if (!/^\d+$/.test(s)) usage(`--${name} must be a non-negative integer, got '${o[name]}'`);
    const n = Number(s);
    if (n < min) usage(`--${name} must be >= ${min}`);
    return n;
}

function parseIds(s) {
    const parts = String(s).split(/[\s,]+/).filter(x => x !== "");
    if (parts.length === 0) usage("--ids is empty");
    return parts.map(p => {
        if (!/^\d+$/.test(p)) usage(`bad token id '${p}' in --ids`);
        return Number(p);
    });
}

async function importNodeLlamaCpp(oracleDir) {
    const candidates = [];
    if (oracleDir) candidates.push(oracleDir);
    if (process.env.DELTAFIN_ORACLE_DIR) candidates.push(process.env.DELTAFIN_ORACLE_DIR);
    candidates.push(path.join(REPO, "build", "oracle"));
    for (const dir of candidates) {
        const entry = path.join(dir, "node_modules", "node-llama-cpp", "dist", "index.js");
        if (fs.existsSync(entry)) return await import(pathToFileURL(entry).href);
    }
    try {
        return await import("node-llama-cpp");
    } catch {
        process.stderr.write(
            `llama_ref: node-llama-cpp not found (looked in: ${candidates.join(", ")}, and node's module path).\n` +
            `llama_ref: install it with: ${path.join(REPO, "scripts", "install-oracle")} [DIR]\n`);
        process.exit(3);
    }
}

const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// llama.cpp's log lines reach JS asynchronously: let them arrive before exiting.
async function fail(msg, code = 1) {
    await new Promise(r => setTimeout(r, 200));
    process.stderr.write(`llama_ref: ${msg}\n`);
    process.exit(code);
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    if (o.help) usage();
    if (!o.model) usage("--model is required");
    const modes = ["info", "tokenize", "tokenize-json", "ids"].filter(k => o[k] !== undefined);
    if (modes.length !== 1) usage("give exactly one of --ids, --tokenize, --tokenize-json, --info");
    let texts;
    if (o["tokenize-json"] !== undefined) {
        try {
            texts = JSON.parse(fs.readFileSync(o["tokenize-json"] === "-" ? 0 : o["tokenize-json"], "utf8"));
        } catch (e) {
            usage(`--tokenize-json: cannot read a JSON array of strings: ${e.message}`);
        }
        if (!Array.isArray(texts) || texts.some(t => typeof t !== "string"))
            usage("--tokenize-json: the file must hold a JSON array of strings");
    } else if (o.tokenize !== undefined) texts = [o.tokenize];
    if (!fs.existsSync(o.model)) usage(`model file not found: ${o.model}`);
    const mode = o.mode ?? "batch";
    if (mode !== "batch" && mode !== "single") usage(`--mode must be batch or single, got '${mode}'`);
    const kv = (o.kv ?? "f16").toLowerCase();
    if (kv !== "f16" && kv !== "f32") usage(`--kv must be f16 or f32, got '${o.kv}'`);
    const topK = intArg(o, "top", 10);
    const greedy = o.greedy !== undefined ? intArg(o, "greedy", 0) : undefined;
    const ids = o.ids !== undefined ? parseIds(o.ids) : undefined;

    const nlc = await importNodeLlamaCpp(o["oracle-dir"]);
    const {getLlama, LlamaLogLevel, LlamaModel, LlamaVocabularyType} = nlc;
    // node-llama-cpp's loadModel() test-tokenizes a string (LlamaModel.getWarnings);
    // for a GGUF without a tokenizer (tokenizer.ggml.model = "none") that hits a
    // GGML_ASSERT in llama.cpp and aborts the process.  Make it a JS error instead
    // (getWarnings catches it).  The instance binds tokenize() in its constructor,
    // so patching the prototype before loadModel() is enough.
    const origTokenize = LlamaModel.prototype.tokenize;
    LlamaModel.prototype.tokenize = function (text, ...rest) {
        if (this.vocabularyType === LlamaVocabularyType.none && text !== "" && rest[0] !== "builtin")
            throw new Error("this model has no tokenizer (tokenizer.ggml.model = none)");
        return origTokenize.call(this, text, ...rest);
    };
    // Default 1 thread: the logits did not depend on the thread count in our checks, and ggml's
    // spinning thread barrier makes the one-token decodes (--mode single, --greedy)
    // 3x-60x slower when the CPUs are shared (parallel ctest, builds).
    // --threads 0 = all CPUs.
    const threads = o.threads === undefined ? 1
        : (intArg(o, "threads", 0) || Math.max(1, os.availableParallelism?.() ?? os.cpus().length));

    // While loading, node-llama-cpp first "simulates" the load (a no-alloc llama.cpp
    // load, to estimate memory); on a tokenizer-only GGUF that logs errors although
    // the real (vocab-only) load then succeeds.  So hold the log lines of the load
    // back: all of them are shown if it fails, only the non-error ones if it works.
    let heldLogs = [];
    const logger = (level, message) => {
        const m = String(message).replace(/\n$/, "");
        if (!m.length) return;
        if (heldLogs) heldLogs.push([level, m]);
        else process.stderr.write(`[llama.cpp ${level}] ${m}\n`);
    };
    const releaseLogs = (all) => {
        for (const [level, m] of heldLogs ?? [])
            if (all || (level !== "error" && !m.startsWith("Failed simulating model resource usage")))
                process.stderr.write(`[llama.cpp ${level}] ${m}\n`);
        heldLogs = null;
    };
    const llama = await getLlama({
        gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
        progressLogs: false, maxThreads: threads,
        logLevel: o.verbose ? LlamaLogLevel.info : LlamaLogLevel.warn, logger
    });

    let model;
    try {
        // --tokenize loads the vocabulary only, so it also works on tokenizer-only
        // GGUFs (like llama.cpp's ggml-vocab-*.gguf) and skips the weights.
        model = await llama.loadModel({
            modelPath: path.resolve(o.model), gpuLayers: 0, useMmap: true,
            vocabOnly: texts !== undefined, ignoreMemorySafetyChecks: true
        });
    } catch (e) {
        await new Promise(r => setTimeout(r, 200));
        releaseLogs(true);
        await fail(`llama.cpp failed to load ${o.model}: ${e?.message ?? e}`);
    }
    releaseLogs(false);

    if (texts !== undefined) {
        // model.tokenize() is common_tokenize(vocab, text, add_special=false, parse_special);
        // add BOS/EOS ourselves the way llama_tokenize(add_special=true) does
        // (llama_vocab_get_add_bos/eos directly: node-llama-cpp's shouldAppendEosToken
        // also requires a BOS token).
        const parseSpecial = !o["no-special"];
        if (model.vocabularyType === LlamaVocabularyType.none)
            await fail("this model has no tokenizer (tokenizer.ggml.model = none)");
        const addBos = !o["no-add-special"] && model._model.shouldPrependBosToken() && model.tokens.bos != null;
        const addEos = !o["no-add-special"] && model._model.shouldAppendEosToken() && model.tokens.eos != null;
        for (const text of texts) {
            let toks = Array.from(model.tokenize(text, parseSpecial));
            if (addBos) toks = [model.tokens.bos, ...toks];
            if (addEos) toks = [...toks, model.tokens.eos];
            out({ids: toks});
        }
        await llama.dispose();
        return;
    }

    const nTokens = ids ? ids.length + (greedy ?? 0) : 1;
    const ctxSize = intArg(o, "ctx", 0) || Math.max(nTokens, 16);
    if (nTokens > ctxSize) usage(`${nTokens} tokens do not fit --ctx ${ctxSize}`);
    const batchSize = (ids && (mode === "batch" || greedy !== undefined)) ? Math.max(ids.length, 1) : 1;
    let context;
    try {
        context = await model.createContext({
            contextSize: ctxSize, batchSize, sequences: 1,
            flashAttention: false, threads: {ideal: threads, min: threads},
            experimentalKvCacheKeyType: kv.toUpperCase(), experimentalKvCacheValueType: kv.toUpperCase(),
            ignoreMemorySafetyChecks: true
        });
    } catch (e) {
        await fail(`llama.cpp failed to create a context: ${e?.message ?? e}`);
    }
    const seq = context.getSequence();
    // A context shift would silently drop the first tokens: never allow one.
    const noShift = {contextShift: {size: 0, strategy: () => { throw new Error("context overflow"); }}};

    let nVocab;
    const logitsOpt = (k) => ({logits: k === 0 ? true : {filter: {tokens: [], includeTop: k}},
                                totalLogitWeight: !!o.lse});
    const rec = (pos, next) => {
        const top = [...next.logits.entries()].map(([t, l]) => [t, l]);
        const r = {pos, top};
        if (o.lse) r.lse = top.length ? top[0][1] + Math.log(next.totalLogitWeight) : null;
        return r;
    };

    if (o.info) {
        // One decode of token 0 with all logits: llama.cpp's own vocab size
        // (llama_vocab_n_tokens) and a check that the graph computes.
        const [res] = await seq.controlledEvaluate([[0, {generateNext: {logits: true}}]], noShift);
        nVocab = res?.next?.logits?.size;
        let finite = 0;
        for (const v of res.next.logits.values()) if (Number.isFinite(v)) finite++;
        const md = model.fileInfo.metadata;
        const desc = model.typeDescription;
        out({
            architecture: desc.split(" ")[0],
            gguf_architecture: md?.general?.architecture ?? null,
            desc,
            n_params: model._model.getTotalParameters(),
            size_bytes: model.size,
            n_vocab: nVocab,
            n_vocab_finite_logits_tok0: finite,
            n_gguf_tokens: md?.tokenizer?.ggml?.tokens?.length ?? null,
            vocab_type: model.vocabularyType,
            n_embd: model.embeddingVectorSize,
            n_ctx_train: model.trainContextSize,
            bos: model.tokens.bos, eos: model.tokens.eos, eot: model.tokens.eot,
            add_bos: model._model.shouldPrependBosToken(), add_eos: model._model.shouldAppendEosToken(),
            llama_cpp_release: llama.llamaCppRelease?.release ?? null,
            threads
        });
        await llama.dispose();
        return;
    }

    if (greedy !== undefined) {
        const gen = [];
        const nextOpt = {generateNext: {token: true, options: {temperature: 0}}};
        const stopEog = !!o["stop-eog"];
        let res = await seq.controlledEvaluate(ids.map((t, i) => i === ids.length - 1 ? [t, nextOpt] : t), noShift);
        for (let k = 0; k < greedy; k++) {
            const tok = res[res.length - 1]?.next?.token;
            if (tok == null) throw new Error(`no token sampled at step ${k}`);
            gen.push(tok);
            if (stopEog && model.isEogToken(tok)) break;
            if (k + 1 < greedy) res = await seq.controlledEvaluate([[tok, nextOpt]], noShift);
        }
        out({ids: gen});
        await llama.dispose();
        return;
    }

    if (mode === "batch") {
        const res = await seq.controlledEvaluate(ids.map(t => [t, {generateNext: logitsOpt(topK)}]), noShift);
        for (let i = 0; i < ids.length; i++) {
            if (!res[i]?.next?.logits) throw new Error(`no logits for position ${i}`);
            out(rec(i, res[i].next));
        }
    } else {
        for (let i = 0; i < ids.length; i++) {
            const [r] = await seq.controlledEvaluate([[ids[i], {generateNext: logitsOpt(topK)}]], noShift);
            if (!r?.next?.logits) throw new Error(`no logits for position ${i}`);
            out(rec(i, r.next));
        }
    }
    await llama.dispose();
}

main().catch((e) => fail(`error: ${e?.stack ?? e}`));
