#!/usr/bin/env bash
# One memory plan (runtime/memory_budget.h): `inspect --mem X -c N` prints the plan
# `run --stats --mem X -c N` applies, line for line; with --parallel P it prints the
# plan `serve --parallel P` applies, whose numbers /metrics exposes as gauges (and
# whose expert slots the store really has).
# usage: memory_plan.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
dir=$build/e2e-memory-plan; rm -rf "$dir"; mkdir -p "$dir"
command -v python3 >/dev/null || { echo "skip: needs python3"; exit 77; }
command -v curl >/dev/null || { echo "skip: needs curl"; exit 77; }
fail=0
model=$dir/tiny.gguf
source "$src/tests/e2e/serve/server.sh"
"$bin" synth --preset tiny --arch qwen3moe --experts 64 -o "$model" >/dev/null 2>"$dir/synth.err" ||
  { echo "FAIL synth: $(cat "$dir/synth.err")"; exit 1; }
plan_of() { sed -n '/^memory plan/,$p' "$1" | grep '^  ' | grep -v '^  expected read'; }
mem=64M; ctx=8192

"$bin" inspect "$model" --mem $mem --reserve 8M -c $ctx >"$dir/inspect" 2>&1
check "inspect prints a plan" grep -q '^  expert cache: ' "$dir/inspect"
check "  whose state is partly taken from the cache" grep -q 'sequences: .*from the expert cache' "$dir/inspect"
"$bin" run -m "$model" -p "hello world" -n 2 --mem $mem --reserve 8M -c $ctx --profile none --stats \
  >/dev/null 2>"$dir/run.err"
check "run --stats succeeds and prints its plan" grep -q '^memory plan:' "$dir/run.err"
plan_of "$dir/inspect" >"$dir/inspect.plan"
plan_of "$dir/run.err" >"$dir/run.plan"
check "run --stats prints the plan inspect printed" diff "$dir/inspect.plan" "$dir/run.plan"

"$bin" inspect "$model" --mem $mem --reserve 8M -c 2048 --parallel 2 >"$dir/inspect-serve" 2>&1
check "inspect --parallel plans the server's states and prompt cache" \
  sh -c "grep -q 'sequences: *3 states of 2048 positions' '$dir/inspect-serve' && grep -q '^  prompt cache: ' '$dir/inspect-serve'"
start_server --mem $mem --reserve 8M -c 2048 --parallel 2 -t 2 --profile none
curl -s "$base/metrics" >"$dir/metrics"
stop_server
python3 - "$dir/inspect-serve" "$dir/metrics" <<'PY' || fail=1
import re, sys
text, metrics = open(sys.argv[1]).read(), open(sys.argv[2]).read()
g = {m[0]: float(m[1]) for m in re.findall(r'^(deltafin_\w+) (\S+)$', metrics, re.M)}
def human(b):
    u = ["B", "KiB", "MiB", "GiB", "TiB"]; i = 0
    while b >= 1024 and i < 4: b /= 1024; i += 1
    return f"{b:.2f} {u[i]}"
line = lambda label: re.search(r'^  ' + label + r':\s+(.*)$', text, re.M).group(1)
checks = [
    ("budget", line("budget").startswith(human(g["deltafin_memory_budget_bytes"]))),
    ("budget is --mem", g["deltafin_memory_budget_bytes"] == 64 * 2**20),
    ("reserve", line("reserve").startswith(human(g["deltafin_memory_reserve_bytes"]))),
    ("core", line("core").startswith(human(g["deltafin_memory_core_resident_bytes"]))),
    ("expert cache", line("expert cache").startswith(human(g["deltafin_memory_expert_cache_bytes"]))),
    ("states", line("sequences").startswith(f"{int(g['deltafin_memory_sequence_states'])} states")),
    ("state bytes", f"({human(g['deltafin_memory_sequence_state_bytes'])} each)" in line("sequences")),
    ("states from the cache", f"{human(g['deltafin_memory_states_from_cache_bytes'])} from the expert cache" in line("sequences")),
    ("prompt cache", line("prompt cache").startswith(human(g["deltafin_memory_prompt_cache_bytes"]))),
    ("slots kept", line("experts kept").startswith(f"{int(g['deltafin_memory_expert_cache_planned_slots'])} slots")),
    ("the store has the planned slots", g["deltafin_expert_cache_slots"] == g["deltafin_memory_expert_cache_planned_slots"]),
    ("lending", line("long prompts").startswith(f"a batch may borrow {human(g['deltafin_memory_prompt_lend_bytes'])}")),
]
bad = [n for n, ok in checks if not ok]
for n, ok in checks: print(("ok  " if ok else "FAIL") + " /metrics and inspect --parallel agree: " + n)
sys.exit(1 if bad else 0)
PY
check "serve's start line counts the plan's states" grep -q 'sequence states 6.0 MiB' "$dir/serve.out"
# A model with an MTP (nextn) block: its state holds one more layer's KV cache, and
# inspect (which only checks the file, reading no weight) must plan it as run does.
mtp=$dir/mtp.gguf
"$bin" synth --preset tiny --arch deepseek2 --nextn 1 --experts 64 -o "$mtp" >/dev/null 2>"$dir/synth-mtp.err" ||
  { echo "FAIL synth (nextn): $(cat "$dir/synth-mtp.err")"; exit 1; }
"$bin" inspect "$mtp" --mem $mem --reserve 8M -c $ctx >"$dir/inspect-mtp" 2>&1
"$bin" run -m "$mtp" -p "hello world" -n 2 --mem $mem --reserve 8M -c $ctx --profile none --stats \
  >/dev/null 2>"$dir/run-mtp.err"
plan_of "$dir/inspect-mtp" >"$dir/inspect-mtp.plan"
plan_of "$dir/run-mtp.err" >"$dir/run-mtp.plan"
check "with an MTP block, run --stats prints the plan inspect printed" \
  sh -c "test -s '$dir/inspect-mtp.plan' && diff '$dir/inspect-mtp.plan' '$dir/run-mtp.plan'"
exit $fail
