#!/usr/bin/env bash
# --core-type (issue 28): the core (every tensor but the routed experts) re-encoded
# once into the cache directory, reused by later runs, the experts untouched.
#   - eval --core-type Q8_0 on an F32-core model gives exactly the logits of the model
#     `quantize --keep-experts Q8_0` writes (the same core bytes, the experts the model's);
#   - the first run makes CACHE/cores/*.gguf and its record, the second reuses them
#     (same logits); a truncated core file, and with --verify a flipped byte, is made
#     again and never used as it is;
#   - under a --mem that pages the F32 core, the Q8_0 core stays resident;
#   - a Hugging Face folder takes --core-type as the GGUF it converts to: the same
#     logits as the converted file's, whose core it is (the conversion, the same model
#     by its headers and size, reuses the folder's cached core);
#   - a remote model (nginx on loopback) takes it from its disk cache: the local
#     model's logits, reused on the second run, the same core size in plan;
#   - a mix as the type is refused with a clear error;
#   - perplexity on the shipped kjv-moe model with its core in Q4_K: what it costs.
# usage: core_type.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1") src=$(cd "$2" && pwd) build=$(cd "$3" && pwd)
dir=$build/e2e-core-type; rm -rf "$dir"; mkdir -p "$dir"
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
m=$dir/model.gguf ref=$dir/ref.gguf cache=$dir/cache
"$bin" synth --preset tiny --arch qwen3moe --type F32 --expert-type Q8_0 --layers 12 --expert-width 32 -o "$m" \
  >/dev/null 2>"$dir/synth.err" || { echo "FAIL synth: $(cat "$dir/synth.err")"; exit 1; }
"$bin" quantize --keep-experts "$m" "$ref" Q8_0 >/dev/null 2>"$dir/quantize.err" ||
  { echo "FAIL quantize --keep-experts: $(cat "$dir/quantize.err")"; exit 1; }
ev() { "$bin" eval --ids $ids --top 20 --all-positions -b 5 --profile none "$@"; }
ev -m "$ref" >"$dir/want" 2>"$dir/want.err" || { echo "FAIL eval of the reference: $(cat "$dir/want.err")"; exit 1; }
ev -m "$m" >"$dir/f32" 2>/dev/null

ev -m "$m" --core-type Q8_0 --cache-dir "$cache" >"$dir/run1" 2>"$dir/run1.err"
check "first run succeeds" test $? = 0
check "first run says it re-encodes the core once" grep -q "re-encoding the core of .* to Q8_0 once" "$dir/run1.err"
core=$(ls "$cache"/cores/*.gguf 2>/dev/null | head -1)
check "the core is in CACHE/cores with its record" test -n "$core" -a -f "${core%.gguf}.json"
check "logits equal those of quantize --keep-experts Q8_0" cmp -s "$dir/want" "$dir/run1"
check "and differ from the F32 core's (the re-encoding is real)" bash -c "! cmp -s '$dir/f32' '$dir/run1'"
core_mib=$(python3 -c "import os; print(f'{os.path.getsize(\"$core\") / 2**20:.2f}')" 2>/dev/null)
echo "     core file: $core_mib MiB (model $(python3 -c "import os; print(f'{os.path.getsize(\"$m\") / 2**20:.2f}')") MiB)"

# plan --core-type: the core's size in that type, and the disk it needs: the size of
# the file run made (plan writes headers and holes only).
pj() { "$bin" plan -m "$m" --json --disk-read 1 --compute 1 --profile none "$@" 2>"$dir/plan.err"; }
own=$(pj | python3 -c "import json,sys; print(json.load(sys.stdin)['core_bytes'])")
planned=$(pj --core-type Q8_0 | python3 -c "import json,sys; j=json.load(sys.stdin); print(j['core_bytes'], j['disk_needed_bytes'])")
echo "     plan: core $own bytes as published, $planned (core, disk needed) with --core-type Q8_0"
check "plan --core-type Q8_0: a smaller core than the F32 one" \
  python3 -c "import sys; sys.exit(0 if 0 < int('${planned% *}') < int('${own:-0}') / 3 else 1)"
check "plan --core-type Q8_0: disk needed = the size of the core file run made" \
  test "${planned#* }" = "$(stat -c %s "$core" 2>/dev/null)"

ev -m "$m" --core-type Q8_0 --cache-dir "$cache" -v >"$dir/run2" 2>"$dir/run2.err"
check "second run reuses the cached core" grep -q "Q8_0 from the cache" "$dir/run2.err"
check "second run: nothing re-encoded" bash -c "! grep -q re-encoding '$dir/run2.err'"
check "second run: same logits" cmp -s "$dir/want" "$dir/run2"

# A torn file (shorter than its record) is made again, never read as it is.
truncate -s -4096 "$core"
ev -m "$m" --core-type Q8_0 --cache-dir "$cache" >"$dir/run3" 2>"$dir/run3.err"
check "truncated core: made again, saying why" grep -q "made again" "$dir/run3.err"
check "truncated core: same logits" cmp -s "$dir/want" "$dir/run3"
# A flipped byte of the same size: --verify checks the checksum and remakes it.
python3 - "$core" <<'PY'
import os, sys
p = sys.argv[1]
with open(p, "r+b") as f:
    f.seek(os.path.getsize(p) - 100)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0xFF]))
PY
ev -m "$m" --core-type Q8_0 --cache-dir "$cache" --verify >"$dir/run4" 2>"$dir/run4.err"
check "flipped byte with --verify: made again" grep -q "made again" "$dir/run4.err"
check "flipped byte with --verify: same logits" cmp -s "$dir/want" "$dir/run4"

# A budget under which the F32 core pages per layer: the Q8_0 core stays resident.
least() { # resident and streamed-core minimums in MiB from a too-small budget's error
  "$bin" eval --ids 1 --mem 1K --profile none "$@" 2>&1 >/dev/null |
    grep -o 'at least [0-9.]* MiB' | grep -o '[0-9.]*' | tr '\n' ' '; }
read -r f32_res f32_paged <<<"$(least -m "$m")"
read -r q8_res _ <<<"$(least -m "$m" --core-type Q8_0 --cache-dir "$cache")"
mem=$(python3 -c "import sys; lo = max($f32_paged, $q8_res) + 0.2; print(f'{lo:.2f}M' if lo < $f32_res - 0.2 else '')" 2>/dev/null)
echo "     minimums: F32 core resident $f32_res MiB, paged $f32_paged MiB; Q8_0 core resident $q8_res MiB"
if [ -n "$mem" ]; then
  ev -m "$m" --mem "$mem" >"$dir/paged" 2>"$dir/paged.err"
  check "--mem $mem: the F32 core pages" grep -q "stream from the file per layer" "$dir/paged.err"
  check "--mem $mem: F32 core paged, logits as resident" cmp -s "$dir/f32" "$dir/paged"
  ev -m "$m" --mem "$mem" --core-type Q8_0 --cache-dir "$cache" >"$dir/run5" 2>"$dir/run5.err"
  check "--mem $mem --core-type Q8_0: runs with the core resident" \
    bash -c "test -s '$dir/run5' && ! grep -q 'stream from the file per layer' '$dir/run5.err'"
  check "--mem $mem --core-type Q8_0: same logits" cmp -s "$dir/want" "$dir/run5"
else
  echo "FAIL no budget pages the F32 core but holds the Q8_0 one"; fail=1
fi

ev -m "$m" --core-type Q4_K_M --cache-dir "$cache" >/dev/null 2>"$dir/mix.err"
check "a mix is refused" grep -q "a mix is not a core type" "$dir/mix.err"

# A Hugging Face folder (read as the GGUF it converts to) and its conversion.
hf=$dir/hf
if "$bin" synth --preset tiny --arch qwen3moe --type F32 --expert-type F32 --format hf -o "$hf" >/dev/null 2>"$dir/hf.err" &&
   "$bin" convert "$hf" "$dir/hf.gguf" >/dev/null 2>>"$dir/hf.err"; then
  ev -m "$hf" --core-type Q8_0 --cache-dir "$dir/hfcache" >"$dir/hf.run" 2>"$dir/hf.run.err"
  check "a folder takes --core-type" test $? = 0
  ev -m "$dir/hf.gguf" --core-type Q8_0 --cache-dir "$dir/hfcache" -v >"$dir/hfconv.run" 2>"$dir/hfconv.err"
  ev -m "$hf" >"$dir/hf.f32" 2>/dev/null
  check "folder and its conversion: same logits with the Q8_0 core" cmp -s "$dir/hf.run" "$dir/hfconv.run"
  check "and not the F32 core's" bash -c "! cmp -s '$dir/hf.f32' '$dir/hf.run'"
  check "the conversion reuses the folder's core" grep -q "Q8_0 from the cache" "$dir/hfconv.err"
  "$bin" quantize --keep-experts "$hf" "$dir/hfref.gguf" Q8_0 >/dev/null 2>&1
  ev -m "$dir/hfref.gguf" >"$dir/hfref.run" 2>/dev/null
  check "folder --core-type Q8_0: logits of quantize --keep-experts FOLDER Q8_0" cmp -s "$dir/hfref.run" "$dir/hf.run"
else
  echo "FAIL hf folder: $(cat "$dir/hf.err")"; fail=1
fi

# What it costs: perplexity of the shipped model on held-out text, its own core
# (Q8_0) against the core in Q4_K.
kjv=$src/assets/models/kjv-moe-Q8_0.gguf txt=$src/assets/models/kjv-heldout.txt
if [ -f "$kjv" ] && [ -f "$txt" ]; then
  ppl() { DELTAFIN_CACHE_DIR=$cache "$bin" perplexity -m "$kjv" -f "$txt" -c 128 --chunks 8 "$@" 2>&1 |
    grep -o 'PPL = [0-9.]*' | tail -1 | grep -o '[0-9.]*$'; }
  own=$(ppl) q4=$(ppl --core-type Q4_K)
  echo "     perplexity (kjv-moe, 8 x 128 tokens): own Q8_0 core $own, core in Q4_K $q4"
  check "perplexity with the Q4_K core is measured and within 10% of the own core's" \
    python3 -c "import sys; o, q = float('$own'), float('$q4'); sys.exit(0 if o > 0 and q != o and abs(q - o) < 0.1 * o else 1)"
fi

[ "$fail" = 0 ] || exit 1  # a skip below (no nginx) must not hide a failure above
# A remote model (nginx on loopback): its core comes into the disk cache and is
# re-encoded from there, once; the logits are those of the local model's Q8_0 core.
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
mkdir -p "$dir/www"; cp "$m" "$dir/www/model.gguf"
start_nginx "$dir/ng" "$dir/www"
url=http://127.0.0.1:$NGINX_PORT/model.gguf
ev -m "$url" --core-type Q8_0 --cache-dir "$dir/rcache" >"$dir/remote1" 2>"$dir/remote1.err"
check "a remote model takes --core-type" test $? = 0
check "remote --core-type Q8_0: the local model's Q8_0-core logits" cmp -s "$dir/want" "$dir/remote1"
ev -m "$url" --core-type Q8_0 --cache-dir "$dir/rcache" -v >"$dir/remote2" 2>"$dir/remote2.err"
check "remote, second run: the cached core is reused" grep -q "Q8_0 from the cache" "$dir/remote2.err"
check "remote, second run: same logits" cmp -s "$dir/want" "$dir/remote2"
rplanned=$("$bin" plan -m "$url" --cache-dir "$dir/rcache" --json --disk-read 1 --compute 1 --link 100 --profile none \
  --core-type Q8_0 2>"$dir/rplan.err" | python3 -c "import json,sys; print(json.load(sys.stdin)['core_bytes'])")
check "remote plan --core-type Q8_0: the local plan's core size" test "$rplanned" = "${planned% *}"
exit $fail
