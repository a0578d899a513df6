#!/usr/bin/env bash
# `deltafin chat` in a real terminal: tmux runs it in a pseudo-terminal and types
# into it (send-keys). A tiny synthetic model with random weights answers in
# gibberish, so the checks are about structure: prompts appear, answers stream,
# multi-line input works, Ctrl-C stops an answer and the program takes the next
# turn, /reset and /stats work, /exit, Ctrl-C twice and Ctrl-D quit cleanly.
# usage: chat_tty.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
command -v tmux >/dev/null || { echo "skip: tmux not installed (scripts/setup --test installs it)"; exit 77; }
shared=$src/../shared
vocab=$shared/vocab/ggml-vocab-qwen2.gguf
tmpl=$shared/templates/Qwen-Qwen2.5-7B-Instruct.jinja
[ -f "$vocab" ] && [ -f "$tmpl" ] || { echo "skip: $vocab or $tmpl missing"; exit 77; }

dir=$build/e2e-chat-tty; rm -rf "$dir"; mkdir -p "$dir"
m=$dir/chat.gguf
"$bin" synth --preset tiny --arch qwen3moe --type Q8_0 --vocab "$vocab" --chat-template "$tmpl" -o "$m" \
  2>"$dir/synth.err" || { cat "$dir/synth.err"; echo "synth failed"; exit 1; }

sock=deltafin-chat-$$
printf 'set -g remain-on-exit on\nset -g history-limit 100000\n' >"$dir/tmux.conf"
tm() { tmux -L "$sock" -f "$dir/tmux.conf" "$@"; }
trap 'tm kill-server 2>/dev/null' EXIT

fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
screen() { tm capture-pane -p -J -S - -t "$1"; }
prompts() { screen "$1" | grep -c '^> ' || true; }
dead() { [ "$(tm display-message -p -t "$1" '#{pane_dead}')" = 1 ]; }
# wait_until SECONDS COMMAND...: polls every 0.1 s.
wait_until() {
  local n=$(( $1 * 10 )); shift
  while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}
# Each program runs under a bash that writes its exit status to $dir/NAME.status
# (tmux's #{pane_dead_status} sometimes came back empty under ctest). The trap
# keeps that bash alive through the Ctrl-C the tests send to the pane.
start() { # name, command...
  local name=$1; shift
  tm new-session -d -s "$name" -x 200 -y 50 \
    bash -c 'trap : INT; "$@"; echo $? >"$0"' "$dir/$name.status" "$@"
}
status_is() { [ -s "$dir/$1.status" ] && [ "$(cat "$dir/$1.status")" = "$2" ]; }
more_prompts() { [ "$(prompts "$1")" -gt "$2" ]; }
has() { screen "$1" | grep -qF -- "$2"; }
# Sends a line and waits for the answer to end (a new prompt); false on timeout.
say() { # session text
  local before; before=$(prompts "$1")
  tm send-keys -t "$1" -l -- "$2"; tm send-keys -t "$1" Enter
  wait_until 60 more_prompts "$1" "$before"
}

# --- Session A: turns, multi-line input, /stats, /reset, /help, /exit ---------
start a "$bin" chat -m "$m" -n 16 --temp 0 -t 2
check "A: the prompt appears" wait_until 60 more_prompts a 0
check "A: a banner says how to get help" has a "/help"
say a "hello there"; check "A: first turn answered" test $? = 0
ans=$(screen a | awk '/^> hello there/{f=1; next} f && /^> /{exit} f' | tr -d '\n ')
check "A: the answer is not empty" test -n "$ans"

before=$(prompts a)
tm send-keys -t a -l 'first line \'; tm send-keys -t a Enter
check "A: a line ending in \\ asks for more" wait_until 10 has a "... "
tm send-keys -t a -l 'second line'; tm send-keys -t a Enter
check "A: the continued message is answered" wait_until 60 more_prompts a "$before"

# Typed as a person would: each line after the previous one's prompt appeared.
conts() { screen a | grep -o '^\.\.\. \|[^.]\.\.\. ' | wc -l; }
more_conts() { [ "$(conts)" -gt "$1" ]; }
before=$(prompts a)
for line in '"""' 'block one' 'block two'; do
  c=$(conts); tm send-keys -t a -l -- "$line"; tm send-keys -t a Enter
  check "A: \"\"\" block: a continuation prompt after '$line'" wait_until 10 more_conts "$c"
done
tm send-keys -t a -l -- '"""'; tm send-keys -t a Enter
check "A: a \"\"\" block is answered" wait_until 60 more_prompts a "$before"

say a "/stats"
st=$(screen a | grep -E '^prompt: [0-9]+ tokens, [0-9]+ reused' | tail -1)
check "A: /stats prints the prompt figures" test -n "$st"
reused=$(echo "$st" | sed -E 's/^prompt: [0-9]+ tokens, ([0-9]+) reused.*/\1/')
check "A: the third turn reused the cached conversation ($reused tokens)" test "${reused:-0}" -gt 10
check "A: /stats prints decode speed" sh -c "tmux -L $sock capture-pane -p -J -S - -t a | grep -Eq '^answer: [0-9]+ tokens in [0-9.]+ s \([0-9.]+ tok/s\)'"
check "A: /stats prints context use" sh -c "tmux -L $sock capture-pane -p -J -S - -t a | grep -Eq '^context: [1-9][0-9]* of 4096 tokens used'"

say a "/reset"
check "A: /reset confirms" has a "(conversation cleared)"
say a "/stats"
check "A: after /reset the context is empty" has a "context: 0 of 4096 tokens used"
say a "/help"
check "A: /help lists /system" has a "/system TEXT"
say a "/nonsense"
check "A: an unknown command says so" has a "unknown command '/nonsense'"
say a "hello again"
check "A: a turn after /reset is answered" test $? = 0
tm send-keys -t a -l '/exit'; tm send-keys -t a Enter
check "A: /exit quits" wait_until 10 dead a
check "A: exit status 0" wait_until 5 status_is a 0

# --- Session B: Ctrl-C stops a long answer, not the program -------------------
# -n -1 and a large context: answers run until stopped.
start b "$bin" chat -m "$m" -n -1 -c 32768 --temp 0 -t 2
wait_until 60 more_prompts b 0 || { echo "FAIL B: no prompt"; screen b; exit 1; }
grown() { [ "$(screen b | wc -c)" -gt "$1" ]; }
for turn in "write a very long story" "and another one"; do
  n0=$(screen b | wc -c)
  tm send-keys -t b -l "$turn"; tm send-keys -t b Enter
  wait_until 30 grown $((n0 + ${#turn} + 40)); n1=$(screen b | wc -c)
  check "B: the answer to '$turn' streams (output grows while it runs)" wait_until 10 grown "$n1"
  before=$(prompts b)
  tm send-keys -t b C-c
  check "B: Ctrl-C stops the answer" wait_until 10 has b "[stopped]"
  check "B: ... and a new prompt follows" wait_until 10 more_prompts b "$before"
  check "B: ... and the program is still running" sh -c "! tmux -L $sock display-message -p -t b '#{pane_dead}' | grep -q 1"
done
check "B: the turn after Ctrl-C was answered" sh -c "test \$(tmux -L $sock capture-pane -p -J -S - -t b | grep -c '\[stopped\]') -ge 2"
tm send-keys -t b C-c
check "B: Ctrl-C at the prompt says how to quit" wait_until 10 has b "(Ctrl-C again or Ctrl-D to quit)"
sleep 0.3
check "B: ... and does not quit" sh -c "! tmux -L $sock display-message -p -t b '#{pane_dead}' | grep -q 1"
tm send-keys -t b C-d
check "B: Ctrl-D quits" wait_until 10 dead b
check "B: exit status 0" wait_until 5 status_is b 0

# --- Session C: Ctrl-C twice at the prompt quits ------------------------------
start c "$bin" chat -m "$m" -n 8 -t 2
wait_until 60 more_prompts c 0 || { echo "FAIL C: no prompt"; screen c; exit 1; }
tm send-keys -t c C-c; wait_until 10 has c "Ctrl-C again"
tm send-keys -t c C-c
check "C: Ctrl-C twice at the prompt quits" wait_until 10 dead c

if [ $fail != 0 ]; then
  for s in a b c; do echo "--- screen of session $s"; screen $s | tail -40; done
fi
exit $fail
