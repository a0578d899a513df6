#!/usr/bin/env bash
# The server's prompt cache on a real conversation: on the trained model
# (assets/models/kjv-moe-Q8_0.gguf), a chat's second turn resends the first turn and
# its reply. It must be answered from the first turn's kept state (usage's
# prompt_tokens_details.cached_tokens covers the first turn's prompt, /metrics counts
# it) with the same text as a server started with --no-prompt-cache, which evaluates
# the whole prompt (cached_tokens 0). And with one batch place, two users chatting in
# turn: each user's second turn finds its first turn's state parked in RAM
# (--prompt-cache-mem), not with --prompt-cache-mem 0, and the replies are the same.
# With --prompt-cache-dir, both users' second turns on a restarted server resume
# their first turns' states from disk.
# usage: serve_prompt_cache.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
model=$src/assets/models/kjv-moe-Q8_0.gguf
dir=$build/e2e-serve-prompt-cache; mkdir -p "$dir"
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
[ -f "$model" ] || { echo "skip: $model missing"; exit 77; }
fail=0
source "$src/tests/e2e/serve/server.sh"

conversation() { # NAME [USERS [PHASE]]: writes $dir/turns-NAME.json: both turns' replies and usage (users: 1 or 2,
                 # in turn); PHASE first: turn 1 only, second: turn 2 of what first wrote (another server)
  python3 - "$port" "$dir/turns-$1.json" "${2:-1}" "${3:-both}" <<'PY'
import http.client, json, sys
port, out, users, phase = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
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
chats = [[{"role": "system", "content": "You answer in the words of the King James Bible."},
          {"role": "user", "content": "What did God create in the beginning?"}],
         [{"role": "system", "content": "Thou art a scribe of the tribe of Levi."},
          {"role": "user", "content": "Who led the children of Israel out of Egypt?"}]][:users]
res = [{} for _ in chats]
if phase == "second":
    res = json.load(open(out))
    res = [res] if users == 1 else res
else:
    for i, m in enumerate(chats):
        res[i]["r1"], res[i]["u1"] = chat(m, False)
if phase != "first":
    for i, m in enumerate(chats):
        m += [{"role": "assistant", "content": res[i]["r1"]}, {"role": "user", "content": "And what was upon the face of the deep?"}]
        res[i]["r2"], res[i]["u2"] = chat(m, True)
json.dump(res[0] if users == 1 else res, open(out, "w"))
PY
}

start_server --parallel 2 -c 512 -t 2 --profile none
conversation cache
curl -s "$base/metrics" >"$dir/metrics-cache"
stop_server
start_server --parallel 2 -c 512 -t 2 --profile none --no-prompt-cache
conversation off
stop_server
start_server --parallel 1 -c 512 -t 2 --profile none --prompt-cache-mem 16M
conversation parked 2
curl -s "$base/metrics" >"$dir/metrics-parked"
stop_server
start_server --parallel 1 -c 512 -t 2 --profile none --prompt-cache-mem 0
conversation unparked 2
stop_server
# A directory that cannot be made: refused at start, naming the option.
timeout 60 "$bin" serve -m "$model" --port 0 --prompt-cache-dir /proc/deltafin-no-such-dir >/dev/null 2>"$dir/bad-dir.err"
rc=$?
check "an unusable --prompt-cache-dir is refused at start" \
  sh -c "test $rc -eq 1 && grep -q 'prompt-cache-dir' '$dir/bad-dir.err'"
# The disk tier: turn 1 on one server, turn 2 on the next one over the same directory.
rm -rf "$dir/pcache"
start_server --parallel 1 -c 512 -t 2 --profile none --prompt-cache-dir "$dir/pcache"
conversation restart 2 first
stop_server
start_server --parallel 1 -c 512 -t 2 --profile none --prompt-cache-dir "$dir/pcache"
grep -q "prompt cache on disk: .* (2 states" "$dir/serve.out" || { echo "FAIL the restarted server does not list 2 states:"; cat "$dir/serve.out"; fail=1; }
conversation restart 2 second
curl -s "$base/metrics" >"$dir/metrics-restart"
stop_server

python3 - "$dir" <<'PY' || fail=1
import json, sys
d = sys.argv[1]
ok = True
def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
def metrics(name):  # a /metrics text saved as $dir/NAME: {metric: value}
    return {l.split()[0]: float(l.split()[1]) for l in open(f"{d}/{name}") if l.strip() and l[0] != "#"}
on, off = json.load(open(f"{d}/turns-cache.json")), json.load(open(f"{d}/turns-off.json"))
c1, c2 = on["u1"]["prompt_tokens_details"]["cached_tokens"], on["u2"]["prompt_tokens_details"]["cached_tokens"]
p1, p2 = on["u1"]["prompt_tokens"], on["u2"]["prompt_tokens"]
print(f"turn 1: {p1} prompt tokens, {c1} cached; turn 2: {p2} prompt tokens, {c2} cached")
check("turn 1 starts cold", c1 == 0)
check("turn 2 reuses at least the first turn's prompt", p1 <= c2 < p2)
check("both turns' text equals the server without the prompt cache", on["r1"] == off["r1"] and on["r2"] == off["r2"])
check("without the prompt cache nothing is cached",
      off["u2"]["prompt_tokens_details"]["cached_tokens"] == 0 and off["u2"]["prompt_tokens"] == p2)
m = metrics("metrics-cache")
check("/metrics counts the cached tokens", m.get("deltafin_prompt_cache_tokens_total") == c2 and
      m.get("deltafin_prompt_cache_hits_total") == 1)
check("/metrics' evaluated prompt tokens leave them out", m.get("deltafin_prompt_tokens_total") == p1 + p2 - c2)
pk, un = json.load(open(f"{d}/turns-parked.json")), json.load(open(f"{d}/turns-unparked.json"))
cached = lambda r, t: r[f"u{t}"]["prompt_tokens_details"]["cached_tokens"]
for u in range(2):
    print(f"user {u + 1}, one batch place: turn 2 {pk[u]['u2']['prompt_tokens']} prompt tokens, "
          f"{cached(pk[u], 2)} cached when parked, {cached(un[u], 2)} without")
    check(f"user {u + 1}: turn 2 finds turn 1's parked state", cached(pk[u], 2) >= pk[u]["u1"]["prompt_tokens"])
    check(f"user {u + 1}: without parking, turn 2 does not", cached(un[u], 2) < un[u]["u1"]["prompt_tokens"])
    check(f"user {u + 1}: the same replies", all(pk[u][k] == un[u][k] for k in ("r1", "r2")))
check("user 1's replies equal the two-place server's", pk[0]["r1"] == on["r1"] and pk[0]["r2"] == on["r2"])
rs = json.load(open(f"{d}/turns-restart.json"))
for u in range(2):
    check(f"user {u + 1}: after a restart, turn 2 resumes turn 1's state from disk",
          cached(rs[u], 2) >= rs[u]["u1"]["prompt_tokens"])
    check(f"user {u + 1}: the same replies after the restart", all(rs[u][k] == un[u][k] for k in ("r1", "r2")))
mr = metrics("metrics-restart")
check("/metrics counts the disk hits", mr.get("deltafin_prompt_cache_disk_hits_total") == 2 and
      mr.get("deltafin_prompt_cache_disk_states", 0) >= 2)
mp = metrics("metrics-parked")
check("/metrics shows a parked state", mp.get("deltafin_prompt_cache_parked_states", 0) >= 1 and
      0 < mp.get("deltafin_prompt_cache_parked_bytes", 0) <= 16 << 20)
sys.exit(0 if ok else 1)
PY
exit $fail
