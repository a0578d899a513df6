#!/usr/bin/env python3
"""Aggregate throughput and per-client latency of `deltafin serve` with 1, 2, 4 and 8
concurrent clients, measured side by side against one server process (so the ratios
hold on a shared, noisy machine).

Each client sends greedy /v1/completions requests (distinct prompts, streaming, so
time to first token is seen) back to back for --seconds per level. Reported per level:
aggregate generated tokens/s, tokens per CPU-second of the server (robust to other
load on the machine), per-client tokens/s, mean request latency and time to
first token, and the expert reads the level caused (from /metrics).

  nice -n 10 python3 bench/serve_bench.py --bin build/deltafin -m MODEL.gguf --mem 1500M \
      --levels 1,2,4,8 --tokens 32 --seconds 60 [--json out.json]
"""
import argparse, http.client, json, os, re, statistics, subprocess, sys, threading, time

PROMPTS = [
    "The history of the printing press begins", "In a small village by the sea there lived",
    "def parse_config(path):", "The three laws of thermodynamics state that",
    "Once the rain stopped, the children ran", "Photosynthesis converts light energy into",
    "SELECT name, count(*) FROM orders", "The best way to learn a new language is",
]


def metrics(host, port):
    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def sse_chunks(response):
    """The JSON chunks of a streamed (SSE) response, up to data: [DONE]."""
    for raw in response:
        line = raw.decode().strip()
        if line == "data: [DONE]":
            return
        if line.startswith("data: "):
            yield json.loads(line[6:])


def one_request(host, port, prompt, tokens):
    c = http.client.HTTPConnection(host, port, timeout=600)
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    t0 = time.time()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    ttft, n = None, 0
    for ch in sse_chunks(r):
        if ch.get("usage"):
            n = ch["usage"]["completion_tokens"]
        if ttft is None and ch["choices"] and ch["choices"][0]["text"]:
            ttft = time.time() - t0
    return n, time.time() - t0, ttft or 0.0


def cpu_s(pid):
    """User + system CPU seconds of a process (all its threads)."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def level(host, port, clients, tokens, seconds, pid, preamble=""):
    results = [[] for _ in range(clients)]
    stop_at = time.time() + seconds

    def client(i):
        k = i
        while time.time() < stop_at:
            results[i].append(one_request(host, port, preamble + PROMPTS[k % len(PROMPTS)], tokens))
            k += clients

    m0 = metrics(host, port)
    c0 = cpu_s(pid)
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads: t.start()
    for t in threads: t.join()
    wall = time.time() - t0
    cpu = cpu_s(pid) - c0
    m1 = metrics(host, port)
    reqs = [r for rs in results for r in rs]
    toks = sum(r[0] for r in reqs)
    d = lambda k: m1.get(k, 0) - m0.get(k, 0)
    return {
        "clients": clients, "requests": len(reqs), "tokens": toks, "wall_s": wall,
        "aggregate_tok_s": toks / wall, "cpu_s": cpu, "tok_per_cpu_s": toks / max(cpu, 1e-9),
        "per_client_tok_s": statistics.mean(sum(r[0] for r in rs) / wall for rs in results),
        "latency_s": statistics.mean(r[1] for r in reqs), "ttft_s": statistics.mean(r[2] for r in reqs),
        "rows_per_step": d("deltafin_batch_rows_total") / max(1, d("deltafin_batch_steps_total")),
        "expert_reads": d("deltafin_expert_reads_total"),
        "read_gb": d("deltafin_expert_read_bytes_total") / 1e9,
        "read_gbps": d("deltafin_expert_read_bytes_total") / 1e9 / wall,
        "wait_share": d("deltafin_expert_wait_seconds_total") / wall,
        "reads_per_token": d("deltafin_expert_reads_total") / max(1, toks),
        "lookups_per_token": (d('deltafin_expert_cache_lookups_total{tier="ram"}') +
                              d('deltafin_expert_cache_lookups_total{tier="disk"}')) / max(1, toks),
        "prompt_evaluated_per_req": d("deltafin_prompt_tokens_total") / max(1, len(reqs)),
        "prompt_cached_per_req": d("deltafin_prompt_cache_tokens_total") / max(1, len(reqs)),
        "hit_rate": d('deltafin_expert_cache_lookups_total{tier="ram"}') /
                    max(1, d('deltafin_expert_cache_lookups_total{tier="ram"}') +
                        d('deltafin_expert_cache_lookups_total{tier="disk"}')),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/deltafin")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--mem", default="", help="--mem for the server (small enough that experts stream)")
    ap.add_argument("--levels", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=32, help="tokens per request")
    ap.add_argument("--seconds", type=float, default=60, help="per level")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=1024, help="the server's -c (its states come out of --mem)")
    ap.add_argument("--json", default="")
    ap.add_argument("--preamble-file", default="", help="text whose first --preamble-words words open every prompt "
                    "(a shared system prompt)")
    ap.add_argument("--preamble-words", type=int, default=300)
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra argument for `deltafin serve` (repeat; e.g. --server-arg=--spec --server-arg=off)")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    cmd = [a.bin, "serve", "-m", a.model, "--port", "0", "--parallel", str(max(levels)), "-c", str(a.ctx),
           "--profile", "none"]
    if a.mem: cmd += ["--mem", a.mem]
    if a.threads: cmd += ["-t", str(a.threads)]
    cmd += a.server_arg
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    try:
        line = srv.stdout.readline()
        m = re.search(r"http://([\d.]+):(\d+)", line)
        if not m: sys.exit(f"server did not start: {line}")
        host, port = m.group(1), int(m.group(2))
        print(f"server: {' '.join(cmd)}", file=sys.stderr)
        one_request(host, port, "warm up", 8)
        preamble = ""
        if a.preamble_file:
            preamble = " ".join(open(a.preamble_file).read().split()[: a.preamble_words]) + "\n\n"
        rows = [level(host, port, c, a.tokens, a.seconds, srv.pid, preamble) for c in levels]
    finally:
        srv.terminate()
        srv.wait(60)
    base = rows[0]["aggregate_tok_s"]
    cbase = rows[0]["tok_per_cpu_s"]
    print("| clients | aggregate tok/s | x vs 1 | tok per CPU-s | x vs 1 | per-client tok/s | latency s | TTFT s | rows/step | "
          "expert lookups/token | expert reads/token | read GB/s | waiting for experts | RAM hit rate | "
          "prompt tokens evaluated / cached per request |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['clients']} | {r['aggregate_tok_s']:.2f} | {r['aggregate_tok_s'] / base:.2f} | "
              f"{r['tok_per_cpu_s']:.2f} | {r['tok_per_cpu_s'] / cbase:.2f} | "
              f"{r['per_client_tok_s']:.2f} | {r['latency_s']:.2f} | {r['ttft_s']:.2f} | {r['rows_per_step']:.1f} | "
              f"{r['lookups_per_token']:.1f} | {r['reads_per_token']:.1f} | {r['read_gbps']:.2f} | {r['wait_share']:.0%} | {r['hit_rate']:.2f} | "
              f"{r['prompt_evaluated_per_req']:.0f} / {r['prompt_cached_per_req']:.0f} |")
    if a.json:
        with open(a.json, "w") as f: json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
