#!/usr/bin/env bash
# deltafin serve against structurally mutated requests: valid bodies of every JSON
# endpoint (chat and text completions, Responses, Messages, count_tokens, tokenize,
# detokenize) with one to three values replaced by a value of another type (null,
# booleans, numbers, strings, arrays, objects) or removed. Every answer must be 200,
# 400 or 404 (a 500 is a field read without checking its type), and the server must
# stay up. Seeded, so a failure repeats.
# usage: serve_fuzz.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-fuzz
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
source "$src/tests/e2e/serve/common.sh"
start_server --parallel 4 -c 1024

for seed in 1 2; do
python3 - "$base" "$seed" <<'PY' || fail=1
import json, random, http.client, copy, sys, urllib.parse
base_url, seed = sys.argv[1], int(sys.argv[2])
random.seed(seed)
host = urllib.parse.urlparse(base_url)
bases = {
 "/v1/chat/completions": {"model":"tiny-qwen3moe-qwen2","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":None,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"y"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":True,"max_tokens":3,"temperature":0.5,"top_p":0.9,"seed":1,"stop":["z"],"logit_bias":{"1":2},"logprobs":True,"top_logprobs":2,"n":1,"stream":False,"stream_options":{"include_usage":True},"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}},"chat_template_kwargs":{"enable_thinking":False},"reasoning_effort":"low"},
 "/v1/completions": {"model":"tiny-qwen3moe-qwen2","prompt":"abc","max_tokens":3,"echo":True,"logprobs":2,"n":1,"best_of":1,"stop":"z","seed":3,"stream":False,"ignore_eos":True,"top_k":3,"min_p":0.1,"repeat_penalty":1.1},
 "/v1/responses": {"model":"tiny-qwen3moe-qwen2","instructions":"hi","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"y"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}],"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"r","schema":{"type":"object"}}},"max_output_tokens":3,"reasoning":{"effort":"low"},"stream":False,"store":True,"previous_response_id":None},
 "/v1/messages": {"model":"tiny-qwen3moe-qwen2","max_tokens":3,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"t1","name":"f","input":{"a":"b"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":False}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":True},"stop_sequences":["z"],"thinking":{"type":"enabled","budget_tokens":10},"stream":False},
 "/v1/messages/count_tokens": {"model":"tiny-qwen3moe-qwen2","messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]},
 "/tokenize": {"content":"abc","with_pieces":True},
 "/detokenize": {"tokens":[1,2,3]},
}
weird = [None, True, False, 0, -1, 1.5, 10**20, "", "x", [], {}, [None], {"type": None}, [1, "a"], "\u0000"]
def paths(v, p=()):
    yield p
    if isinstance(v, dict):
        for k in v: yield from paths(v[k], p + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v): yield from paths(x, p + (i,))
def setp(v, p, x):
    if not p: return x
    v = copy.deepcopy(v); cur = v
    for k in p[:-1]: cur = cur[k]
    if random.random() < 0.2 and isinstance(cur, dict): del cur[p[-1]]
    else: cur[p[-1]] = x
    return v
bad = 0; n = 0
for path, base in bases.items():
    ps = list(paths(base))
    for _ in range(150):
        b = base
        for _ in range(random.randint(1, 3)):
            p = random.choice(ps)
            try: b = setp(b, p, random.choice(weird))
            except Exception: pass
        c = http.client.HTTPConnection(host.hostname, host.port, timeout=60)
        c.request("POST", path, json.dumps(b))
        r = c.getresponse(); d = r.read().decode(errors="replace"); n += 1
        if r.status >= 500 or r.status not in (200, 400, 404):
            bad += 1
            if bad < 5: print("FAIL", r.status, path, json.dumps(b)[:600], d[:200])
print(("ok   " if bad == 0 else "FAIL ") + f"seed {seed}: {n} mutated requests, {bad} answered otherwise than 200/400/404")
sys.exit(1 if bad else 0)
PY
done
check "the server is still up" test "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200
stop_server
exit $fail
