#!/usr/bin/env bash
# deltafin serve under concurrent load, on loopback: 16 streaming clients at once
# (4 in the batch, the rest queued; every fourth asks for n = 2 choices), 20 tokens
# each, greedy. Every response must complete, and each choice's text must equal what
# `deltafin run --temp 0` prints for the same prompt alone: batching, chunked
# prefill, queueing, the prompt cache (the prompts repeat) and copied choices change
# nothing.
# Bounded: the whole load must finish within 60 s.
# usage: serve_load.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-load
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
source "$src/tests/e2e/serve/common.sh"
start_server --parallel 4 -c 512 --prefill-chunk 16 -t 2

python3 - "$bin" "$model" "$base" "$dir" <<'PY' || fail=1
import http.client, json, subprocess, sys, threading, time, urllib.parse
bin, model, base, out = sys.argv[1:5]
host = urllib.parse.urlparse(base)
prompts = ["The quick brown fox", "Once upon a time, in a land far away,",
           "def fibonacci(n):", "1, 2, 3, 4,"] * 4
N = 20

def stream(i, results):
    c = http.client.HTTPConnection(host.hostname, host.port, timeout=60)
    n = 2 if i % 4 == 3 else 1
    body = {"prompt": prompts[i], "max_tokens": N, "temperature": 0, "stream": True, "n": n,
            "stream_options": {"include_usage": True}}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    text, done, finish, usage = [""] * n, False, None, None
    for raw in r:
        line = raw.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        ch = json.loads(line[6:])
        if ch.get("usage"):
            usage = ch["usage"]
        for choice in ch["choices"]:
            text[choice["index"]] += choice["text"]
            finish = choice["finish_reason"] or finish
    results[i] = (r.status, done, finish, usage, text)

t0 = time.time()
results = [None] * len(prompts)
threads = [threading.Thread(target=stream, args=(i, results)) for i in range(len(prompts))]
for t in threads: t.start()
for t in threads: t.join(70)
elapsed = time.time() - t0
print(f"{len(prompts)} concurrent streams of {N} tokens: {elapsed:.1f} s")
ok = True
def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
check("the load finished within 60 s", elapsed < 60)
check("every stream completed with [DONE]", all(r and r[0] == 200 and r[1] for r in results))
refs = {}
for p in set(prompts):
    ref = subprocess.run([bin, "run", "-m", model, "-p", p, "-n", str(N), "--temp", "0", "-t", "2"],
                         capture_output=True, text=True, check=True).stdout
    refs[p] = ref[:-1] if ref.endswith("\n") else ref
for i, r in enumerate(results):
    if not r: continue
    status, done, finish, usage, text = r
    same = all(t == refs[prompts[i]] for t in text)
    if not same:
        print(f"  stream {i}: {text!r}\n  alone:     {refs[prompts[i]]!r}")
    check(f"stream {i}: greedy text of its {len(text)} choice(s) equals `deltafin run --temp 0` alone", same)
    check(f"stream {i}: usage counts {N} tokens a choice or an early stop",
          usage is not None and (usage["completion_tokens"] == N * len(text) or finish == "stop"))
sys.exit(0 if ok else 1)
PY
curl -s "$base/metrics" >"$dir/metrics" 2>/dev/null
steps=$(grep '^deltafin_batch_steps_total ' "$dir/metrics" | awk '{print $2}')
rows=$(grep '^deltafin_batch_rows_total ' "$dir/metrics" | awk '{print $2}')
echo "batched steps: $steps, rows: $rows"
check "steps really batched several sequences (rows/steps > 2)" python3 -c "import sys; sys.exit(0 if float('$rows') / float('$steps') > 2 else 1)"
stop_server
exit $fail
