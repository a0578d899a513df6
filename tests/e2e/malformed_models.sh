#!/usr/bin/env bash
# Malformed models and absurd options (issue 22, items 4, 9, 11, 12): each is refused
# with a non-zero exit and an error naming what is wrong, never a crash, a hang, an
# unbounded allocation or garbage printed with exit 0. The models are tiny synthetic
# ones of every architecture, patched in place by gguf_patch.py.
# usage: malformed_models.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
dir=$build/e2e-malformed; rm -rf "$dir"; mkdir -p "$dir"
patch() { python3 "$src/tests/e2e/gguf_patch.py" "$@"; }
fail=0
# refused NAME PATTERN COMMAND...: COMMAND exits non-zero on its own (no signal, no
# timeout) with PATTERN (grep -E) in its stderr.
refused() {
  local name=$1 pat=$2; shift 2
  timeout 60 "$@" >"$dir/out" 2>"$dir/err" </dev/null; local rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -Eq -- "$pat" "$dir/err"; then
    echo "ok   $name"
  else
    echo "FAIL $name (exit $rc): $(head -c 600 "$dir/err")"; fail=1
  fi
}

for arch in $("$bin" synth --list-archs); do
  m=$dir/$arch.gguf
  "$bin" synth --preset tiny --arch "$arch" -o "$m" >/dev/null 2>&1 || { echo "synth $arch failed"; exit 1; }
  # A norm tensor missing (renamed) or of the wrong shape: found before any tensor is read.
  patch "$m" "$dir/$arch-missing.gguf" rename:output_norm.weight=output_norm.weighx
  patch "$m" "$dir/$arch-shape.gguf" dim:blk.0.attn_norm.weight:0=8
  for cmd in run eval inspect; do
    case $cmd in
      run) args=(run -p hi -n 2 -m) ;;
      eval) args=(eval --ids 1,2 -m) ;;
      inspect) args=(inspect) ;;
    esac
    refused "$arch $cmd: a missing norm tensor is named" "missing 1 tensor|output_norm.weight" \
      "$bin" "${args[@]}" "$dir/$arch-missing.gguf"
    grep -q "output_norm.weight" "$dir/err" || { echo "FAIL   (the error does not name output_norm.weight)"; fail=1; }
    refused "$arch $cmd: a norm tensor of the wrong shape is named" \
      "tensor 'blk.0.attn_norm.weight' has shape \[8\], expected" "$bin" "${args[@]}" "$dir/$arch-shape.gguf"
  done
  refused "$arch serve: a mis-shaped norm stops it before it listens" "blk.0.attn_norm.weight" \
    "$bin" serve --port 0 -m "$dir/$arch-shape.gguf"

  # Hyperparameters out of range: the key is named, nothing is allocated for it.
  for v in -1 2147483647; do
    patch "$m" "$dir/$arch-bc.gguf" "kv:$arch.block_count=i32:$v"
    refused "$arch: block_count $v" "'$arch.block_count' is $v; it must be in 1\.\." \
      "$bin" run -p hi -n 2 -m "$dir/$arch-bc.gguf"
  done
  for v in nan -1 0; do
    patch "$m" "$dir/$arch-eps.gguf" "kv:$arch.attention.layer_norm_rms_epsilon=f32:$v"
    refused "$arch: eps $v" "'$arch.attention.layer_norm_rms_epsilon' is (nan|-1|0)" \
      "$bin" run -p hi -n 2 -m "$dir/$arch-eps.gguf"
  done
  if [ "$arch" != kimi-k3 ]; then  # no RoPE in kimi-k3
    for v in nan 0; do
      patch "$m" "$dir/$arch-rope.gguf" "kv:$arch.rope.freq_base=f32:$v"
      refused "$arch: rope base $v" "'$arch.rope.freq_base' is (nan|0)" "$bin" run -p hi -n 2 -m "$dir/$arch-rope.gguf"
    done
  fi
  # NaN router weights: the first logits are not finite, and the run says so.
  router=$(python3 -c "
import sys; sys.path.insert(0, '$src/tests/e2e'); import gguf_patch as g
t = g.Gguf(open('$m', 'rb').read()).tensors
print(next(n for n in sorted(t, key=lambda n: int(n.split('.')[1]) if n.startswith('blk.') else 1 << 30)
           if n.endswith('ffn_gate_inp.weight')))")
  patch "$m" "$dir/$arch-nan.gguf" "nan:$router"
  refused "$arch: NaN router weights ($router) stop the run" "non-finite logit" \
    "$bin" run -p "hello world" -n 4 --temp 0 -m "$dir/$arch-nan.gguf"
done

# Options out of range are refused up front, naming the option.
m=$dir/qwen3moe.gguf
# general.alignment 1 shifts every tensor's data: here into NaN logits, which stop the run.
patch "$m" "$dir/align1.gguf" kv:general.alignment=u32:1
refused "qwen3moe: alignment 1" "non-finite logit" "$bin" run -p "hello world" -n 4 --temp 0 -m "$dir/align1.gguf"
refused "run -t 100000" "threads" "$bin" run -m "$m" -p hi -n 1 -t 100000
refused "chat -t 100000" "threads" "$bin" chat -m "$m" -t 100000
refused "run -c -1" "ctx-size" "$bin" run -m "$m" -p hi -n 1 -c -1
refused "run -c 2147483647" "ctx-size" "$bin" run -m "$m" -p hi -n 1 -c 2147483647
refused "eval -c 2147483647" "ctx-size" "$bin" eval -m "$m" --ids 1 -c 2147483647
refused "serve -c -1" "ctx-size" "$bin" serve -m "$m" --port 0 -c -1
# In range, but its state does not fit: refused from its size, without allocating it
# (RSS capped at 2 GiB; the state would take several).
refused "run -c 16777216 --mem 100M" "sequence state of 16777216 positions" \
  bash -c 'ulimit -v 2097152; exec "$@"' _ "$bin" run -m "$m" -p hi -n 1 -c 16777216 --mem 100M
# A prompt file without end: read no further than the context can hold (RSS capped at
# 2 GiB: an unbounded read fails the pattern with bad_alloc instead).
refused "run -f /dev/zero" "prompt file '/dev/zero' holds more than [0-9]+ bytes" \
  bash -c 'ulimit -v 2097152; exec "$@"' _ "$bin" run -m "$m" -f /dev/zero -n 1
for bad in "--top-p nan" "--top-p 5" "--top-p 0" "--min-p -1" "--temp nan" "--repeat-penalty 0"; do
  refused "run $bad: the server's check" "${bad%% *}" "$bin" run -m "$m" -p hi -n 1 $bad
done
refused "chat --top-p nan" "--top-p" "$bin" chat -m "$m" --top-p nan
# A valid model and options still run.
"$bin" run -m "$m" -p hi -n 2 --top-p 1 --min-p 0 -t 2 -c 64 >/dev/null 2>"$dir/err" ||
  { echo "FAIL a valid run: $(cat "$dir/err")"; fail=1; }
"$bin" inspect "$m" >/dev/null 2>"$dir/err" || { echo "FAIL inspect of a valid model: $(cat "$dir/err")"; fail=1; }
# --verify streams with its checks and changes nothing in the output (the unit test
# ExpertStore.VerifyCatchesAnExpertChangedInTheFile changes the file under it).
plain=$("$bin" run -m "$m" -p "hello world" -n 8 --temp 0 --mem 70M 2>/dev/null)
verified=$("$bin" run -m "$m" -p "hello world" -n 8 --temp 0 --mem 70M --verify 2>"$dir/err") ||
  { echo "FAIL run --verify: $(cat "$dir/err")"; fail=1; }
if [ -n "$plain" ] && [ "$plain" = "$verified" ]; then echo "ok   run --verify: the same output"; else
  echo "FAIL run --verify changed the output"; fail=1; fi
exit $fail
