#!/usr/bin/env bash
# Split models end to end: `deltafin synth --split N` writes parts in llama.cpp's
# gguf-split layout; the first part loads and computes exactly what the unsplit
# model does; part 2 or a missing part gets a clear error. When the llama.cpp
# oracle is installed, it must load the split model too and see the same model.
# usage: gguf_split.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
dir=$build/e2e-gguf-split; rm -rf "$dir"; mkdir -p "$dir"
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
"$bin" synth --preset tiny --arch qwen3moe --seed 3 -o "$dir/whole.gguf" 2>/dev/null || { echo "synth failed"; exit 1; }
"$bin" synth --preset tiny --arch qwen3moe --seed 3 -o "$dir/m.gguf" --split 3 2>"$dir/synth.err"
check "synth --split exits 0" test $? -eq 0
p1=$dir/m-00001-of-00003.gguf p2=$dir/m-00002-of-00003.gguf p3=$dir/m-00003-of-00003.gguf
check "synth --split writes three parts" test -f "$p1" -a -f "$p2" -a -f "$p3"
check "synth --split leaves no unsplit file" test ! -e "$dir/m.gguf"
check "parts are not empty" test "$(stat -c %s "$p3")" -gt 64

"$bin" eval -m "$dir/whole.gguf" --ids 1,2,3,4,5 --top 5 --all-positions >"$dir/eval.whole" 2>/dev/null
"$bin" eval -m "$p1" --ids 1,2,3,4,5 --top 5 --all-positions >"$dir/eval.split" 2>"$dir/eval.err"
check "the split model evaluates" test -s "$dir/eval.split"
check "the split model gives the same logits as the whole" cmp -s "$dir/eval.whole" "$dir/eval.split"

"$bin" eval -m "$p2" --ids 1,2 >/dev/null 2>"$dir/e_part2"; rc=$?
check "opening part 2: non-zero exit" test $rc -ne 0
check "opening part 2: says to open the first part" grep -q "open the first part" "$dir/e_part2"

mv "$p3" "$dir/moved.gguf"
"$bin" eval -m "$p1" --ids 1,2 >/dev/null 2>"$dir/e_missing"; rc=$?
check "missing part: non-zero exit" test $rc -ne 0
check "missing part: names the part" grep -q "part 3 of 3 .*missing" "$dir/e_missing"
mv "$dir/moved.gguf" "$p3"

# llama.cpp (oracle) loads the split model and sees the same model as the whole.
if command -v node >/dev/null; then
  node "$src/tests/oracle/llama_ref.mjs" --model "$dir/whole.gguf" --info >"$dir/info.whole" 2>"$dir/info.err"; rc=$?
  if [ $rc -eq 3 ]; then
    echo "skip oracle checks (llama.cpp oracle not installed: scripts/install-oracle)"
  else
    node "$src/tests/oracle/llama_ref.mjs" --model "$p1" --info >"$dir/info.split" 2>>"$dir/info.err"
    check "llama.cpp loads the split model" test $? -eq 0
    check "llama.cpp sees the same model split and whole" cmp -s "$dir/info.whole" "$dir/info.split"
  fi
fi
exit $fail
