#!/usr/bin/env bash
# `deltafin convert` checked element by element by a decoder of the test's own
# (tests/hf/check_convert.py, numpy): `synth --format hf` writes a Hugging Face folder
# per architecture and encoding, `convert` turns it into a GGUF, and the checker holds
# every tensor to the rule (MXFP4 and BF16 bit for bit; FP8 and INT4 the BF16 rounding
# of the exact F32 product) under llama.cpp's names (tests/hf/maps/*.json, written from
# llama.cpp's converter, not from deltafin's table). First the checker's own self-test
# (it must pass a right conversion and fail each planted defect). Skips (77) without
# numpy, and while deltafin has no `convert` or `synth --format hf`.
# usage: hf_convert_check.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
dir=$build/e2e-hf-convert-check; rm -rf "$dir"; mkdir -p "$dir"
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import numpy" 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "skip: numpy is not installed (python3-numpy; scripts/setup --test installs it)"; exit 77; }

fail=0
"$py" "$src/tests/hf/selftest.py" "$dir" || { echo "FAIL the checker's self-test"; exit 1; }
echo "ok   the checker's self-test"

if ! "$bin" convert --help >/dev/null 2>&1 || ! "$bin" synth --help 2>/dev/null | grep -q -- "--format"; then
  echo "skip: deltafin has no 'convert' or 'synth --format hf' yet"
  exit 77
fi

# The option that picks a checkpoint encoding, where synth has one.
enc_opt=--hf-encoding
has_enc=0; "$bin" synth --help 2>/dev/null | grep -q -- "$enc_opt" && has_enc=1

ran=0
# name | synth arguments | name map
while IFS='|' read -r name args map; do
  [ -n "$name" ] || continue
  case "$args" in *"$enc_opt"*) [ $has_enc = 1 ] || { echo "SKIP $name: synth has no $enc_opt"; continue; } ;; esac
  [ -f "$src/tests/hf/maps/$map" ] || { echo "SKIP $name: no name map $map"; continue; }
  # shellcheck disable=SC2086
  if ! "$bin" synth $args --seed 5 --format hf -o "$dir/$name" </dev/null >"$dir/$name.synth" 2>&1; then
    if grep -q "no Hugging Face layout for architecture" "$dir/$name.synth"; then
      echo "SKIP $name: deltafin has no Hugging Face layout for it yet"; continue
    fi
    echo "FAIL $name: synth --format hf"; sed 's/^/  /' "$dir/$name.synth"; fail=1; continue
  fi
  if ! "$bin" convert "$dir/$name" "$dir/$name.gguf" </dev/null >"$dir/$name.convert" 2>&1; then
    echo "FAIL $name: convert"; sed 's/^/  /' "$dir/$name.convert"; fail=1; continue
  fi
  if "$py" "$src/tests/hf/check_convert.py" "$dir/$name" "$dir/$name.gguf" "$src/tests/hf/maps/$map" </dev/null >"$dir/$name.check" 2>&1; then
    echo "ok   $name: $(tail -1 "$dir/$name.check")"
  else
    echo "FAIL $name:"; grep -v '^OK' "$dir/$name.check" | sed 's/^/  /'; fail=1
  fi
  ran=$((ran + 1))
done <<'CASES'
qwen3moe-bf16|--preset tiny --arch qwen3moe|qwen3moe.json
kimi-k2-fp8|--preset tiny --arch deepseek2 --hf-encoding fp8|deepseek_v3.json
kimi-k2-int4|--preset tiny --arch deepseek2 --hf-encoding int4|deepseek_v3.json
kimi-k3-mxfp4|--preset tiny --arch kimi-k3|kimi_k3.json
mixtral-bf16|--preset tiny --arch llama --no-rope-freqs --type BF16 --expert-type BF16|mixtral.json
CASES
[ $ran -gt 0 ] || { echo "skip: no case could run"; exit 77; }
exit $fail
