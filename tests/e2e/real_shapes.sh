#!/usr/bin/env bash
# The real models' shapes (synth presets kimi-k3, kimi-k2, deepseek-v3) as sparse files:
# a 1.5 TB Kimi K3 takes a few MB of disk, and inspect/plan read its real sizes (expert
# bytes, experts per layer and in all); --layers keeps each expert's real size; a
# model whose core does not fit keeps only two layers' experts cached (the core first).
# usage: real_shapes.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); build=$(cd "$3" && pwd)
dir=$build/e2e-real-shapes; rm -rf "$dir"; mkdir -p "$dir"
export XDG_CACHE_HOME=$dir/xdg
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
plan() { "$bin" plan -m "$1" --mem "$2" --disk-read 7 --compute 60 --profile none --json >"$3" 2>"$3.err"; }

# preset  MoE layers  experts  used  bytes of one expert (gate+up+down)
while read -r preset moe experts used expert_bytes; do
  m=$dir/$preset.gguf
  "$bin" synth --preset "$preset" --sparse -o "$m" 2>"$dir/$preset.synth" || { cat "$dir/$preset.synth"; fail=1; continue; }
  apparent=$(stat -c %s "$m"); used_kb=$(du -k "$m" | cut -f1)
  check "$preset: $((apparent / 1000000000)) GB file in $((used_kb / 1024)) MiB of disk" \
    test "$apparent" -gt 100000000000 -a "$used_kb" -lt 65536
  plan "$m" 56G "$dir/$preset.json"
  check "$preset: plan reads it ($(head -c 200 "$dir/$preset.json.err"))" test -s "$dir/$preset.json"
  check "$preset: $moe x $experts experts of $expert_bytes bytes" \
    test "$(json "$dir/$preset.json" "d['experts_total'] == $moe * $experts and $expert_bytes <= d['expert_slot_bytes'] < $expert_bytes + 65536")" = True
  "$bin" inspect "$m" >"$dir/$preset.inspect" 2>&1
  check "$preset: inspect counts $experts per layer, $used used" grep -q "experts: *$experts per MoE layer, $used used" "$dir/$preset.inspect"
done <<'ROWS'
kimi-k3 92 896 16 17547264
kimi-k2 60 384 8 24772608
deepseek-v3 58 256 8 24772608
ROWS

# Kimi K3 on 56G: the BF16 core pages, the expert cache keeps two layers' routed experts.
check "kimi-k3 --mem 56G: core paged, the cache holds 32 experts (two layers of 16), not more" \
  test "$(json "$dir/kimi-k3.json" "d['core_paged_bytes'] > 0 and 32 <= d['experts_cached'] < 48")" = True

# --layers: a benchmark-sized file with the real expert size.
"$bin" synth --preset kimi-k2 --layers 3 --sparse -o "$dir/k2-3.gguf" 2>/dev/null
plan "$dir/k2-3.gguf" 8G "$dir/k2-3.json"
check "kimi-k2 --layers 3: 2 MoE layers of 384 real-size experts" \
  test "$(json "$dir/k2-3.json" "d['experts_total'] == 768 and 24772608 <= d['expert_slot_bytes'] < 24772608 + 65536")" = True

# A sparse model cannot be split (the holes would be written out).
"$bin" synth --preset kimi-k3 --sparse --split 2 -o "$dir/split.gguf" 2>"$dir/split.err"
check "--sparse --split: refused" grep -q "sparse cannot be split" "$dir/split.err"
rm -f "$dir"/*.gguf
exit $fail
