#!/usr/bin/env bash
# The four APIs of deltafin serve under concurrent load, on loopback: 16 clients at
# once (4 in the batch, the rest queued), each sending the same greedy conversation
# through chat completions, the Responses API or Anthropic's Messages API, streamed or
# not. Every reply must complete, and its text must equal the chat reply to that
# conversation alone: batching, queueing, the prompt cache and each API's writer
# change nothing. Bounded: the whole load must finish within 60 s.
# usage: serve_load_apis.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-load-apis
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
source "$src/tests/e2e/serve/common.sh"
start_server --parallel 4 -c 1024 --prefill-chunk 16 -t 2

python3 - "$base" <<'PY' || fail=1
import http.client, json, sys, threading, time, urllib.parse
host = urllib.parse.urlparse(sys.argv[1])
N = 16
convs = [("Be brief.", "Say hi"), ("You are a poet.", "Write about the sea"), ("", "What is 2+2?"),
         ("Answer in French.", "Where is Paris?")]

def post(path, body, stream):
    c = http.client.HTTPConnection(host.hostname, host.port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    assert r.status == 200, (path, r.status, data[:300])
    if not stream:
        return json.loads(data)
    return [json.loads(l[6:]) for l in data.split("\n") if l.startswith("data: {")]

def chat_messages(system, user):
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]

def ask(api, stream, system, user):
    """The reply's text through one API, and whether the reply was whole."""
    if api == "chat":
        b = {"messages": chat_messages(system, user), "max_tokens": N, "temperature": 0, "stream": stream}
        if not stream:
            j = post("/v1/chat/completions", b, False)
            return j["choices"][0]["message"]["content"], j["choices"][0]["finish_reason"] in ("length", "stop")
        ev = post("/v1/chat/completions", b, True)
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev if e["choices"])
        return text, any(e["choices"] and e["choices"][0]["finish_reason"] for e in ev)
    if api == "responses":
        b = {"input": user, "max_output_tokens": N, "temperature": 0, "stream": stream}
        if system: b["instructions"] = system
        if not stream:
            j = post("/v1/responses", b, False)
        else:
            ev = post("/v1/responses", b, True)
            assert [e["sequence_number"] for e in ev] == list(range(len(ev))), "events out of order"
            j = ev[-1]["response"]
        text = "".join(o["content"][0]["text"] for o in j["output"] if o["type"] == "message")
        return text, j["status"] in ("completed", "incomplete")
    b = {"messages": [{"role": "user", "content": user}], "max_tokens": N, "temperature": 0, "stream": stream}
    if system: b["system"] = system
    if not stream:
        j = post("/v1/messages", b, False)
        return "".join(x["text"] for x in j["content"] if x["type"] == "text"), j["stop_reason"] is not None
    ev = post("/v1/messages", b, True)
    text = "".join(e["delta"]["text"] for e in ev if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta")
    return text, ev[-1]["type"] == "message_stop"

# The replies alone, one request at a time.
alone = [ask("chat", False, s, u)[0] for s, u in convs]
jobs = [(api, stream, k) for k in range(4) for api, stream in
        (("chat", True), ("responses", k % 2 == 0), ("messages", k % 2 == 1), ("responses", k % 2 == 1))]
assert len(jobs) == 16
results = [None] * len(jobs)
def run(i):
    api, stream, k = jobs[i]
    try:
        results[i] = ask(api, stream, *convs[k])
    except Exception as e:
        results[i] = ("ERROR " + repr(e), False)
t0 = time.time()
threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
for t in threads: t.start()
for t in threads: t.join(90)
took = time.time() - t0
bad = 0
for (api, stream, k), res in zip(jobs, results):
    ok = res is not None and res[1] and res[0] == alone[k]
    if not ok:
        bad += 1
        print(f"FAIL {api} stream={stream} conversation {k}: {res!r} != {alone[k]!r}")
print(("ok   " if bad == 0 else "FAIL ") + f"16 concurrent replies through chat, responses and messages equal the chat reply alone ({16 - bad}/16)")
print(("ok   " if took < 60 else "FAIL ") + f"the load finished in {took:.1f} s (limit 60)")
sys.exit(1 if bad or took >= 60 else 0)
PY
check "the server is still up" test "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200
stop_server
exit $fail
