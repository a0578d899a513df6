#!/usr/bin/env python3
"""Multi-turn chats against `deltafin serve` with the prompt cache and without it,
servers started in turn (alternating --reps times, so the two sides see the same
machine). Every turn resends the whole conversation; --users conversations take
turns one after another (user 1's turn 1, user 2's turn 1, ..., user 1's turn 2, ...),
each opening with its own slice of --context-file. Reported per turn: prompt tokens,
tokens taken from the prompt cache, time to first token and expert bytes read during
the turn (from /metrics), medians over the users and repetitions.

  python3 bench/serve_turns.py --bin build/deltafin -m MODEL.gguf --mem 400M \
      --context-file assets/models/kjv-heldout.txt --context-words 1500 --turns 4 --tokens 32 --reps 3

The side without the cache gets --no-prompt-cache, or --off-arg (repeat) instead:
e.g. `--users 4 --parallel 1 --off-arg=--prompt-cache-mem --off-arg=0` compares the
RAM tier of the prompt cache (kept states parked beyond the batch places) with none.
With --restart every turn goes to a newly started server: the disk tier
(--prompt-cache-dir) against the RAM tiers alone, which a restart empties.
"""
import argparse, http.client, json, re, shutil, statistics, subprocess, sys, tempfile, time

from serve_bench import sse_chunks

QUESTIONS = ["Summarise the passage above.", "Who speaks in it?", "What happens next?",
             "Say it again in fewer words.", "Which line matters most?", "Why?"]


def metric(host, port, name):
    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def turn(host, port, messages, tokens):
    c = http.client.HTTPConnection(host, port, timeout=3600)
    body = {"messages": messages, "max_tokens": tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"HTTP {r.status}: {r.read()[:300]}")
    text, usage, ttft = "", None, None
    for ch in sse_chunks(r):
        if ch.get("usage"):
            usage = ch["usage"]
        for cc in ch["choices"]:
            d = cc["delta"].get("content") or ""
            if d and ttft is None:
                ttft = time.time() - t0
            text += d
    return text, usage, ttft or (time.time() - t0)


def start(cmd):
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"http://([\d.]+):(\d+)", srv.stdout.readline())
    if not m: sys.exit("server did not start")
    return srv, m.group(1), int(m.group(2))


def stop(srv):
    srv.terminate()
    srv.wait(120)


def conversation(a, cache):
    cmd = [a.bin, "serve", "-m", a.model, "--port", "0", "--parallel", str(a.parallel), "-c", str(a.ctx),
           "--profile", "none"]
    if a.mem: cmd += ["--mem", a.mem]
    if a.threads: cmd += ["-t", str(a.threads)]
    tmp = None
    if a.restart:  # both sides keep their RAM prompt cache; the cache side gets a disk tier too
        if cache:
            tmp = tempfile.mkdtemp(prefix="serve-turns-")
            cmd += ["--prompt-cache-dir", tmp]
    elif not cache:
        cmd += a.off_arg or ["--no-prompt-cache"]
    srv, host, port = start(cmd)
    rows = [[] for _ in range(a.turns)]  # rows[turn][user]
    try:
        words = open(a.context_file).read().split()
        chats = []
        for u in range(a.users):
            part = words[u * a.context_words: (u + 1) * a.context_words]
            chats.append([{"role": "system", "content": "You are a careful reader."},
                          {"role": "user", "content": " ".join(part) + "\n\n" + QUESTIONS[0]}])
        for t in range(a.turns):
            if a.restart and t > 0:
                stop(srv)
                srv, host, port = start(cmd)
            for messages in chats:
                b0 = metric(host, port, "deltafin_expert_read_bytes_total")
                text, usage, ttft = turn(host, port, messages, a.tokens)
                b1 = metric(host, port, "deltafin_expert_read_bytes_total")
                rows[t].append({"prompt": usage["prompt_tokens"],
                                "cached": usage["prompt_tokens_details"]["cached_tokens"],
                                "ttft": ttft, "mb": (b1 - b0) / 1e6, "text": text})
                messages += [{"role": "assistant", "content": text},
                             {"role": "user", "content": QUESTIONS[(t + 1) % len(QUESTIONS)]}]
    finally:
        stop(srv)
        if tmp: shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/deltafin")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--mem", default="")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--context-file", required=True, help="text whose first words open the conversation")
    ap.add_argument("--context-words", type=int, default=1500)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32, help="reply tokens per turn")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--users", type=int, default=1, help="conversations taking turns")
    ap.add_argument("--parallel", type=int, default=2, help="the server's --parallel")
    ap.add_argument("--off-arg", action="append", default=[],
                    help="what the side without the cache gets instead of --no-prompt-cache (repeat)")
    ap.add_argument("--restart", action="store_true",
                    help="restart the server before every turn: the side with the cache gets a disk tier "
                         "(--prompt-cache-dir, a fresh directory per run), the other only the RAM tiers")
    a = ap.parse_args()
    on, off = [], []
    for _ in range(a.reps):
        on.append(conversation(a, True))
        off.append(conversation(a, False))
    same = all(x["text"] == y["text"] for r1, r2 in zip(on, off) for t1, t2 in zip(r1, r2) for x, y in zip(t1, t2))
    print(f"same replies with and without the prompt cache: {same}")
    print("| turn | prompt tokens | cached | TTFT s, cache | TTFT s, off | x | expert MB, cache | expert MB, off |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    med = lambda runs, t, k: statistics.median(row[k] for r in runs for row in r[t])
    for t in range(a.turns):
        t_on, t_off = med(on, t, "ttft"), med(off, t, "ttft")
        print(f"| {t + 1} | {med(on, t, 'prompt'):.0f} | {med(on, t, 'cached'):.0f} | {t_on:.2f} | {t_off:.2f} | "
              f"{t_off / t_on:.1f} | {med(on, t, 'mb'):.0f} | {med(off, t, 'mb'):.0f} |")


if __name__ == "__main__":
    main()
