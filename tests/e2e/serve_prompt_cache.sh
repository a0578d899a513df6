#!/usr/bin/env bash
# The server's prompt cache on a real conversation: on the trained model
# (assets/models/kjv-moe-Q8_0.gguf), a chat's second turn resends the first turn and
# its reply. It must be answered from the first turn's kept state (usage's
# prompt_tokens_details.cached_tokens covers the first turn's prompt, /metrics counts
# it) with the same text as a server started with --no-prompt-cache, which evaluates
# the whole prompt (cached_tokens 0).
# usage: serve_prompt_cache.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
model=$src/assets/models/kjv-moe-Q8_0.gguf
dir=$build/e2e-serve-prompt-cache; mkdir -p "$dir"
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
[ -f "$model" ] || { echo "skip: $model missing"; exit 77; }
fail=0
source "$src/tests/e2e/serve/server.sh"

conversation() { # writes $dir/turns-$1.json: both turns' replies and usage
  python3 - "$port" "$dir/turns-$1.json" <<'PY'
import http.client, json, sys
port, out = int(sys.argv[1]), sys.argv[2]
def chat(messages, stream):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = {"messages": messages, "max_tokens": 24, "temperature": 0, "stream": stream}
    if stream: body["stream_options"] = {"include_usage": True}
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.status
    if not stream:
        j = json.loads(r.read())
        return j["choices"][0]["message"]["content"], j["usage"]
    text, usage = "", None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]": continue
        ch = json.loads(line[6:])
        if ch.get("usage"): usage = ch["usage"]
        for c in ch["choices"]: text += c["delta"].get("content") or ""
    return text, usage
m = [{"role": "system", "content": "You answer in the words of the King James Bible."},
     {"role": "user", "content": "What did God create in the beginning?"}]
r1, u1 = chat(m, False)
m += [{"role": "assistant", "content": r1}, {"role": "user", "content": "And what was upon the face of the deep?"}]
r2, u2 = chat(m, True)
json.dump({"r1": r1, "u1": u1, "r2": r2, "u2": u2}, open(out, "w"))
PY
}

start_server --parallel 2 -c 512 -t 2 --profile none
conversation cache
curl -s "$base/metrics" >"$dir/metrics-cache"
stop_server
start_server --parallel 2 -c 512 -t 2 --profile none --no-prompt-cache
conversation off
stop_server

python3 - "$dir" <<'PY' || fail=1
import json, sys
d = sys.argv[1]
ok = True
def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
on, off = json.load(open(f"{d}/turns-cache.json")), json.load(open(f"{d}/turns-off.json"))
c1, c2 = on["u1"]["prompt_tokens_details"]["cached_tokens"], on["u2"]["prompt_tokens_details"]["cached_tokens"]
p1, p2 = on["u1"]["prompt_tokens"], on["u2"]["prompt_tokens"]
print(f"turn 1: {p1} prompt tokens, {c1} cached; turn 2: {p2} prompt tokens, {c2} cached")
check("turn 1 starts cold", c1 == 0)
check("turn 2 reuses at least the first turn's prompt", p1 <= c2 < p2)
check("both turns' text equals the server without the prompt cache", on["r1"] == off["r1"] and on["r2"] == off["r2"])
check("without the prompt cache nothing is cached",
      off["u2"]["prompt_tokens_details"]["cached_tokens"] == 0 and off["u2"]["prompt_tokens"] == p2)
m = {l.split()[0]: float(l.split()[1]) for l in open(f"{d}/metrics-cache") if l and l[0] != "#" and l.strip()}
check("/metrics counts the cached tokens", m.get("deltafin_prompt_cache_tokens_total") == c2 and
      m.get("deltafin_prompt_cache_hits_total") == 1)
check("/metrics' evaluated prompt tokens leave them out", m.get("deltafin_prompt_tokens_total") == p1 + p2 - c2)
sys.exit(0 if ok else 1)
PY
exit $fail
