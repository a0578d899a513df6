#!/usr/bin/env bash
# deltafin serve with the official `openai` npm client (pinned version, installed into
# the build directory at test time; skipped when npm or the registry is unavailable):
# chat completions streaming and not, completions, logprobs (and echo's prompt logprobs), response_format
# (json_object and json_schema), tool calls (one named, several required, streamed through
# the client's helper), the model list, and the client's
# typed errors for a wrong key (401) and an unknown model (404).
# usage: serve_openai.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-openai
source "$src/tests/e2e/serve/npm_client.sh"
npm_client openai 4.95.0
source "$src/tests/e2e/serve/common.sh"
start_server --api-key k-123 --parallel 2 -c 512

node - "$base" <<'JS' || fail=1
const OpenAI = require("openai");
const base = process.argv[2] + "/v1";
const client = new OpenAI({ baseURL: base, apiKey: "k-123", maxRetries: 0 });
let failed = 0;
const check = (what, cond) => { console.log((cond ? "ok   " : "FAIL ") + what); if (!cond) failed = 1; };
(async () => {
  const models = await client.models.list();
  const id = models.data[0].id;
  check("models.list gives the model", id === "tiny-qwen3moe-qwen2");

  const msgs = [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hi" }];
  const r = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 7, temperature: 0 });
  check("chat: a message", typeof r.choices[0].message.content === "string" && r.choices[0].message.role === "assistant");
  check("chat: usage", r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 7);

  const s = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 7, temperature: 0,
                                                   stream: true });
  let text = "", finish = null, n = 0;
  for await (const chunk of s) {
    n++;
    const c = chunk.choices[0];
    if (c && c.delta && c.delta.content) text += c.delta.content;
    if (c && c.finish_reason) finish = c.finish_reason;
  }
  check("chat stream: chunks and a finish reason", n >= 2 && (finish === "length" || finish === "stop"));
  check("chat stream: same greedy text as non-streaming", text === r.choices[0].message.content);

  const c = await client.completions.create({ model: id, prompt: "The capital of France is", max_tokens: 5,
                                             temperature: 0, seed: 7 });
  check("completion: text", typeof c.choices[0].text === "string" && c.object === "text_completion");
  const cs = await client.completions.create({ model: id, prompt: "The capital of France is", max_tokens: 5,
                                              temperature: 0, stream: true });
  let ctext = "";
  for await (const chunk of cs) ctext += chunk.choices[0] ? chunk.choices[0].text : "";
  check("completion stream equals non-streaming", ctext === c.choices[0].text);

  // n choices: greedy ones all equal the single greedy reply; streamed ones arrive by index.
  const nr = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 7, temperature: 0, n: 2 });
  check("chat n=2: two choices by index, each the greedy reply",
        nr.choices.length === 2 && nr.choices.every((ch, i) => ch.index === i &&
                                                     ch.message.content === r.choices[0].message.content));
  check("chat n=2: usage counts the prompt once and both completions",
        nr.usage.prompt_tokens === r.usage.prompt_tokens && nr.usage.completion_tokens === 2 * r.usage.completion_tokens);
  const ns = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 7, temperature: 1, seed: 3,
                                                    n: 2, stream: true });
  const parts = ["", ""], ends = [null, null];
  for await (const chunk of ns) for (const ch of chunk.choices) {
    if (ch.delta && ch.delta.content) parts[ch.index] += ch.delta.content;
    if (ch.finish_reason) ends[ch.index] = ch.finish_reason;
  }
  check("chat stream n=2: both choices finish", ends.every((e) => e === "length" || e === "stop"));
  const one = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 7, temperature: 1, seed: 4 });
  check("chat stream n=2: choice 1 is what seed + 1 gives alone", parts[1] === one.choices[0].message.content);

  // Logprobs: each token's with two alternatives, streaming and not; the tokens'
  // bytes spell the reply, the chosen greedy token is the most likely one.
  const lp = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 7, temperature: 0,
                                                    logprobs: true, top_logprobs: 2 });
  const lc = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
  check("chat logprobs: one entry per token with two alternatives",
        Array.isArray(lc) && lc.length === lp.usage.completion_tokens &&
        lc.every((t) => t.logprob <= 0 && t.top_logprobs.length === 2 && t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob));
  check("chat logprobs: greedy picks the most likely token",
        lc.every((t) => t.top_logprobs[0].token === t.token && t.top_logprobs[0].logprob === t.logprob));
  check("chat logprobs: the tokens' bytes spell the reply",
        Buffer.from(lc.flatMap((t) => t.bytes)).toString("utf8") === lp.choices[0].message.content);
  const lps = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 7, temperature: 0,
                                                     logprobs: true, top_logprobs: 2, stream: true });
  const streamed = [];
  for await (const chunk of lps) for (const ch of chunk.choices) if (ch.logprobs) streamed.push(...ch.logprobs.content);
  check("chat stream logprobs equal the non-streamed ones",
        JSON.stringify(streamed) === JSON.stringify(lc));
  const cl = await client.completions.create({ model: id, prompt: "The capital of France is", max_tokens: 5,
                                              temperature: 0, logprobs: 3 });
  const L = cl.choices[0].logprobs;
  check("completion logprobs: tokens, their logprobs, three alternatives, offsets",
        L.tokens.length === 5 && L.token_logprobs.length === 5 && L.top_logprobs.every((o) => Object.keys(o).length >= 1) &&
        L.text_offset[0] === 0 && L.text_offset.every((o, i) => i === 0 || o >= L.text_offset[i - 1]));
  // echo as an eval harness scores text: the prompt's tokens with their logprobs (the
  // first has none), then the completion's; streamed, the same.
  const prompt = "The capital of France is";
  const ec = await client.completions.create({ model: id, prompt, max_tokens: 1, temperature: 0, logprobs: 1,
                                              echo: true });
  const E = ec.choices[0].logprobs;
  check("echo: the prompt's text, then the completion's",
        ec.choices[0].text.startsWith(prompt) && ec.choices[0].text.length > prompt.length);
  check("echo: a logprob per prompt token (the first null) and per generated token",
        E.tokens.length === ec.usage.prompt_tokens + 1 && E.token_logprobs[0] === null && E.top_logprobs[0] === null &&
        E.token_logprobs.slice(1).every((v) => typeof v === "number" && v <= 0));
  check("echo: the completion's logprob is the one without echo", E.token_logprobs[E.tokens.length - 1] === L.token_logprobs[0]);
  const es = await client.completions.create({ model: id, prompt, max_tokens: 1, temperature: 0, logprobs: 1,
                                              echo: true, stream: true });
  let etext = "";
  const etoks = [];
  for await (const chunk of es) for (const ch of chunk.choices) {
    etext += ch.text;
    if (ch.logprobs) etoks.push(...ch.logprobs.token_logprobs);
  }
  check("echo stream equals non-streaming", etext === ec.choices[0].text && JSON.stringify(etoks) === JSON.stringify(E.token_logprobs));

  // Structured output: a json_object reply is JSON a strict parser takes; a json_schema
  // one conforms; a malformed response_format is a BadRequestError naming the field.
  // (The random tiny model may write one string for hundreds of tokens: a bias towards
  // '"' and '}', Qwen2 ids 1 and 92, checked by their echo, keeps its object short.)
  const ids = await client.completions.create({ model: id, prompt: [1, 92], max_tokens: 0, echo: true, logprobs: 0 });
  check("the ids of '\"' and '}' spell them", ids.choices[0].text === '"}');
  const ask = [{ role: "user", content: "Give JSON" }];
  const jo = await client.chat.completions.create({ model: id, messages: ask, max_tokens: 300, temperature: 0,
                                                   logit_bias: { "1": 7, "92": 5 },
                                                   response_format: { type: "json_object" } });
  let parsed = null;
  try { parsed = JSON.parse(jo.choices[0].message.content); } catch (e) { console.log("not JSON: " + JSON.stringify(jo.choices[0])); }
  check("json_object: JSON.parse takes the content, an object",
        parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) && jo.choices[0].finish_reason === "stop");
  const schema = { type: "object", properties: { ok: { type: "boolean" }, c: { enum: ["x", "y"] } },
                   required: ["ok", "c"], additionalProperties: false };
  const js = await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 300, temperature: 1, seed: 2,
                                                   response_format: { type: "json_schema",
                                                                      json_schema: { name: "r", strict: true, schema } } });
  let sv = null;
  try { sv = JSON.parse(js.choices[0].message.content); } catch (e) { /* null */ }
  check("json_schema: the content conforms",
        sv !== null && typeof sv.ok === "boolean" && ["x", "y"].includes(sv.c) && Object.keys(sv).length === 2);
  try {
    await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 2,
                                           response_format: { type: "json_schema", json_schema: { name: "r" } } });
    check("response_format without a schema rejected", false);
  } catch (e) {
    check("response_format without a schema: 400 naming it",
          e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "response_format.json_schema.schema");
  }

  // Tool calls through the client: a named tool_choice makes the reply that call (the
  // Hermes format of the Qwen3 template); streamed, the client's deltas give the same
  // call; the call and its result go back as history.
  const wtools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object",
                    properties: { unit: { enum: ["c", "f"] }, days: { type: "integer" } }, required: ["unit", "days"] } } }];
  const tq = { model: id, messages: [{ role: "user", content: "Weather?" }], max_tokens: 100, temperature: 0,
               logit_bias: { "1": 7, "92": 5 }, tools: wtools,
               tool_choice: { type: "function", function: { name: "get_weather" } } };
  const tc = await client.chat.completions.create(tq);
  const call = tc.choices[0].message.tool_calls?.[0];
  let targs = null;
  try { targs = JSON.parse(call.function.arguments); } catch (e) { /* null */ }
  check("tool call: the named function with schema-shaped arguments",
        tc.choices[0].finish_reason === "tool_calls" && call?.type === "function" && call.function.name === "get_weather" &&
        targs !== null && ["c", "f"].includes(targs.unit) && Number.isInteger(targs.days));
  const tstream = await client.chat.completions.create({ ...tq, stream: true });
  const acc = {};
  let tfinish = null;
  for await (const chunk of tstream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    for (const d of ch.delta?.tool_calls ?? []) {
      acc[d.index] ??= { name: "", arguments: "" };
      if (d.function?.name) acc[d.index].name += d.function.name;
      if (d.function?.arguments) acc[d.index].arguments += d.function.arguments;
    }
    if (ch.finish_reason) tfinish = ch.finish_reason;
  }
  check("tool call streamed: the same call", tfinish === "tool_calls" && acc[0]?.name === "get_weather" &&
        acc[0].arguments === call.function.arguments);
  const after = await client.chat.completions.create({ model: id, max_tokens: 4, tools: wtools,
    messages: [{ role: "user", content: "Weather?" }, tc.choices[0].message,
               { role: "tool", tool_call_id: call.id, content: "sunny" }] });
  check("the call and its result as history: answered", typeof after.choices[0].message.content === "string");

  // Several calls (tool_choice required, parallel_tool_calls by default): the client's
  // stream helper puts the streamed deltas together by index into the calls of the
  // whole reply; with parallel_tool_calls false the reply is one call.
  const ptools = [...wtools, { type: "function", function: { name: "now", parameters: { type: "object",
                   properties: { zone: { enum: ["utc", "cet"] } }, required: ["zone"] } } }];
  const pq = { model: id, messages: [{ role: "user", content: "Weather?" }], max_tokens: 200, temperature: 0,
               logit_bias: { "1": 7, "92": 5 }, tools: ptools, tool_choice: "required" };
  const pw = await client.chat.completions.create(pq);
  const pf = await client.beta.chat.completions.stream(pq).finalChatCompletion();
  const callsOf = (m) => (m.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]);
  const pcalls = callsOf(pw.choices[0].message);
  console.log(`  (${pcalls.length} calls, finish ${pw.choices[0].finish_reason})`);
  check("several calls: the client's stream helper gives the whole reply's calls",
        pcalls.length >= 1 && JSON.stringify(callsOf(pf.choices[0].message)) === JSON.stringify(pcalls) &&
        pf.choices[0].finish_reason === pw.choices[0].finish_reason);
  const single = await client.chat.completions.create({ ...pq, parallel_tool_calls: false });
  check("parallel_tool_calls false: one call", single.choices[0].message.tool_calls?.length === 1);

  try {
    await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 2, top_logprobs: 2 });
    check("top_logprobs without logprobs rejected", false);
  } catch (e) {
    check("top_logprobs without logprobs: 400 naming it", e.status === 400 && e.param === "top_logprobs");
  }

  try {
    await new OpenAI({ baseURL: base, apiKey: "wrong", maxRetries: 0 }).models.list();
    check("wrong key rejected", false);
  } catch (e) {
    check("wrong key: AuthenticationError 401", e instanceof OpenAI.AuthenticationError && e.status === 401);
  }
  try {
    await client.chat.completions.create({ model: "no-such-model", messages: msgs, max_tokens: 2 });
    check("unknown model rejected", false);
  } catch (e) {
    check("unknown model: NotFoundError 404", e instanceof OpenAI.NotFoundError && e.status === 404);
  }
  try {
    await client.chat.completions.create({ model: id, messages: msgs, max_tokens: 2, temperature: 9 });
    check("bad temperature rejected", false);
  } catch (e) {
    check("bad temperature: BadRequestError 400 naming the param",
          e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature");
  }
  process.exit(failed);
})().catch((e) => { console.log("FAIL " + e); process.exit(1); });
JS
stop_server
exit $fail
