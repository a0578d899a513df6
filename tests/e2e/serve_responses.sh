#!/usr/bin/env bash
# OpenAI's Responses API (/v1/responses) with the official `openai` npm client: text
# (the same greedy reply as the chat endpoint for the same conversation), streamed
# events (in order, numbered, joined by the client's stream helper into the same
# response), forced function calls streaming and not, a follow-up turn carrying the
# call and its output (the same prompt as the chat endpoint's), JSON output by schema,
# and errors naming the Responses field.
# usage: serve_responses.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-responses
source "$src/tests/e2e/serve/npm_client.sh"
npm_client openai 4.95.0
source "$src/tests/e2e/serve/common.sh"
start_server --api-key k-9 --parallel 2 -c 1024

node - "$base" <<'JS' || fail=1
const OpenAI = require("openai");
const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "k-9", maxRetries: 0 });
let failed = 0;
// The text of a response's message items (what the client's output_text holds, which
// its stream helper's final response leaves out).
const textOf = (r) => r.output.filter((o) => o.type === "message").map((o) => o.content[0].text).join("");
const check = (what, cond) => { console.log((cond ? "ok   " : "FAIL ") + what); if (!cond) failed = 1; };
const model = "tiny-qwen3moe-qwen2";
// The random tiny model may write one string for hundreds of tokens: a bias towards
// '"' and '}' (Qwen2 ids 1 and 92) keeps its JSON short.
const short = { "1": 7, "92": 5 };
const tools = [{ type: "function", name: "get_weather", description: "Weather in a city",
                 parameters: { type: "object", properties: { unit: { enum: ["c", "f"] }, days: { type: "integer" } },
                               required: ["unit", "days"] } }];
(async () => {
  // Text: the conversation as the chat endpoint has it gives the same greedy reply.
  const r = await client.responses.create({ model, instructions: "Be brief.", input: "Say hi",
                                            max_output_tokens: 7, temperature: 0 });
  const c = await client.chat.completions.create({ model, max_tokens: 7, temperature: 0,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hi" }] });
  check("text: a response object", r.object === "response" && r.id.startsWith("resp_") && r.model === model);
  const said = c.choices[0].message.content;
  check("text: the chat endpoint's greedy reply", said.trim().length > 0 && r.output_text === said);
  check("text: usage as the chat endpoint counts it", r.usage.input_tokens === c.usage.prompt_tokens &&
        r.usage.output_tokens === c.usage.completion_tokens && r.usage.total_tokens === c.usage.total_tokens);
  check("text: cut by max_output_tokens is incomplete", c.choices[0].finish_reason !== "length" ||
        (r.status === "incomplete" && r.incomplete_details.reason === "max_output_tokens"));
  check("text: echoes the request", r.instructions === "Be brief." && r.max_output_tokens === 7 && r.temperature === 0);

  // Streamed: typed events numbered from 0, created first and completed/incomplete last;
  // the deltas join into the same text.
  const s = await client.responses.create({ model, instructions: "Be brief.", input: "Say hi", max_output_tokens: 7,
                                            temperature: 0, stream: true });
  const events = [];
  for await (const e of s) events.push(e);
  check("stream: numbered events in order", events.every((e, i) => e.sequence_number === i));
  check("stream: created, in_progress, ..., then the end", events[0].type === "response.created" &&
        events[1].type === "response.in_progress" &&
        ["response.completed", "response.incomplete"].includes(events[events.length - 1].type));
  const deltas = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
  check("stream: the deltas are the text", deltas === r.output_text);
  const last = events[events.length - 1].response;
  check("stream: the final response holds it", textOf(last) === r.output_text &&
        last.usage.output_tokens === r.usage.output_tokens);

  // A forced call: the named function, its arguments following the schema.
  const f = await client.responses.create({ model, input: "Weather in Paris?", tools, temperature: 0,
                                            max_output_tokens: 100, logit_bias: short,
                                            tool_choice: { type: "function", name: "get_weather" } });
  const call = f.output.find((o) => o.type === "function_call");
  let args = null;
  try { args = JSON.parse(call.arguments); } catch (e) {}
  check("forced call: a function_call item", call && call.name === "get_weather" && call.call_id.startsWith("call_") &&
        call.status === "completed");
  check("forced call: arguments follow the schema", args && ["c", "f"].includes(args.unit) && Number.isInteger(args.days));
  const fs = client.responses.stream({ model, input: "Weather in Paris?", tools, temperature: 0, max_output_tokens: 100,
                                       logit_bias: short, tool_choice: { type: "function", name: "get_weather" } });
  const argDeltas = [];
  fs.on("response.function_call_arguments.delta", (e) => argDeltas.push(e.delta));
  const ff = await fs.finalResponse();
  const scall = ff.output.find((o) => o.type === "function_call");
  check("forced call streamed: the same call", scall && scall.name === call.name && scall.arguments === call.arguments);
  check("forced call streamed: its arguments arrive in deltas", argDeltas.length > 1 && argDeltas.join("") === call.arguments);

  // The next turn: the call and its output as input items, the same prompt as the chat
  // endpoint's assistant tool_calls and tool message.
  const turn = await client.responses.create({ model, tools, max_output_tokens: 3, temperature: 0, input: [
    { role: "user", content: "Weather in Paris?" },
    { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
    { type: "function_call_output", call_id: call.call_id, output: "22 C and sunny" }] });
  const chatTurn = await client.chat.completions.create({ model, max_tokens: 3, temperature: 0,
    tools: tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description,
                                                              parameters: t.parameters } })),
    messages: [{ role: "user", content: "Weather in Paris?" },
               { role: "assistant", content: null, tool_calls: [{ id: call.call_id, type: "function",
                                                                  function: { name: call.name, arguments: call.arguments } }] },
               { role: "tool", tool_call_id: call.call_id, content: "22 C and sunny" }] });
  check("next turn: the chat endpoint's prompt (" + turn.usage.input_tokens + " tokens)",
        turn.usage.input_tokens === chatTurn.usage.prompt_tokens && turn.usage.input_tokens > f.usage.input_tokens);
  // The same turn by previous_response_id: the server keeps the call's conversation.
  const chained = await client.responses.create({ model, tools, max_output_tokens: 3, temperature: 0,
    previous_response_id: f.id, input: [{ type: "function_call_output", call_id: call.call_id, output: "22 C and sunny" }] });
  check("previous_response_id: the same prompt as the whole conversation",
        chained.usage.input_tokens === turn.usage.input_tokens && chained.previous_response_id === f.id &&
        chained.output_text === turn.output_text);
  const again = await client.responses.retrieve(f.id);
  check("retrieve: the stored response", again.id === f.id && JSON.stringify(again.output) === JSON.stringify(f.output));
  await client.responses.del(chained.id);
  try { await client.responses.retrieve(chained.id); check("deleted: gone", false); }
  catch (e) { check("deleted: gone (404)", e.status === 404); }
  const unkept = await client.responses.create({ model, input: "Hi", max_output_tokens: 2, store: false });
  try { await client.responses.create({ model, input: "x", previous_response_id: unkept.id }); check("store false: not kept", false); }
  catch (e) { check("store false: not kept (400 naming previous_response_id)", e.status === 400 && e.param === "previous_response_id"); }

  // JSON by schema (text.format).
  const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
  const j = await client.responses.create({ model, input: "JSON please", temperature: 0, max_output_tokens: 200,
                                            logit_bias: short,
                                            text: { format: { type: "json_schema", name: "r", schema, strict: true } } });
  let v = null;
  try { v = JSON.parse(j.output_text); } catch (e) {}
  check("text.format json_schema: the text conforms", v && typeof v.ok === "boolean" && Object.keys(v).length === 1);
  // The client's stream helper checks the events against the items it builds (it
  // takes its final response from response.completed: a reply that ends on its own).
  const helper = client.responses.stream({ model, input: "JSON please", temperature: 0, max_output_tokens: 200,
    logit_bias: short, text: { format: { type: "json_schema", name: "r", schema, strict: true } } });
  const fin = await helper.finalResponse();
  check("stream helper: the same completed response", j.status === "completed" && fin.status === "completed" &&
        textOf(fin) === j.output_text && fin.usage.output_tokens === j.usage.output_tokens);

  // Errors name the Responses field.
  const status = async (body) => {
    try { await client.responses.create(body); return [200, null]; } catch (e) { return [e.status, e.param]; }
  };
  let [st, param] = await status({ model, input: "x", previous_response_id: "resp_1" });
  check("an unknown previous_response_id: 400 naming it", st === 400 && param === "previous_response_id");
  [st, param] = await status({ model, input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] });
  check("an image part: 400 naming input[0].content", st === 400 && param === "input[0].content");
  [st, param] = await status({ model, input: "x", max_output_tokens: -1 });
  check("max_output_tokens -1: 400 naming it", st === 400 && param === "max_output_tokens");
  [st, param] = await status({ model, input: "x", tools: [{ type: "web_search" }] });
  check("a web_search tool: 400 naming tools", st === 400 && param === "tools");
  [st, param] = await status({ model: "gpt-9", input: "x" });
  check("an unknown model: 404", st === 404);
  [st, param] = await status({ model, input: [] });
  check("an empty input: 400", st === 400 && param === "input");
  const bad = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "nope", maxRetries: 0 });
  try { await bad.responses.create({ model, input: "x" }); check("a wrong key: 401", false); }
  catch (e) { check("a wrong key: 401", e.status === 401); }
  process.exit(failed);
})().catch((e) => { console.log("FAIL " + e.stack); process.exit(1); });
JS
# A client that goes away cancels its response (streamed and not).
for stream in true false; do
  curl -s -N --max-time 1 "$base/v1/responses" -H 'Authorization: Bearer k-9' \
    -d '{"input":"Tell me","max_output_tokens":4000,"ignore_eos":true,"stream":'$stream'}' >/dev/null
done
check "disconnected clients cancel their responses" test "$(cancelled_at_least 2)" -ge 2
check "the server is still up" test "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200
stop_server
exit $fail
