#!/usr/bin/env bash
# deltafin serve with curl: every error case gets its status and an OpenAI error body
# naming what was wrong; the endpoints answer in the OpenAI shapes (streaming and
# not); a client that disconnects cancels its generation; malformed input does not
# bring the server down; SIGTERM lets a running stream finish, then the server exits.
# usage: serve_api.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-api
command -v curl >/dev/null && command -v python3 >/dev/null || { echo "skip: needs curl and python3"; exit 77; }
source "$src/tests/e2e/serve/common.sh"
start_server --api-key sekrit --parallel 4 -c 4096 --max-body 64K

auth=(-H "Authorization: Bearer sekrit")
# req METHOD PATH [curl args...]: body to $dir/body, prints the status.
# (JSON content type: cpp-httplib caps form-encoded bodies, curl's -d default, at 8 KiB.)
req() { local m=$1 p=$2; shift 2; curl -s -o "$dir/body" -w '%{http_code}' -X "$m" "$base$p" -H 'Content-Type: application/json' "$@"; }
# jq-like: py EXPR evaluates a Python expression over j = the last body as JSON.
py() { python3 -c "import json,sys; j=json.load(open('$dir/body')); sys.exit(0 if ($1) else 1)"; }
is_error() { py "set(j['error']) == {'message','type','param','code'} and isinstance(j['error']['message'], str) and len(j['error']['message']) > 5"; }
chat='{"model":"tiny-qwen3moe-qwen2","messages":[{"role":"user","content":"Hello there"}],"max_tokens":8,"temperature":0}'

check "health is open and ok" test "$(req GET /health)" = 200
check "health body" py "j == {'status': 'ok'}"
check "no key: 401" test "$(req POST /v1/chat/completions -d "$chat")" = 401
check "no key: OpenAI error body" py "j['error']['code'] == 'invalid_api_key'"
check "wrong key: 401" test "$(req POST /v1/chat/completions -H 'Authorization: Bearer nope' -d "$chat")" = 401
is_error || { echo "FAIL 401 body: $(cat "$dir/body")"; fail=1; }
check "bad JSON: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages": [')" = 400
check "bad JSON: error body" is_error
check "bad JSON: says JSON" py "'JSON' in j['error']['message'] and j['error']['type'] == 'invalid_request_error'"
check "not an object: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '[1,2]')" = 400
check "missing messages: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"max_tokens":3}')" = 400
check "missing messages: names the param" py "j['error']['param'] == 'messages'"
check "bad temperature: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}')" = 400
check "bad temperature: names the param" py "j['error']['param'] == 'temperature'"
check "temperature out of range: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"x"}],"temperature":7}')" = 400
check "bad role: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"wizard","content":"x"}]}')" = 400
check "bad role: names it" py "j['error']['param'] == 'messages[0].role' and 'wizard' in j['error']['message']"
check "max_tokens 0: 400" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"x","max_tokens":0}')" = 400
check "n=0: 400" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"x","n":0}')" = 400
check "n above --parallel: 400" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"x","n":5}')" = 400
check "n above --parallel: names n and the limit" py "j['error']['param'] == 'n' and '4' in j['error']['message']"
check "unknown model: 404" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"model":"gpt-17","messages":[{"role":"user","content":"x"}]}')" = 404
check "unknown model: model_not_found" py "j['error']['code'] == 'model_not_found' and 'gpt-17' in j['error']['message']"
check "unknown model under /v1/models: 404" test "$(req GET /v1/models/gpt-17 "${auth[@]}")" = 404
long=$(python3 -c "print(' '.join(['word']*5000))")
echo "{\"prompt\":\"$long\"}" >"$dir/long.json"
check "prompt longer than the context: 400" test "$(req POST /v1/completions "${auth[@]}" --data-binary @"$dir/long.json")" = 400
check "prompt too long: names both numbers" py "'5000 tokens' in j['error']['message'] and '4096' in j['error']['message'] and j['error']['code'] == 'context_length_exceeded'"
python3 -c "print('{\"prompt\":\"' + 'a'*70000 + '\"}')" >"$dir/big.json"
check "body over the limit: 413" test "$(req POST /v1/completions "${auth[@]}" --data-binary @"$dir/big.json")" = 413
check "413: error body" is_error
check "unknown endpoint: 404" test "$(req GET /v2/nothing)" = 404
check "unknown endpoint: error body" is_error

check "models: 200" test "$(req GET /v1/models "${auth[@]}")" = 200
check "models lists the model" py "j['object'] == 'list' and j['data'][0]['id'] == 'tiny-qwen3moe-qwen2'"
check "chat: 200" test "$(req POST /v1/chat/completions "${auth[@]}" -d "$chat")" = 200
check "chat: response shape" py "j['object'] == 'chat.completion' and j['choices'][0]['message']['role'] == 'assistant' and isinstance(j['choices'][0]['message']['content'], str) and j['usage']['completion_tokens'] + j['usage']['prompt_tokens'] == j['usage']['total_tokens'] and j['usage']['prompt_tokens'] > 5"
check "chat: 8 tokens or a stop" py "j['usage']['completion_tokens'] == 8 and j['choices'][0]['finish_reason'] == 'length' or j['choices'][0]['finish_reason'] == 'stop'"
check "chat with tools: 200" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"weather?"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}')" = 200
check "tools reach the template (prompt grows)" py "j['usage']['prompt_tokens'] > 40"
check "completion: 200" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"Once upon a time","max_tokens":5,"temperature":0}')" = 200
check "completion: shape" py "j['object'] == 'text_completion' and isinstance(j['choices'][0]['text'], str) and j['usage']['completion_tokens'] <= 5"
curl -s -N "$base/v1/chat/completions" "${auth[@]}" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}' >"$dir/stream"
check "stream: SSE chunks end with [DONE]" python3 - "$dir/stream" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert lines[-1] == "data: [DONE]", lines[-1]
chunks = [json.loads(l[6:]) for l in lines[:-1]]
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
fin = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
assert len(fin) == 1, fin
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] >= 1
PY
curl -s "$base/metrics" >"$dir/metrics"
check "metrics: tokens, times, queue" grep -q '^deltafin_generated_tokens_total [1-9]' "$dir/metrics"
check "metrics: prefill time" grep -q '^deltafin_prefill_seconds_total ' "$dir/metrics"
check "metrics: queue depth" grep -q '^deltafin_queue_depth ' "$dir/metrics"
check "metrics: responses by status" grep -q 'deltafin_http_responses_total{endpoint="/v1/chat/completions",status="401"} 2' "$dir/metrics"

# Structured output: response_format constrains the reply to JSON (json_object) or to a
# schema (json_schema), on both endpoints, streaming or not; malformed formats and
# unsupported schema keywords are 400s naming the field.
schema='{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"},"c":{"enum":["a","b"]}},"required":["ok","n","c"],"additionalProperties":false}'
conforms="set(v) == {'ok','n','c'} and isinstance(v['ok'], bool) and isinstance(v['n'], int) and v['c'] in ('a','b')"
# The random tiny model may write one string for hundreds of tokens: a bias towards '"'
# and '}' (Qwen2 ids 1 and 92, checked here by their echo) keeps its object short.
check "the ids of '\"' and '}'" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":[1,92],"max_tokens":0,"echo":true,"logprobs":0}')" = 200
check "  spell them" py "j['choices'][0]['text'] == '\"}'"
check "json_object: 200" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"Give JSON"}],"max_tokens":300,"temperature":0,"logit_bias":{"1":7,"92":5},"response_format":{"type":"json_object"}}')" = 200
check "json_object: the content is a JSON object the model ended" py "isinstance(json.loads(j['choices'][0]['message']['content']), dict) and j['choices'][0]['finish_reason'] == 'stop'"
check "json_schema: 200" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"Give JSON"}],"max_tokens":300,"temperature":1,"seed":5,"n":2,"response_format":{"type":"json_schema","json_schema":{"name":"r","strict":true,"schema":'"$schema"'}}}')" = 200
check "json_schema: both choices conform" py "all((lambda v: $conforms)(json.loads(c['message']['content'])) and c['finish_reason'] == 'stop' for c in j['choices'])"
check "json_schema completion: 200" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"JSON:","max_tokens":300,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":'"$schema"'}}}')" = 200
check "json_schema completion: the text conforms" py "(lambda v: $conforms)(json.loads(j['choices'][0]['text']))"
curl -s -N "$base/v1/chat/completions" "${auth[@]}" -d '{"messages":[{"role":"user","content":"Give JSON"}],"max_tokens":300,"temperature":1,"seed":9,"stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":'"$schema"'}}}' >"$dir/json_stream"
check "json_schema stream: the deltas join into a conforming value" python3 - "$dir/json_stream" <<PY
import json, sys
chunks = [json.loads(l[6:]) for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: {")]
v = json.loads("".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]))
assert $conforms, v
PY
# tool_choice naming a function (the Qwen3 template's Hermes format): the reply is that
# call, its arguments following the tool's schema.
wtools='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"unit":{"enum":["c","f"]},"days":{"type":"integer"}},"required":["unit","days"]}}},{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}}]'
check "forced tool call: 200" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"Weather?"}],"max_tokens":100,"temperature":0,"logit_bias":{"1":7,"92":5},"tools":'"$wtools"',"tool_choice":{"type":"function","function":{"name":"get_weather"}}}')" = 200
check "  is the named call" py "j['choices'][0]['finish_reason'] == 'tool_calls' and j['choices'][0]['message']['tool_calls'][0]['function']['name'] == 'get_weather' and (lambda a: a['unit'] in ('c','f') and isinstance(a['days'], int))(json.loads(j['choices'][0]['message']['tool_calls'][0]['function']['arguments']))"
check "  with an OpenAI-style call id" py "j['choices'][0]['message']['tool_calls'][0]['id'].startswith('call_')"
curl -s "$base/metrics" >"$dir/metrics2"
check "metrics: tool calls read" grep -qE '^deltafin_tool_calls_total [1-9]' "$dir/metrics2"
check "metrics: constrained requests (5 so far)" grep -q '^deltafin_structured_requests_total 5$' "$dir/metrics2"
check "metrics: nothing running once all is answered" grep -q '^deltafin_requests_running 0$' "$dir/metrics2"

# OpenAI's "developer" role reaches a template without one (Qwen3's) as a system message.
ptoks() { python3 -c "import json; print(json.load(open('$dir/body'))['usage']['prompt_tokens'])"; }
req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":1}' >/dev/null; plain=$(ptoks)
check "developer message: 200" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"developer","content":"Be brief and kind."},{"role":"user","content":"x"}],"max_tokens":1}')" = 200
check "  in the prompt ($(ptoks) > $plain tokens)" test "$(ptoks)" -gt "$plain"
# seed -1 is a random seed (llama.cpp's convention); another seed repeats itself.
sampled() { req POST /v1/completions "${auth[@]}" -d '{"prompt":"Once","max_tokens":12,"temperature":1.5,"seed":'"$1"'}' >/dev/null; python3 -c "import json; print(json.load(open('$dir/body'))['choices'][0]['text'])"; }
check "seed 7 twice: the same text" test "$(sampled 7)" = "$(sampled 7)"
check "seed -1 twice: different texts" test "$(sampled -1)" != "$(sampled -1)"
check "bad include_usage: names it" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"x","stream":true,"stream_options":{"include_usage":3}}')" = 400
check "  as stream_options.include_usage" py "j['error']['param'] == 'stream_options.include_usage'"
check "two tools of one name: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}')" = 400
check "  names tools and the name" py "j['error']['param'] == 'tools' and \"'f' is given twice\" in j['error']['message']"
check "tool_choice required with response_format json: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"x"}],"tools":'"$wtools"',"tool_choice":"required","response_format":{"type":"json_object"}}')" = 400
check "response_format without json_schema: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}}')" = 400
check "... names the field" py "j['error']['param'] == 'response_format.json_schema'"
check "unknown response_format type: 400" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"x","response_format":{"type":"yaml"}}')" = 400
check "... names it" py "j['error']['param'] == 'response_format' and 'yaml' in j['error']['message']"
check "unsupported schema keyword: 400" test "$(req POST /v1/chat/completions "${auth[@]}" -d '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"string","pattern":"^a"}}}}')" = 400
check "... names the keyword" py "j['error']['param'] == 'response_format.json_schema.schema' and \"'pattern'\" in j['error']['message']"

# A client that goes away cancels its generation.
# (4000 tokens take the tiny model several seconds; the clients leave after one.)
curl -s -N --max-time 1 "$base/v1/completions" "${auth[@]}" -d '{"prompt":"Tell me","max_tokens":4000,"ignore_eos":true,"stream":true}' >/dev/null
curl -s --max-time 1 "$base/v1/completions" "${auth[@]}" -d '{"prompt":"Tell me more","max_tokens":4000,"ignore_eos":true}' >/dev/null
check "disconnected clients (stream and not) cancel their work" test "$(cancelled_at_least 2)" -ge 2

# Malformed and abrupt traffic; the server stays up.
junk=()
for i in $(seq 1 20); do
  head -c 300 /dev/urandom | curl -s -o /dev/null --max-time 2 "$base/v1/chat/completions" "${auth[@]}" --data-binary @- &
  junk+=($!)
  printf 'GARBAGE %s\r\n\r\n' "$i" | timeout 2 bash -c "cat >/dev/tcp/127.0.0.1/$port" 2>/dev/null &
  junk+=($!)
  curl -s -o /dev/null --max-time 2 "$base/v1/completions" "${auth[@]}" -H 'Content-Length: 100' -d '{"prompt":' &
  junk+=($!)
done
wait "${junk[@]}"
check "still healthy after malformed load" test "$(req GET /health)" = 200

# SIGTERM: a running stream still completes, then the server exits cleanly.
curl -s -N "$base/v1/completions" "${auth[@]}" -d '{"prompt":"Count","max_tokens":40,"stream":true}' >"$dir/drain" &
cpid=$!
sleep 0.5
kill -TERM $pid
wait $cpid
check "the stream running at SIGTERM finished" grep -q 'data: \[DONE\]' "$dir/drain"
for _ in $(seq 1 100); do alive $pid || break; sleep 0.1; done
check "the server exited after SIGTERM" test "$(alive $pid && echo running || echo gone)" = gone
wait $pid; rc=$?
check "exit status 0 after SIGTERM (got $rc)" test $rc = 0

# The batch's sequence states come out of --mem: a context they cannot fit in is
# refused at start, naming the sizes and what to change.
"$bin" serve -m "$model" --port 0 --mem 90M --reserve 1M --parallel 8 -c 65536 >"$dir/big.out" 2>"$dir/big.err"
rc=$?
check "states over --mem: exit status 1 (got $rc)" test $rc = 1
check "states over --mem: says why" grep -q '9 sequence states of 65536 positions take .* MiB.*-c/--ctx-size or --parallel, or raise --mem' "$dir/big.err"
exit $fail
