#!/usr/bin/env bash
# `deltafin plan`: its JSON parses and predicts a positive decode rate; its memory plan
# is inspect's for the same --mem and -c; it measures the disk when --disk-read is not
# given; inspect points to it and run prints it in one line; bad --disk-read/--link/--mem values are clear errors; and a remote model over
# a real nginx on loopback is planned from its headers alone (nginx's log: the bytes
# it sent are a small part of the model, none of the experts).
# usage: plan_cli.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-plan-cli; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
export XDG_CACHE_HOME=$dir/xdg  # no usage profile from other runs
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

m=$dir/www/m.gguf
"$bin" synth --preset tiny --arch qwen3moe --experts 64 -o "$m" >/dev/null 2>&1 || { echo "FAIL synth"; exit 1; }
mem=80M

# JSON: one object, a positive decode rate, a hit rate of a cache smaller than the experts.
"$bin" plan -m "$m" --mem $mem --disk-read 2 --compute 1 --json >"$dir/p.json" 2>"$dir/p.err"
rc=$?
check "plan --json exits 0 ($(head -c 300 "$dir/p.err"))" test $rc = 0
check "plan --json parses, decode_tokens_per_second > 0" \
  test "$(json "$dir/p.json" "d['decode_tokens_per_second'] > 0 and d['streaming']")" = True
check "the experts stream: fewer cached than there are, hit rate between" \
  test "$(json "$dir/p.json" "0 < d['experts_cached'] < d['experts_total'] and 0 < d['hit_rate'] < 1 and d['decode_io_seconds_per_token'] > 0")" = True
check "uniform routing: hit rate = cached / total" \
  test "$(json "$dir/p.json" "abs(d['hit_rate'] - d['experts_cached'] / d['experts_total']) < 1e-9")" = True

# The plan equals inspect's (the same formatter over the same numbers).
keys='^  (budget|core|reserve|expert cache|sequences|experts kept|long prompts): '
"$bin" inspect -m "$m" --mem $mem -c 4096 | grep -E "$keys" >"$dir/inspect.plan"
"$bin" plan -m "$m" --mem $mem -c 4096 --disk-read 2 --compute 1 >"$dir/plan.txt" 2>&1
grep -E "$keys" "$dir/plan.txt" >"$dir/plan.plan"
check "plan's memory plan has the lines inspect prints" test "$(wc -l <"$dir/inspect.plan")" -ge 6
check "plan's memory plan = inspect's" cmp -s "$dir/inspect.plan" "$dir/plan.plan"
check "JSON experts_cached = inspect's experts kept" \
  grep -q "experts kept:  $(json "$dir/p.json" "d['experts_cached']") slots" "$dir/inspect.plan"
check "text shows reads and compute apart, speculation, prefill, cold start, disk" \
  bash -c "grep -q '^  reads: ' '$dir/plan.txt' && grep -q '^  compute: ' '$dir/plan.txt' &&
           grep -q '^  speculative: ' '$dir/plan.txt' && grep -q '^prefill: ' '$dir/plan.txt' &&
           grep -q '^cold start: ' '$dir/plan.txt' && grep -q '^disk needed: ' '$dir/plan.txt'"

# No --disk-read: measured on the model's disk.
"$bin" plan -m "$m" --mem $mem --probe-seconds 0.3 --json >"$dir/measured.json" 2>"$dir/measured.err"
check "disk measured when --disk-read is not given" \
  test "$(json "$dir/measured.json" "d['disk_read_source'].startswith('measured') and d['disk_read_bytes_per_second'] > 0")" = True

# inspect points to plan; run prints the plan in one line when experts stream, not with -q.
check "inspect points to plan" grep -q '`deltafin plan`' <("$bin" inspect -m "$m" --mem $mem)
"$bin" run -m "$m" --mem $mem -p hi -n 2 --temp 0 2>"$dir/run.err" >/dev/null
check "run prints the plan in one line" grep -q "^plan: .* $(json "$dir/p.json" "d['experts_cached']") of $(json "$dir/p.json" "d['experts_total']") experts cached" "$dir/run.err"
"$bin" -q run -m "$m" --mem $mem -p hi -n 2 --temp 0 2>"$dir/runq.err" >/dev/null
check "run -q does not" bash -c "! grep -q '^plan: ' '$dir/runq.err'"

# Bad values: clear errors naming the option, nothing printed on stdout.
bad() { # name pattern args...
  local name=$1 pat=$2; shift 2
  "$bin" plan -m "$m" "$@" >"$dir/bad.out" 2>"$dir/bad.err"
  local rc=$?
  local ok=false
  [ $rc -ne 0 ] && grep -qF -- "$pat" "$dir/bad.err" && [ ! -s "$dir/bad.out" ] && ok=true
  check "$name: fails (rc $rc) naming it: $(head -c 200 "$dir/bad.err")" $ok
}
bad "--disk-read abc" "bad --disk-read 'abc'" --mem $mem --disk-read abc
bad "--disk-read 0" "bad --disk-read '0'" --mem $mem --disk-read 0
bad "--disk-read -3" "bad --disk-read '-3'" --mem $mem --disk-read=-3
bad "--link 5x" "bad --link '5x'" --mem $mem --disk-read 2 --link 5x
bad "--mem 12Q" "bad --mem '12Q'" --mem 12Q --disk-read 2
bad "--mem too small" "too small" --mem 1M --disk-read 2

# Remote: headers only.
start_nginx "$dir/ng" "$dir/www"
url=http://127.0.0.1:$NGINX_PORT/m.gguf
"$bin" plan -m "$url" --cache-dir "$dir/cache" --mem $mem --disk-read 2 --compute 1 --link 50 --json >"$dir/r.json" 2>"$dir/r.err"
rc=$?
check "remote plan --json exits 0 ($(head -c 300 "$dir/r.err"))" test $rc = 0
check "remote: decode rate > 0, remote, the link's rate used" \
  test "$(json "$dir/r.json" "d['remote'] and d['decode_tokens_per_second'] > 0 and d['link_bytes_per_second'] == 50e6")" = True
check "remote: the same cache size as the local plan" \
  test "$(json "$dir/r.json" "d['experts_cached']")" = "$(json "$dir/p.json" "d['experts_cached']")"
sent=$(awk '{s += $NF} END {print s + 0}' "$dir/ng/ranges.log")
size=$(stat -c %s "$m")
experts=$("$bin" inspect -m "$m" | sed -n 's/^bytes: .*experts \([0-9.]*\) \(KiB\|MiB\)$/\1 \2/p')
check "remote: nginx sent $sent of $size bytes: headers only (under 10%)" test "$sent" -gt 0 -a $((sent * 10)) -lt "$size"
check "remote: no expert range was asked for" \
  test "$(awk '$NF > 0' "$dir/ng/ranges.log" | wc -l)" -le 3
exit $fail
