#!/usr/bin/env bash
# Anthropic's Messages API (/v1/messages) with the official `@anthropic-ai/sdk` npm
# client: text (the chat endpoint's greedy reply for the same conversation), stop
# sequences, the streamed events joined by the client's stream helper into the same
# message, forced tool use streaming and not, a follow-up turn with tool_use and
# tool_result blocks (the chat endpoint's prompt), count_tokens, the key as x-api-key,
# and errors in Anthropic's shape.
# usage: serve_anthropic.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-anthropic
source "$src/tests/e2e/serve/npm_client.sh"
npm_client @anthropic-ai/sdk 0.60.0
npm_client openai 4.95.0
source "$src/tests/e2e/serve/common.sh"
start_server --api-key k-7 --parallel 2 -c 1024 --alias tiny-qwen3moe-qwen2 --alias claude-haiku-4-5

node - "$base" <<'JS' || fail=1
const Anthropic = require("@anthropic-ai/sdk");
const OpenAI = require("openai");
const client = new Anthropic({ baseURL: process.argv[2], apiKey: "k-7", maxRetries: 0 });
const openai = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "k-7", maxRetries: 0 });
let failed = 0;
const check = (what, cond) => { console.log((cond ? "ok   " : "FAIL ") + what); if (!cond) failed = 1; };
const model = "tiny-qwen3moe-qwen2";
const textOf = (m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
// The random tiny model may write one string for hundreds of tokens: a bias towards
// '"' and '}' (Qwen2 ids 1 and 92) keeps its JSON short.
const short = { "1": 7, "92": 5 };
const tools = [{ name: "get_weather", description: "Weather in a city",
                 input_schema: { type: "object", properties: { unit: { enum: ["c", "f"] }, days: { type: "integer" } },
                                 required: ["unit", "days"] } }];
(async () => {
  // Text: the chat endpoint's greedy reply for the same conversation.
  const m = await client.messages.create({ model, max_tokens: 7, temperature: 0, system: "Be brief.",
                                           messages: [{ role: "user", content: "Say hi" }] });
  const c = await openai.chat.completions.create({ model, max_tokens: 7, temperature: 0,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hi" }] });
  check("text: a message", m.type === "message" && m.role === "assistant" && m.id.startsWith("msg_"));
  check("text: the chat endpoint's greedy reply", textOf(m) === c.choices[0].message.content && textOf(m).trim() !== "");
  check("text: usage as the chat endpoint counts it", m.usage.output_tokens === c.usage.completion_tokens &&
        m.usage.input_tokens + m.usage.cache_read_input_tokens === c.usage.prompt_tokens);
  check("text: cut by max_tokens", c.choices[0].finish_reason !== "length" || m.stop_reason === "max_tokens");

  // A stop sequence: the text before it, and which one stopped it.
  const full = await client.messages.create({ model, max_tokens: 24, temperature: 0,
                                              messages: [{ role: "user", content: "Tell me a story" }] });
  const t = textOf(full);
  const stop = t.trim().slice(3, 5);  // text the reply certainly writes, past its start
  const sm = await client.messages.create({ model, max_tokens: 24, temperature: 0, stop_sequences: ["\u0000zz", stop],
                                           messages: [{ role: "user", content: "Tell me a story" }] });
  check("stop_sequences: stop_reason stop_sequence, naming it", stop.length === 2 && sm.stop_reason === "stop_sequence" &&
        sm.stop_sequence === stop);
  check("stop_sequences: the text before it", textOf(sm) === t.slice(0, t.indexOf(stop)));

  // Streamed: the client's stream helper builds the same message from the events.
  const events = [];
  const st = client.messages.stream({ model, max_tokens: 7, temperature: 0, system: "Be brief.",
                                      messages: [{ role: "user", content: "Say hi" }] });
  st.on("streamEvent", (e) => events.push(e.type));
  const fin = await st.finalMessage();
  check("stream: the same message", textOf(fin) === textOf(m) && fin.stop_reason === m.stop_reason &&
        fin.usage.output_tokens === m.usage.output_tokens);
  check("stream: message_start first, message_stop last, blocks in between",
        events[0] === "message_start" && events[events.length - 1] === "message_stop" &&
        events.includes("content_block_start") && events.includes("content_block_delta") &&
        events.includes("message_delta"));

  // Forced tool use: the named tool, its input following the schema, streamed the same.
  const req = { model, max_tokens: 100, temperature: 0, tools, tool_choice: { type: "tool", name: "get_weather" },
                logit_bias: short, messages: [{ role: "user", content: "Weather in Paris?" }] };
  const f = await client.messages.create(req);
  const use = f.content.find((b) => b.type === "tool_use");
  check("tool use: a tool_use block and stop_reason tool_use", use && use.name === "get_weather" &&
        use.id.startsWith("toolu_") && f.stop_reason === "tool_use");
  check("tool use: the input follows the schema", use && ["c", "f"].includes(use.input.unit) &&
        Number.isInteger(use.input.days));
  const fs = await client.messages.stream(req).finalMessage();
  const suse = fs.content.find((b) => b.type === "tool_use");
  check("tool use streamed: the same input", suse && JSON.stringify(suse.input) === JSON.stringify(use.input));

  // The next turn: tool_use and tool_result blocks give the chat endpoint's prompt.
  const turn = await client.messages.create({ model, max_tokens: 3, temperature: 0, tools, messages: [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: [{ type: "tool_use", id: use.id, name: use.name, input: use.input }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "22 C and sunny" }] }] });
  const chatTurn = await openai.chat.completions.create({ model, max_tokens: 3, temperature: 0,
    tools: tools.map((x) => ({ type: "function", function: { name: x.name, description: x.description,
                                                              parameters: x.input_schema } })),
    messages: [{ role: "user", content: "Weather in Paris?" },
               { role: "assistant", content: null, tool_calls: [{ id: use.id, type: "function",
                   function: { name: use.name, arguments: JSON.stringify(use.input) } }] },
               { role: "tool", tool_call_id: use.id, content: "22 C and sunny" }] });
  const turnIn = turn.usage.input_tokens + turn.usage.cache_read_input_tokens;
  check("next turn: the chat endpoint's prompt (" + turnIn + " tokens)", turnIn === chatTurn.usage.prompt_tokens);
  const counted = await client.messages.countTokens({ model, tools, messages: [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: [{ type: "tool_use", id: use.id, name: use.name, input: use.input }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "22 C and sunny" }] }] });
  check("count_tokens: the same count", counted.input_tokens === turnIn);

  // The model list and the model, as the SDK reads them.
  const models = [];
  for await (const x of client.models.list()) models.push(x);
  check("models.list: the model, typed", models.length === 1 && models[0].id === model && models[0].type === "model" &&
        !isNaN(Date.parse(models[0].created_at)));
  const one = await client.models.retrieve("claude-haiku-4-5");
  check("models.retrieve by an alias: the model", one.id === model);

  // Errors: Anthropic's shape and the SDK's typed errors.
  const status = async (body, c2 = client) => {
    try { await c2.messages.create(body); return [200, null]; } catch (e) { return [e.status, e.error]; }
  };
  let [s, body] = await status({ model, max_tokens: 5, messages: [{ role: "user", content: [{ type: "image",
    source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] });
  check("an image block: 400 invalid_request_error naming it", s === 400 && body.type === "error" &&
        body.error.type === "invalid_request_error" && body.error.message.includes("messages[0].content[0]"));
  [s, body] = await status({ model, max_tokens: 5, messages: [{ role: "robot", content: "x" }] });
  check("a bad role: 400", s === 400 && body.error.message.includes("messages[0].role"));
  [s, body] = await status({ model: "claude-9", max_tokens: 5, messages: [{ role: "user", content: "x" }] });
  check("an unknown model: 404 not_found_error", s === 404 && body.error.type === "not_found_error");
  const alias = await client.messages.create({ model: "claude-haiku-4-5", max_tokens: 2,
                                               messages: [{ role: "user", content: "x" }] });
  check("a second --alias is served, the reply naming the model id", alias.model === model);
  [s, body] = await status({ model, max_tokens: 5, messages: [{ role: "user", content: "x" }] },
                           new Anthropic({ baseURL: process.argv[2], apiKey: "nope", maxRetries: 0 }));
  check("a wrong key: 401 authentication_error", s === 401 && body.error.type === "authentication_error");
  [s, body] = await status({ model, max_tokens: 5, tools: [{ type: "web_search_20250305", name: "web_search" }],
                             messages: [{ role: "user", content: "x" }] });
  check("a server tool: 400 naming tools", s === 400 && body.error.message.startsWith("tools"));
  process.exit(failed);
})().catch((e) => { console.log("FAIL " + e.stack); process.exit(1); });
JS
check "the server is still up" test "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200
stop_server
exit $fail
