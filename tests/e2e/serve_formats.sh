#!/usr/bin/env bash
# deltafin serve with Kimi K3's chat template (XTML replies): the thinking the prompt
# opens comes back as reasoning_content, with `thinking: false` the reply is content;
# a conversation with tool calls and their results renders; streamed equals whole;
# tool_choice, reasoning_effort and the server's --chat-template-kwargs reach the
# template; tool_choice "required" or named is enforced (K3, Kimi K2, DeepSeek V3.1/V3.2,
# Qwen3-Coder), "required" with up to 8 calls unless parallel_tool_calls is false.
# (Reading the markers and tool calls back is covered by ReplyFormats.* unit tests;
# the tiny model writes no calls.)
# usage: serve_formats.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-formats
command -v curl >/dev/null && command -v python3 >/dev/null || { echo "skip: needs curl and python3"; exit 77; }
source "$src/tests/e2e/serve/common.sh"
tmpl=$shared/templates/Kimi-K3.jinja
[ -f "$tmpl" ] || { echo "skip: $tmpl missing"; exit 77; }
start_server --parallel 2 -c 2048

req() { curl -s -o "$dir/body" -w '%{http_code}' -X POST "$base$1" -H 'Content-Type: application/json' -d "$2"; }
py() { python3 -c "import json,sys; j=json.load(open('$dir/body')); sys.exit(0 if ($1) else 1)"; }
msgs='[{"role":"user","content":"Hello there"}]'

check "thinking (the template's default): 200" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":12,\"temperature\":0}")" = 200
check "thinking: the text is reasoning_content" py "len(j['choices'][0]['message']['reasoning_content']) > 0 and not j['choices'][0]['message']['content']"
cp "$dir/body" "$dir/whole.json"
check "no XTML marker in it" py "'<|' not in j['choices'][0]['message']['reasoning_content']"

check "thinking false: 200" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":12,\"temperature\":0,\"chat_template_kwargs\":{\"thinking\":false}}")" = 200
check "thinking false: the text is content" py "len(j['choices'][0]['message']['content']) > 0 and 'reasoning_content' not in j['choices'][0]['message']"

body="{\"messages\":$msgs,\"max_tokens\":12,\"temperature\":0,\"stream\":true}"
curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" >"$dir/stream"
check "streamed reasoning equals the whole reply's" python3 -c "
import json,sys
r=''; c=''
for l in open('$dir/stream'):
    if l.startswith('data: {'):
        d=json.loads(l[6:])['choices'][0]['delta']
        r+=d.get('reasoning_content') or ''; c+=d.get('content') or ''
whole=json.load(open('$dir/whole.json'))['choices'][0]['message']['reasoning_content']
sys.exit(0 if r == whole and c == '' else 1)"

tools='[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
history='[{"role":"user","content":"Weather in Paris?"},
 {"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
 {"role":"tool","tool_call_id":"c1","content":"sunny, 21 C"}]'
check "a conversation with a tool call and its result: 200" test "$(req /v1/chat/completions "{\"messages\":$history,\"tools\":$tools,\"max_tokens\":6,\"temperature\":0}")" = 200
check "  answered in the chat shape" py "j['choices'][0]['message']['role'] == 'assistant' and j['usage']['prompt_tokens'] > 100"

# A JSON reply is the answer, not thinking (the template's thinking is turned off).
check "json_object on a thinking template: 200" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":8,\"temperature\":0,\"response_format\":{\"type\":\"json_object\"}}")" = 200
check "  the document is content" py "j['choices'][0]['message']['content'].lstrip().startswith('{') and 'reasoning_content' not in j['choices'][0]['message']"

# tool_choice reaches the template: K3's adds a system note for "required".
ptoks() { python3 -c "import json; print(json.load(open('$dir/body'))['usage']['prompt_tokens'])"; }
# (A forced call renders without thinking: so does the "auto" request compared.)
req /v1/chat/completions "{\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":\"auto\",\"max_tokens\":1,\"chat_template_kwargs\":{\"thinking\":false}}" >/dev/null; auto=$(ptoks)
check "tool_choice required: 200" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":\"required\",\"max_tokens\":1}")" = 200
check "  the template told the model (more prompt tokens than auto: $(ptoks) > $auto)" test "$(ptoks)" -gt "$auto"
# ... and is enforced: the reply is a call, closing the response the prompt opened (a
# bias to '"' and '}', Qwen2 ids 1 and 92, keeps the random model's arguments short).
check "tool_choice required, enough tokens: 200" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":\"required\",\"max_tokens\":300,\"temperature\":0,\"logit_bias\":{\"1\":7,\"92\":5}}")" = 200
check "  the reply is one call to get_weather with object arguments" py "j['choices'][0]['finish_reason'] == 'tool_calls' and len(j['choices'][0]['message']['tool_calls']) == 1 and j['choices'][0]['message']['tool_calls'][0]['function']['name'] == 'get_weather' and isinstance(json.loads(j['choices'][0]['message']['tool_calls'][0]['function']['arguments']), dict)"
check "  and no text" py "not j['choices'][0]['message']['content']"
check "tool_choice naming an unknown function: 400" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}")" = 400
check "  names the param" py "j['error']['param'] == 'tool_choice' and 'nope' in j['error']['message']"

stop_server

# --chat-template-kwargs: the server's defaults for every request (thinking off), which
# a request's chat_template_kwargs override; a value that is not a JSON object is refused.
start_server -c 2048 --chat-template-kwargs '{"thinking": false}'
check "server kwargs thinking false: 200" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":6,\"temperature\":0}")" = 200
check "  the reply is content" py "len(j['choices'][0]['message']['content']) > 0 and 'reasoning_content' not in j['choices'][0]['message']"
check "a request's kwargs override them" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":6,\"temperature\":0,\"chat_template_kwargs\":{\"thinking\":true}}")" = 200
check "  the reply is thinking" py "len(j['choices'][0]['message']['reasoning_content']) > 0"
stop_server
"$bin" serve -m "$model" --port 0 --chat-template-kwargs '[1]' >/dev/null 2>"$dir/kwargs.err"; rc=$?
check "--chat-template-kwargs not an object: refused" sh -c "test $rc -eq 2 && grep -q 'not a JSON object' '$dir/kwargs.err'"

# reasoning_effort reaches the template (gpt-oss's writes "Reasoning: <effort>").
tmpl=$shared/templates/openai-gpt-oss-120b.jinja
if [ -f "$tmpl" ]; then
  start_server -c 2048
  req /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":1}" >/dev/null; plain=$(ptoks)
  check "reasoning_effort: 200" test "$(req /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":1,\"reasoning_effort\":\"very very very high\"}")" = 200
  check "  in the prompt ($(ptoks) > $plain tokens)" test "$(ptoks)" -gt "$plain"
  stop_server
fi
# tool_choice enforced in the other formats too: a named call, streamed and whole, read
# back as the same call. (The parameter formats write a string as free text, which the
# random model would not end: their tool takes an enum and an integer, whose long digits
# may come back as a float.)
etools='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"unit":{"enum":["c","f"]},"days":{"type":"integer"}},"required":["unit","days"]}}}]'
for t in Kimi-K2-Instruct deepseek-ai-DeepSeek-V3.1 Qwen3-Coder deepseek-ai-DeepSeek-V3.2; do
  tmpl=$shared/templates/$t.jinja
  [ -f "$tmpl" ] || continue
  case $t in
    Qwen3-Coder|*V3.2) ts=$etools; want="a['unit'] in ('c', 'f') and isinstance(a['days'], (int, float))" ;;
    *) ts=$tools; want="isinstance(a['city'], str)" ;;
  esac
  start_server -c 2048
  body="{\"messages\":$msgs,\"tools\":$ts,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"max_tokens\":300,\"temperature\":0,\"logit_bias\":{\"1\":7,\"92\":5}"
  check "$t named tool_choice: 200" test "$(req /v1/chat/completions "$body}")" = 200
  check "  one call to get_weather, its arguments as the schema says" py "j['choices'][0]['finish_reason'] == 'tool_calls' and [c['function']['name'] for c in j['choices'][0]['message']['tool_calls']] == ['get_weather'] and (lambda a: $want)(json.loads(j['choices'][0]['message']['tool_calls'][0]['function']['arguments']))"
  cp "$dir/body" "$dir/whole.json"
  curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$body,\"stream\":true}" >"$dir/stream"
  check "  streamed: the same call, named first, its arguments in several deltas" python3 -c "
import json,sys
name=''; args=''; deltas=[]
for l in open('$dir/stream'):
    if l.startswith('data: {'):
        for c in json.loads(l[6:])['choices'][0]['delta'].get('tool_calls') or []:
            deltas.append(c)
            name += c['function'].get('name') or ''; args += c['function'].get('arguments') or ''
w=json.load(open('$dir/whole.json'))['choices'][0]['message']['tool_calls'][0]['function']
first=deltas[0] if deltas else {}
sys.exit(0 if name == w['name'] and args == w['arguments'] and len(deltas) >= 3
         and first.get('id') and first['function'].get('name') else 1)"
  stop_server
done
# tool_choice "required" with parallel calls (the default): where the calls end with the
# reply (Qwen3 Hermes, Qwen3-Coder) and the end of generation is biased away, the reply
# holds as many calls as a forced reply may (8); where a section closes them, 1 to 8. Each
# goes to a tool of the request with its arguments as its schema says (days optional),
# with its own id. With parallel_tool_calls false, one call.
ptools='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"unit":{"enum":["c","f"]},"days":{"type":"integer"}},"required":["unit"]}}},{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{"zone":{"enum":["utc","cet"]}},"required":["zone"]}}}]'
for t in Qwen3-Coder Qwen-Qwen3-0.6B deepseek-ai-DeepSeek-V3.2 Kimi-K2-Instruct; do
  tmpl=$shared/templates/$t.jinja
  [ -f "$tmpl" ] || continue
  start_server -c 4096
  for par in true false; do
    case $t in Qwen*) n=8 ;; *) n="1 to 8" ;; esac
    [ $par = false ] && n=1
    body="{\"messages\":$msgs,\"tools\":$ptools,\"tool_choice\":\"required\",\"parallel_tool_calls\":$par,\"max_tokens\":2000,\"temperature\":0,\"logit_bias\":{\"151643\":-100,\"151645\":-100}}"
    check "$t required, parallel_tool_calls $par: 200" test "$(req /v1/chat/completions "$body")" = 200
    check "  $n calls, each to a tool with its arguments as its schema says" python3 -c "
import json,sys
c=json.load(open('$dir/body'))['choices'][0]; cs=c['message'].get('tool_calls') or []
def ok(f):
    a=json.loads(f['arguments'])
    if f['name'] == 'now': return a in ({'zone': 'utc'}, {'zone': 'cet'})
    return f['name'] == 'get_weather' and a.get('unit') in ('c', 'f') and set(a) <= {'unit', 'days'} and isinstance(a.get('days', 0), (int, float))
want = [int(w) for w in '$n'.split(' to ')]
good = c['finish_reason'] == 'tool_calls' and want[0] <= len(cs) <= want[-1] and all(ok(x['function']) for x in cs) and len({x['id'] for x in cs}) == len(cs)
if not good: print(c)
sys.exit(0 if good else 1)"
    [ "$t-$par" = Qwen3-Coder-true ] || continue
    cp "$dir/body" "$dir/whole.json"
    curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "${body%\}},\"stream\":true}" >"$dir/stream"
    check "  streamed: the same calls, by index" python3 -c "
import json,sys
calls={}
for l in open('$dir/stream'):
    if l.startswith('data: {'):
        for d in json.loads(l[6:])['choices'][0]['delta'].get('tool_calls') or []:
            c=calls.setdefault(d['index'], ['', ''])
            c[0] += d['function'].get('name') or ''; c[1] += d['function'].get('arguments') or ''
w=[[x['function']['name'], x['function']['arguments']] for x in json.load(open('$dir/whole.json'))['choices'][0]['message']['tool_calls']]
sys.exit(0 if [calls[i] for i in sorted(calls)] == w and sorted(calls) == list(range(len(w))) else 1)"
  done
  stop_server
done
# Forced calls in one batch: four greedy requests at once (two tools, each named twice;
# thinking on the K3 template is closed first) give the calls each gives alone.
tmpl=$shared/templates/Kimi-K3.jinja
if [ -f "$tmpl" ]; then
  start_server --parallel 4 -c 2048
  check "four forced calls at once equal each alone" python3 - "$base" "$etools" <<'PY'
import json, sys, threading, urllib.request
base, tools = sys.argv[1], json.loads(sys.argv[2])
tools.append({"type": "function", "function": {"name": "now", "parameters": {"type": "object",
              "properties": {"zone": {"enum": ["utc", "cet"]}}, "required": ["zone"]}}})
def ask(i):
    name = ["get_weather", "now"][i % 2]
    body = {"messages": [{"role": "user", "content": "Question %d?" % i}], "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": name}}, "max_tokens": 300,
            "temperature": 0, "logit_bias": {"1": 7, "92": 5}, "chat_template_kwargs": {"thinking": True}}
    r = urllib.request.urlopen(urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                                      {"Content-Type": "application/json"}), timeout=120)
    m = json.load(r)["choices"][0]["message"]
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m["tool_calls"]]
alone = [ask(i) for i in range(4)]
together = [None] * 4
ts = [threading.Thread(target=lambda i=i: together.__setitem__(i, ask(i))) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
ok = alone == together and all(len(a) == 1 and a[0][0] == ["get_weather", "now"][i % 2] for i, a in enumerate(alone))
if not ok:
    print(alone, together)
sys.exit(0 if ok else 1)
PY
  stop_server
fi
exit $fail
