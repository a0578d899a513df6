#!/usr/bin/env bash
# What the command line tells a user, on the bundled trained model (kjv-moe):
#   - Ctrl-C during `run` stops the generation and still prints --stats (exit 130),
#     which start with the load time and the peak memory;
#   - sizes are printed in binary units (MiB, GiB: what --mem takes), every column of
#     the prefetch table is labelled, the speculation summary is in words;
#   - the model carries a chat template: `chat` talks to it without --chat-template,
#     and an answer without -n stops at the trained context (256 tokens);
#   - `serve` uses the same template and the same cap, and `--alias '*'` accepts any
#     model name (as llama-server) while the id stays the file's.
# usage: cli_feedback.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-cli-feedback; rm -rf "$dir"; mkdir -p "$dir"
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null' EXIT
fail=0
source "$src/tests/e2e/serve/server.sh"   # check, start_server
m=$src/assets/models/kjv-moe-Q8_0.gguf

# --- Ctrl-C during run ---
"$bin" run -m "$m" -p "And God said," -n -1 --ignore-eos -c 16384 -t 1 --stats >"$dir/int.out" 2>"$dir/int.err" &
pid=$!
for _ in $(seq 1 300); do [ -s "$dir/int.out" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
sleep 0.3
kill -INT $pid
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then echo "FAIL run did not stop within 10 s of SIGINT"; kill -9 $pid; fail=1; fi
wait $pid; rc=$?; pid=
check "Ctrl-C stops run with status 130 (rc $rc)" test $rc = 130
check "  and says it was interrupted" grep -q '^interrupted' "$dir/int.err"
check "  --stats still printed: tokens decoded, stop: cancelled" sh -c \
  "grep -Eq '^decode: [1-9][0-9]* tokens' '$dir/int.err' && grep -q 'stop: cancelled' '$dir/int.err'"
check "  load time and peak memory" grep -Eq '^load: [0-9.]+ s; peak memory \(RSS\): [0-9.]+ MiB' "$dir/int.err"

# --- units, labels, words (a streamed run: the expert cache, prefetch and I/O lines) ---
"$bin" run -m "$m" -p "And the LORD spake unto Moses, saying," -n 32 --temp 0 --mem 72M --prefetch on --stats \
  >/dev/null 2>"$dir/st.err"; rc=$?
check "streamed run --stats (rc $rc)" sh -c "test $rc = 0 && grep -q '^expert cache: ' '$dir/st.err'"
check "  sizes in MiB/GiB only (no MB, GB, KB)" sh -c "! grep -Eq '[0-9] ?(MB|GB|KB)\\b|MB/s|GB/s' '$dir/st.err'"
check "  the prefetch table labels its last column" grep -Eq '^ +all +predictions .* now (on|off)$' "$dir/st.err"
check "  speculation in words" grep -Eq '^speculation: .* tokens from [0-9]+ model passes' "$dir/st.err"

# --- chat on the bundled model ---
printf 'In the beginning God created the heaven and the earth.\n' |
  "$bin" chat -m "$m" --temp 0 --stats >"$dir/chat.out" 2>"$dir/chat.err"; rc=$?
check "chat works on the bundled model without --chat-template (rc $rc)" sh -c \
  "test $rc = 0 && ! grep -q 'no chat template' '$dir/chat.err' && test -n \"\$(tr -d '[:space:]' <'$dir/chat.out')\""
n=$(sed -nE 's/^answer: ([0-9]+) tokens.*/\1/p' "$dir/chat.err")
check "  an answer without -n stops at the trained context, 256 tokens (${n:-none})" sh -c \
  "test -n '$n' && test '$n' -le 256 && (test '$n' = 256 || grep -q 'stop: eos' '$dir/chat.err')"

# --- serve: the same template, the same cap; --alias '*' ---
model=$m tmpl= start_server -c 1024 --parallel 1 --alias '*'
curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"In the beginning God created the heaven and the earth."}]}' \
  >"$dir/serve.json"
check "serve --alias '*': any model name is answered, the reply names the file's id" python3 -c "
import json,sys; j=json.load(open('$dir/serve.json')); sys.exit(0 if j['model']=='kjv-moe-Q8_0' and j['choices'][0]['message']['content'] else 1)"
check "  without max_tokens the reply stops at the trained context (256)" python3 -c "
import json,sys; j=json.load(open('$dir/serve.json')); u=j['usage']['completion_tokens']; f=j['choices'][0]['finish_reason']
sys.exit(0 if u <= 256 and (u == 256 or f == 'stop') else 1)"
check "  and says nothing of a missing template" sh -c "! grep -q 'no chat template' '$dir/serve.err'"
check "serve says how long the model took to load and the peak memory" \
  grep -Eq '^deltafin serve: model loaded in [0-9.]+ s; peak memory \(RSS\) so far [0-9.]+ MiB' "$dir/serve.out"
kill -TERM $pid; wait $pid 2>/dev/null; pid=
exit $fail
