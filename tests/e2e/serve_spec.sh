#!/usr/bin/env bash
# Speculation inside the server: on the trained model (assets/models/kjv-moe-Q8_0.gguf),
# four concurrent greedy requests whose text repeats (a verse quoted back) get their
# prompt-lookup guesses verified in the batched steps. Each response must equal
# `deltafin run --temp 0 --spec off` alone; /metrics must show guesses verified and
# most of them kept, no more batch steps than without, and --spec off no guesses.
# --spec self (the model drafting for itself: every expert is resident here, so its
# draft costs a pass and the adaptive speculator mostly only shadows) gives the same
# texts; tests/unit/test_decoder.cpp has the server verify self and MTP guesses.
# usage: serve_spec.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
model=$src/assets/models/kjv-moe-Q8_0.gguf
dir=$build/e2e-serve-spec; mkdir -p "$dir"
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
[ -f "$model" ] || { echo "skip: $model missing"; exit 77; }
fail=0
source "$src/tests/e2e/serve/server.sh"

run_level() { # spec mode -> writes $dir/out-MODE.json and $dir/metrics-MODE
  local mode=$1
  start_server --parallel 4 -c 512 -t 2 --spec "$mode" --profile none
  python3 - "$port" "$dir/out-$mode.json" <<'PY'
import http.client, json, sys, threading
port, out = int(sys.argv[1]), sys.argv[2]
verse = "In the beginning God created the heaven and the earth. And the earth was without form, and void."
prompts = [f"{verse} {verse} {verse[:20]}", f"{verse} {verse[:40]}",
           "And God said, Let there be light: and there was light. And God said, Let there be light",
           "And the evening and the morning were the first day. And the evening and the morning were"]
res = [None] * len(prompts)
def go(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps({"prompt": prompts[i], "max_tokens": 48, "temperature": 0}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    res[i] = (r.status, json.loads(r.read()))
ts = [threading.Thread(target=go, args=(i,)) for i in range(len(prompts))]
for t in ts: t.start()
for t in ts: t.join(150)
json.dump({"prompts": prompts, "texts": [r[1]["choices"][0]["text"] if r and r[0] == 200 else None for r in res]},
          open(out, "w"))
PY
  curl -s "$base/metrics" >"$dir/metrics-$mode"
  stop_server
}

run_level auto
run_level off
run_level self
python3 - "$bin" "$model" "$dir" <<'PY' || fail=1
import json, subprocess, sys
bin, model, d = sys.argv[1:4]
ok = True
def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
auto, off = json.load(open(f"{d}/out-auto.json")), json.load(open(f"{d}/out-off.json"))
selfs = json.load(open(f"{d}/out-self.json"))
for i, p in enumerate(auto["prompts"]):
    ref = subprocess.run([bin, "run", "-m", model, "-p", p, "-n", "48", "--temp", "0", "--spec", "off", "-t", "2"],
                         capture_output=True, text=True, check=True).stdout
    ref = ref[:-1] if ref.endswith("\n") else ref
    check(f"request {i}: --spec auto text equals `run --spec off` alone", auto["texts"][i] == ref)
    check(f"request {i}: --spec off text equals it too", off["texts"][i] == ref)
    check(f"request {i}: --spec self text equals it too", selfs["texts"][i] == ref)
def metric(mode, name):
    for l in open(f"{d}/metrics-{mode}"):
        if l.startswith(name + " "): return float(l.split()[1])
    return None
drafted, kept = metric("auto", "deltafin_spec_drafted_tokens_total"), metric("auto", "deltafin_spec_accepted_tokens_total")
print(f"auto: {kept:.0f} of {drafted:.0f} guesses kept")
check("auto: guesses were verified and most were kept", drafted and kept and kept > 0.5 * drafted)
gen = metric("auto", "deltafin_generated_tokens_total")
steps = metric("auto", "deltafin_batch_steps_total")
gen_off, steps_off = metric("off", "deltafin_generated_tokens_total"), metric("off", "deltafin_batch_steps_total")
print(f"steps for {gen:.0f} tokens: {steps:.0f} with speculation, {steps_off:.0f} without")
# The batch steps as long as its slowest stream: auto drafts where its measured pass
# times say guesses pay, so on a loaded machine it may leave that stream unguessed (seen
# once: 49 and 49 while a build ran beside the test). Never more steps, then.
check("auto: no more batched steps than off for the same tokens", gen == gen_off and steps <= steps_off)
check("off: no guesses", metric("off", "deltafin_spec_drafted_tokens_total") == 0)
sys.exit(0 if ok else 1)
PY
exit $fail
