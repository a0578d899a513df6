// Reference renderer for chat-template goldens: the Hugging Face JS Jinja engine
// (npm @huggingface/jinja), the renderer transformers.js uses.
//
//   JINJA_REF_DIR=/tmp/jref node render_ref.mjs <template.jinja> <conversations.json> <case> <gen|nogen>
//       renders one template x case to stdout; exit 2 with the error on stderr if the reference throws.
//   JINJA_REF_DIR=/tmp/jref node render_ref.mjs --all <templates_dir> <conversations.json> <out_dir>
//       writes <out_dir>/<template>.<case>.<gen|nogen>.txt for every pair, or .error.txt
//       (the reference's error message) where the reference throws.
//   JINJA_REF_DIR=/tmp/jref node render_ref.mjs --snippets <snippets.json> <conversations.json> <out.json>
//       renders each snippet {template, context} and writes {name: {output} | {error}}.
//
// JINJA_REF_DIR is a directory where `npm install @huggingface/jinja` was run.
// Run with TZ=UTC LANG=C (regen.sh does): strftime_now is pinned to conversations.json's "now".
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const refDir = process.env.JINJA_REF_DIR;
if (!refDir) {
  console.error("set JINJA_REF_DIR to the directory where @huggingface/jinja is installed");
  process.exit(1);
}
const { Template } = await import(
  pathToFileURL(path.join(refDir, "node_modules/@huggingface/jinja/dist/index.js")).href
);

function pinClock(iso) {
  const fixed = Date.parse(iso);
  const RealDate = Date;
  class FixedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(fixed);
      else super(...args);
    }
    static now() {
      return fixed;
    }
  }
  globalThis.Date = FixedDate;
}

// The render context, exactly as the C++ render_chat_template builds it.
function makeContext(conv, caseName, gen) {
  const c = conv.cases[caseName];
  if (!c) throw new Error(`unknown case ${caseName}`);
  const ctx = { messages: c.messages, add_generation_prompt: gen };
  if (c.tools !== null && c.tools !== undefined) ctx.tools = c.tools;
  return { ...ctx, ...(conv.context ?? {}), ...(c.extra ?? {}) };
}

function render(source, ctx) {
  // Deep-copy the context so one render cannot leak into the next.
  return new Template(source).render(JSON.parse(JSON.stringify(ctx)));
}

const args = process.argv.slice(2);
if (args[0] === "--snippets") {
  const [, snippetsPath, convPath, outPath] = args;
  const conv = JSON.parse(fs.readFileSync(convPath, "utf8"));
  pinClock(conv.now);
  const snippets = JSON.parse(fs.readFileSync(snippetsPath, "utf8"));
  const out = {};
  for (const [name, { template, context }] of Object.entries(snippets)) {
    try {
      out[name] = { output: render(template, context ?? {}) };
    } catch (e) {
      out[name] = { error: `${e?.message ?? e}` };
    }
  }
  fs.writeFileSync(outPath, JSON.stringify(out, null, 1) + "\n");
  console.log(`snippets: ${Object.keys(out).length}`);
} else if (args[0] === "--all") {
  const [, tmplDir, convPath, outDir] = args;
  const conv = JSON.parse(fs.readFileSync(convPath, "utf8"));
  pinClock(conv.now);
  fs.mkdirSync(outDir, { recursive: true });
  let ok = 0, errors = 0;
  for (const file of fs.readdirSync(tmplDir).filter((f) => f.endsWith(".jinja")).sort()) {
    const name = file.slice(0, -".jinja".length);
    const source = fs.readFileSync(path.join(tmplDir, file), "utf8");
    for (const caseName of Object.keys(conv.cases)) {
      for (const gen of [true, false]) {
        const stem = path.join(outDir, `${name}.${caseName}.${gen ? "gen" : "nogen"}`);
        fs.rmSync(`${stem}.txt`, { force: true });
        fs.rmSync(`${stem}.error.txt`, { force: true });
        try {
          fs.writeFileSync(`${stem}.txt`, render(source, makeContext(conv, caseName, gen)));
          ok++;
        } catch (e) {
          fs.writeFileSync(`${stem}.error.txt`, `${e?.message ?? e}\n`);
          errors++;
        }
      }
    }
  }
  console.log(`rendered ${ok}, reference threw on ${errors}`);
} else {
  const [tmplPath, convPath, caseName, genArg] = args;
  if (!tmplPath || !convPath || !caseName) {
    console.error("usage: render_ref.mjs <template.jinja> <conversations.json> <case> [gen|nogen]");
    process.exit(1);
  }
  const conv = JSON.parse(fs.readFileSync(convPath, "utf8"));
  pinClock(conv.now);
  try {
    process.stdout.write(render(fs.readFileSync(tmplPath, "utf8"), makeContext(conv, caseName, genArg !== "nogen")));
  } catch (e) {
    console.error(`${e?.message ?? e}`);
    process.exit(2);
  }
}
