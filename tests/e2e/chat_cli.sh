#!/usr/bin/env bash
# `deltafin chat` without a terminal (stdin from a pipe: one message per line, no
# prompts) and its errors for a newcomer: each names the problem and what to do.
# usage: chat_cli.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
dir=$build/e2e-chat-cli; rm -rf "$dir"; mkdir -p "$dir"
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
# A model without a chat template (synth's built-in vocabulary) and a ChatML template file.
plain=$dir/plain.gguf
"$bin" synth --preset tiny --arch qwen3moe -o "$plain" 2>/dev/null || { echo "synth failed"; exit 1; }
cat >"$dir/chatml.jinja" <<'T'
{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
T
m=$dir/chat.gguf
"$bin" synth --preset tiny --arch qwen3moe --chat-template "$dir/chatml.jinja" -o "$m" 2>/dev/null ||
  { echo "synth --chat-template failed"; exit 1; }

# Three messages: one line, one continued with \, one """ block; then /stats.
input=$'hello there\nfirst line \\\nsecond line\n"""\nblock one\nblock two\n"""\n/stats\n'
printf '%s' "$input" | "$bin" chat -m "$m" -n 8 --temp 0 --stats >"$dir/out" 2>"$dir/err"; rc=$?
check "piped chat exits 0 at end of input" test $rc = 0
check "three messages give three answers (--stats per answer)" test "$(grep -c '^answer: ' "$dir/err")" = 3
check "no prompts are printed when stdin is not a terminal" sh -c "! grep -q '^> ' '$dir/out'"
check "/stats prints to stdout" grep -Eq '^prompt: [0-9]+ tokens, [0-9]+ reused' "$dir/out"
printf '%s' "$input" | "$bin" chat -m "$m" -n 8 --temp 0 >"$dir/out2" 2>/dev/null
strip() { grep -v -E '^(prompt|answer|context): ' "$1"; }
check "the answers are text" test -n "$(strip "$dir/out" | tr -d '[:space:]')"
check "greedy answers repeat exactly" test "$(strip "$dir/out")" = "$(strip "$dir/out2")"
printf 'hello there\n/exit\nnot read\n' | "$bin" chat -m "$m" -n 4 --temp 0 --stats >/dev/null 2>"$dir/err_exit"; rc=$?
check "/exit stops reading" sh -c "test $rc = 0 && test \$(grep -c '^answer: ' '$dir/err_exit') = 1"

# The template file given on the command line replaces a missing one.
printf 'hi\n' | "$bin" chat -m "$plain" --chat-template "$dir/chatml.jinja" -n 4 --stats >/dev/null 2>"$dir/err_t"; rc=$?
check "--chat-template works for a model without one" sh -c "test $rc = 0 && grep -q '^answer: ' '$dir/err_t'"

# No template in the file: ChatML, as serve uses, with a note that says so and what else to do.
printf 'hi\n' | "$bin" chat -m "$plain" -n 4 --temp 0 --stats >"$dir/fb" 2>"$dir/e1"; rc=$?
check "no chat template: answers with the fallback (ChatML)" sh -c "test $rc = 0 && grep -q '^answer: ' '$dir/e1'"
check "no chat template: says so and offers --chat-template and run" sh -c \
  "grep -q 'has no chat template' '$dir/e1' && grep -q 'ChatML' '$dir/e1' && grep -q -- '--chat-template FILE' '$dir/e1' && grep -q 'deltafin run' '$dir/e1'"
printf 'hi\n' | "$bin" chat -m "$plain" --chat-template "$dir/chatml.jinja" -n 4 --temp 0 >"$dir/fb2" 2>/dev/null
check "  the same answer as the ChatML template given as a file" cmp -s "$dir/fb" "$dir/fb2"

# Errors a newcomer can act on.

printf 'hi\n' | "$bin" chat -m "$dir/nope.gguf" >/dev/null 2>"$dir/e2"; rc=$?
check "missing model: says it does not exist" sh -c "test $rc -ne 0 && grep -q 'does not exist' '$dir/e2'"

python3 - "$m" "$dir/alien.gguf" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(data.replace(b'qwen3moe', b'qwen9moe', 1))
PY
printf 'hi\n' | "$bin" chat -m "$dir/alien.gguf" >/dev/null 2>"$dir/e3"; rc=$?
check "unknown architecture: lists the supported ones" sh -c \
  "test $rc -ne 0 && grep -q \"architecture 'qwen9moe' is not supported\" '$dir/e3' && grep -q qwen3moe '$dir/e3'"

long=$(python3 -c "print('word ' * 300)")
printf '%s\nhi\n' "$long" | "$bin" chat -m "$m" -c 128 -n 4 --stats >/dev/null 2>"$dir/e4"; rc=$?
check "message longer than the context: says what to do" sh -c \
  "grep -q 'context holds 128' '$dir/e4' && grep -q '/reset' '$dir/e4' && grep -q -- '-c/--ctx-size' '$dir/e4'"
check "... the next message is still answered" grep -q '^answer: ' "$dir/e4"
check "... and the exit status reports the error" test $rc -ne 0

vocab=$src/../shared/vocab/ggml-vocab-qwen2.gguf
if [ -f "$vocab" ]; then  # has a chat template, but no weights
  printf 'hi\n' | "$bin" chat -m "$vocab" >/dev/null 2>"$dir/e7"; rc=$?
  check "vocabulary-only GGUF: says so" sh -c "test $rc -ne 0 && grep -q 'vocabulary-only' '$dir/e7'"
fi
printf 'hi\n' | "$bin" chat "$m" -n 2 --stats >/dev/null 2>"$dir/pos"; rc=$?
check "the model may be given without -m" sh -c "test $rc = 0 && grep -q '^answer: ' '$dir/pos'"

cat >"$dir/nosys.jinja" <<'T'
{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\n' }}{% endfor %}
T
printf 'hi\n' | "$bin" chat -m "$m" --chat-template "$dir/nosys.jinja" --system "Be brief." >/dev/null 2>"$dir/e8"; rc=$?
check "template without system role: says to leave out --system" sh -c \
  "test $rc -ne 0 && grep -q 'System role not supported' '$dir/e8' && grep -q 'leave out --system' '$dir/e8'"

printf '{%% for m in messages %%}' >"$dir/broken.jinja"
printf 'hi\n' | "$bin" chat -m "$m" --chat-template "$dir/broken.jinja" >/dev/null 2>"$dir/e5"; rc=$?
check "broken template: a chat template error" sh -c "test $rc -ne 0 && grep -q 'chat template' '$dir/e5'"
printf 'hi\n' | "$bin" chat -m "$m" --chat-template "$dir/none.jinja" >/dev/null 2>"$dir/e6"; rc=$?
check "missing template file: named" sh -c "test $rc -ne 0 && grep -q 'none.jinja' '$dir/e6'"
exit $fail
