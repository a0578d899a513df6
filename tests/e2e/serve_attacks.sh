#!/usr/bin/env bash
# deltafin serve against a hostile client, over real sockets (issue 22): JSON nested
# 20,000 deep in every place a request carries JSON (a message, chat_template_kwargs,
# tools' parameters, a tool call's arguments string, the Messages API's input_schema,
# every endpoint's body), objects with 100,000 keys, invalid UTF-8, a number past
# double's range, form Content-Types, ambiguous framing (two Content-Lengths,
# Content-Length beside Transfer-Encoding), and slowloris: more connections than a
# client may hold, each trickling a header line every 0.5 s. The server must stay
# up, answer /health and a normal request during and after every attack, and give
# the stated statuses (400 naming the limit, 408, 503). About 20 s.
# usage: serve_attacks.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-attacks
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
source "$src/tests/e2e/serve/common.sh"
start_server --parallel 2 -c 4096 --request-timeout 3 --max-client-connections 16 --max-connections 48

python3 - "$port" "$pid" <<'PY' || fail=1
import json, os, socket, sys, threading, time, http.client
port, pid = int(sys.argv[1]), int(sys.argv[2])
bad = 0
def check(what, ok, detail=""):
    global bad
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f"  [{detail}]"))
    if not ok: bad += 1
def alive():
    try: os.kill(pid, 0); return True
    except OSError: return False

def post(path, body, headers=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body if isinstance(body, bytes) else body.encode(), h)
    r = c.getresponse(); d = r.read()
    c.close()
    return r.status, d
def get(path, timeout=5, source="127.0.0.1"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    c.request("GET", path); r = c.getresponse(); d = r.read(); c.close()
    return r.status, d
def message(d):
    try: return json.loads(d)["error"]["message"]
    except Exception: return d[:200].decode(errors="replace")
def healthy():
    try: return get("/health")[0] == 200
    except Exception: return False
def normal():  # a request that does work: tokenize
    try:
        s, d = post("/tokenize", json.dumps({"content": "hello world"}), timeout=10)
        return s == 200 and len(json.loads(d)["tokens"]) > 0
    except Exception: return False
def raw(data, source="127.0.0.1", timeout=10):
    """Sends bytes on a fresh connection; returns everything read until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
    except socket.timeout:
        out += b"<still open>"
    s.close()
    return out

# --- 1. nesting ---------------------------------------------------------------
D = 20000
deep = "[" * D + "]" * D
model = "tiny-qwen3moe-qwen2"
user = {"role": "user", "content": "hi"}
cases = {
  "a message field": ("/v1/chat/completions", '{"model":"%s","max_tokens":1,"messages":[{"role":"user","content":"hi","x":%s}]}' % (model, deep)),
  "chat_template_kwargs": ("/v1/chat/completions", '{"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"a":%s}}' % deep),
  "tools[].function.parameters": ("/v1/chat/completions", '{"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","p":%s}}}]}' % deep),
  "response_format schema": ("/v1/chat/completions", '{"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","x":%s}}}}' % deep),
  "Messages input_schema": ("/v1/messages", '{"model":"%s","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object","x":%s}}]}' % (model, deep)),
  "count_tokens input_schema": ("/v1/messages/count_tokens", '{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":%s}]}' % deep),
  "Responses input": ("/v1/responses", '{"max_output_tokens":1,"input":[{"role":"user","content":"hi","x":%s}]}' % deep),
  "completions body": ("/v1/completions", '{"prompt":"hi","max_tokens":1,"x":%s}' % deep),
  "tokenize body": ("/tokenize", '{"content":"hi","x":%s}' % deep),
  "detokenize body": ("/detokenize", '{"tokens":%s}' % deep),
}
for what, (path, body) in cases.items():
    s, d = post(path, body)
    check(f"{D} deep in {what}: 400 naming the limit of 512", s == 400 and "512" in message(d) and "nested" in message(d), f"{s} {message(d)[:160]}")
check("after the nesting attacks: the server is up and /health answers", alive() and healthy())
# A tool call's arguments are a string holding JSON, parsed after the body: bounded too.
args = json.dumps({"a": json.loads("[" * 400 + "]" * 400)})[:-1] + "," + '"b":' + deep + "}"
body = json.dumps({"max_tokens": 1, "messages": [user, {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]}, {"role": "tool", "tool_call_id": "c1", "content": "r"}]})
s, d = post("/v1/chat/completions", body)
check(f"{D} deep in tool_calls[].function.arguments (a string): answered, not a crash", s in (200, 400) and alive(), f"{s} {message(d)[:160]}")
# Under the limit, the JSON goes all the way through (template, grammar): no crash.
ok_deep = "[" * 500 + "]" * 500
s, d = post("/v1/chat/completions", '{"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"a":%s},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","p":%s}}}]}' % (ok_deep, ok_deep))
check("500 deep in kwargs and tools (under the limit): 200", s == 200 and alive(), f"{s} {message(d)[:160]}")
s, d = post("/v1/messages", '{"model":"%s","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object","x":%s}}]}' % (model, ok_deep))
check("500 deep in input_schema (under the limit): 200", s == 200 and alive(), f"{s} {message(d)[:160]}")
schema = {"type": "object"}
for _ in range(240): schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
s, d = post("/v1/chat/completions", json.dumps({"max_tokens": 1, "messages": [user], "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}))
check("a response_format schema 480 deep (under the limit): 400 naming the grammar's own limit", s == 400 and "deeper than 32" in message(d) and alive(), f"{s} {message(d)[:160]}")

# --- 2. many keys -------------------------------------------------------------
def timed_post(body):
    t = time.time(); s, d = post("/tokenize", body); return s, d, time.time() - t
s, d, el = timed_post('{"content":"hi","x":{' + ",".join('"k%d":1' % i for i in range(100000)) + "}}")
check(f"100,000 keys in one object: 400 naming the limit of 1000, in {el:.2f} s", s == 400 and "1000 keys" in message(d) and el < 5, f"{s} {message(d)[:160]}")
# Parse time is linear: 350 objects of 1000 keys take about as long as the same bytes
# in 35,000 objects of 10 keys (a quadratic insert made the first 5x slower).
wide = '{"content":"hi","x":[' + ",".join('{' + ",".join('"k%d":1' % i for i in range(1000)) + "}" for _ in range(350)) + "]}"
narrow = '{"content":"hi","x":[' + ",".join('{' + ",".join('"k%d":1' % i for i in range(990, 1000)) + "}" for _ in range(35000)) + "]}"
s1, d1, el1 = timed_post(wide)
s2, d2, el2 = timed_post(narrow)
check(f"350 objects of 1,000 keys ({len(wide) >> 20} MB): 200 in {el1:.2f} s, the same bytes in objects of 10 keys {el2:.2f} s",
      s1 == 200 and s2 == 200 and el1 < 3 * el2 + 0.5, f"{s1} {s2}")
# --- 3. bytes and numbers -----------------------------------------------------
for what, body in [("invalid UTF-8 in a string", b'{"content":"a\xff\xfeb"}'),
                   ("a lone surrogate escape", b'{"content":"\\ud800"}'),
                   ("invalid UTF-8 in a key", b'{"\xc3":1,"content":"x"}')]:
    s, d = post("/tokenize", body)
    check(f"{what}: 400", s == 400 and "JSON" in message(d), f"{s} {message(d)[:160]}")
s, d = post("/v1/chat/completions", b'{"messages":[{"role":"user","content":"\xe2\x82"}],"max_tokens":1}')
check("invalid UTF-8 in a chat message: 400", s == 400, f"{s} {message(d)[:160]}")
for path, body in [("/v1/chat/completions", '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e400}'),
                   ("/v1/completions", '{"prompt":"hi","max_tokens":-1e400}'),
                   ("/v1/messages", '{"model":"%s","messages":[{"role":"user","content":"hi"}],"max_tokens":1e400}' % model)]:
    s, d = post(path, body)
    check(f"max_tokens 1e400 on {path}: 400", s == 400 and "number" in message(d), f"{s} {message(d)[:160]}")

# --- 4. Content-Type is not checked ---------------------------------------------
big = json.dumps({"content": "word " * 4000})  # 20 KB
for ct in ["application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz", "text/plain"]:
    s, d = post("/tokenize", big, {"Content-Type": ct})
    check(f"a 20 KB JSON body sent as {ct.split(';')[0]}: 200", s == 200 and len(json.loads(d)["tokens"]) >= 4000, f"{s} {message(d)[:160]}")

# --- 5. framing (RFC 9112) ----------------------------------------------------
body = b'{"content":"hi"}'
def req(headers, payload=body):
    return b"POST /tokenize HTTP/1.1\r\nHost: x\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + payload
for what, heads, want in [
    ("two different Content-Length headers", [b"Content-Length: 16", b"Content-Length: 5"], b" 400 "),
    ("a Content-Length list of different values", [b"Content-Length: 16, 5"], b" 400 "),
    ("a Content-Length that is not a number", [b"Content-Length: 1x"], b" 400 "),
    ("Content-Length and Transfer-Encoding", [b"Content-Length: 16", b"Transfer-Encoding: chunked"], b" 400 "),
    ("Transfer-Encoding gzip", [b"Transfer-Encoding: gzip"], b" 501 ")]:
    # A second request follows on the same connection: it must not be read (the first's body is unframed).
    out = raw(req(heads) + req([b"Content-Length: 16"]))
    check(f"{what}: {want.decode().strip()}, and the connection closes", out.startswith(b"HTTP/1.1" + want) and out.count(b"HTTP/1.1 ") == 1 and b"<still open>" not in out, out[:200])
out = raw(req([b"Content-Length: 16", b"Content-Length: 16"], body) .replace(b"Host: x", b"Host: x\r\nConnection: close"))
check("the same Content-Length twice: 200", out.startswith(b"HTTP/1.1 200 "), out[:200])
# Two requests in one write (pipelined) on a keep-alive connection: both answered.
out = raw(req([b"Content-Length: 16"]) + req([b"Content-Length: 16", b"Connection: close"]))
check("two pipelined requests: two 200s", out.count(b"HTTP/1.1 200 ") == 2 and out.count(b'"tokens"') == 2, out[:300])
# An answer given before the body is read (a refused CORS preflight) closes the
# connection: the body's bytes are not read as a next request.
sneak = b'GET /health HTTP/1.1\r\nHost: x\r\n\r\n'
out = raw(b"OPTIONS /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(sneak) + sneak)
check("a body left unread by a 403: the connection closes, the body is not a request", out.startswith(b"HTTP/1.1 403 ") and out.count(b"HTTP/1.1 ") == 1, out[:300])
check("after the framing attacks: /health and a request answer", healthy() and normal())

# --- 6. slowloris ---------------------------------------------------------------
# 40 connections from 127.0.0.2 (the cap per client is 16), each sending a header line
# every 0.5 s, the read timeout (30 s) never reached; the request deadline is 3 s.
N = 40
results = [None] * N
def slow(i):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=15, source_address=("127.0.0.2", 0))
        s.settimeout(15)
        t0 = time.time()
        out = b""
        try:
            s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\n")
            for k in range(30):  # 15 s of trickle at most
                time.sleep(0.5)
                s.sendall(b"X-Slow-%d: 1\r\n" % k)
        except OSError:
            pass
        try:
            while True:
                b = s.recv(4096)
                if not b: break
                out += b
        except OSError:
            pass
        results[i] = (out, time.time() - t0)
        s.close()
    except OSError as e:
        results[i] = (b"connect: " + str(e).encode(), 0)
threads = [threading.Thread(target=slow, args=(i,)) for i in range(N)]
for th in threads: th.start()
time.sleep(1.5)  # the attack is on: every connection open, trickling
t = time.time(); h = healthy(); el = time.time() - t
check(f"during slowloris: /health answers in {el:.2f} s", h and el < 2)
t = time.time(); n = normal(); el = time.time() - t
check(f"during slowloris: a normal request answers in {el:.2f} s", n and el < 3)
for th in threads: th.join(timeout=20)
refused = sum(1 for r in results if r and r[0].startswith(b"HTTP/1.1 503 "))
timed_out = [r for r in results if r and r[0].startswith(b"HTTP/1.1 408 ")]
check(f"slowloris: {refused} of {N} connections over the per-client cap got 503", refused == N - 16, [r[0][:80] for r in results if r][:3])
check(f"slowloris: the {len(timed_out)} others got 408 within 3-6 s", len(timed_out) == 16 and all(2.5 < r[1] < 6.5 for r in timed_out),
      [(r[0][:60], round(r[1], 1)) for r in results if r][:4])
check("408 names the limit", all(b"--request-timeout" in r[0] for r in timed_out))
check("after slowloris: the server is up, /health and a request answer", alive() and healthy() and normal())
# Every connection from 127.0.0.2 is closed again: its cap is free.
try: s, _ = get("/health", source="127.0.0.2"); ok = s == 200
except Exception: ok = False
check("after slowloris: the attacking address is served again", ok)

# Total cap (48): 16 from each of three addresses are served, the next is refused
# until one closes.
socks = []
for a in ["127.0.0.3", "127.0.0.4", "127.0.0.5"]:
    for _ in range(16):
        c = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(a, 0))
        c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # a head never finished
        socks.append(c)
time.sleep(1.5)  # each has its worker (the 3 s deadline is far)
out = raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", source="127.0.0.6")
check("48 connections open: a 49th gets 503 naming --max-connections", out.startswith(b"HTTP/1.1 503 ") and b"--max-connections" in out, out[:200])
for c in socks: c.close()
time.sleep(0.5)
check("after they close: /health and a request answer", healthy() and normal())
sys.exit(1 if bad else 0)
PY
check "the server is still running" alive $pid
# SIGTERM while a client trickles its request: the server does not wait for it.
python3 -c "
import socket, time
s = socket.create_connection(('127.0.0.1', $port)); s.sendall(b'POST /tokenize HTTP/1.1\r\nHost: x\r\n')
time.sleep(6)" &
slow=$!
sleep 0.5
t0=$(date +%s%N)
stop_server
check "SIGTERM with a slow client connected: stopped in $(( ($(date +%s%N) - t0) / 1000000 )) ms (< 2 s)" test $(( ($(date +%s%N) - t0) / 1000000 )) -lt 2000
kill $slow 2>/dev/null; wait $slow 2>/dev/null
exit $fail
