#!/usr/bin/env bash
# Remote models against a real nginx on loopback: a model served over HTTP computes
# exactly what the local file computes (logits of `eval`, greedy text of `run`),
# experts streaming through the disk cache; hf:// locations (HF_ENDPOINT, bearer
# token, redirect, revision pinned to X-Repo-Commit, the token never sent to another
# host a redirect leads to); split models; a warm cache
# fetches nothing; a corrupt entry or core chunk is dropped and fetched again; a
# --disk-cache budget evicts; a file changed upstream is a clear error; two
# processes at once fetch each expert once; pull --layers; cache stats/warm/prune/
# clear; DELTAFIN_CACHE_DIR and the default cache directory; coalesced ranges.
# usage: remote_identical.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-identical; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/tiny.gguf" >/dev/null 2>&1 || exit 1
"$bin" synth --preset tiny --arch qwen3moe --experts 8 --split 3 -o "$dir/www/sp.gguf" >/dev/null 2>&1 || exit 1
commit=0123456789abcdef0123456789abcdef01234567
start_nginx "$dir/ng" "$dir/www" "" "
    location ~ ^/acme/tiny/resolve/(main|$commit)/(.+)\$ {
      if (\$http_authorization != 'Bearer hf_test_token') { return 401; }
      add_header X-Repo-Commit $commit always;
      return 302 /cdn/\$2;
    }
    location /cdn/ { alias $dir/www/; }
    # Another host (localhost, not 127.0.0.1), like Hugging Face's CDN: it must not
    # see the token.
    location ~ ^/acme/cross/resolve/(main|$commit)/(.+)\$ {
      if (\$http_authorization != 'Bearer hf_test_token') { return 401; }
      add_header X-Repo-Commit $commit always;
      return 302 http://localhost:\$server_port/cdn2/\$2;
    }
    location /cdn2/ {
      if (\$http_authorization) { return 403; }
      alias $dir/www/;
    }"
url=http://127.0.0.1:$NGINX_PORT
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
ev() { "$bin" eval --ids $ids --top 20 --all-positions -b 6 "$@"; }
ev -m "$dir/www/tiny.gguf" >"$dir/ref" 2>/dev/null || { echo "FAIL local eval"; exit 1; }

# 1. Cold, with a RAM cache of about two experts: experts stream origin -> disk -> RAM.
mem=$("$bin" eval -m "$dir/www/tiny.gguf" --ids 1 --mem 1K --profile none 2>&1 | grep -o 'give --mem of at least [0-9.]*' | grep -o '[0-9.]*')
mem=$(python3 -c "print(f'{$mem + 1.6:.2f}M')")
C=$dir/cache
ev -m "$url/tiny.gguf" --cache-dir "$C" --mem "$mem" --stats >"$dir/cold" 2>"$dir/cold.err"
check "remote eval (cold, --mem $mem) = local eval" cmp -s "$dir/ref" "$dir/cold"
check "cold: experts came from the origin and the RAM cache evicted" \
  grep -Eq "[1-9][0-9]* fetched from the origin.*" "$dir/cold.err"
grep -q "evictions [1-9]" "$dir/cold.err" || { echo "FAIL cold: no RAM evictions"; fail=1; }
check "cold: the core download showed progress" grep -q "^core" "$dir/cold.err"

# 2. Warm: the same again fetches nothing.
ev -m "$url/tiny.gguf" --cache-dir "$C" --mem "$mem" --stats >"$dir/warm" 2>"$dir/warm.err"
check "remote eval (warm) = local eval" cmp -s "$dir/ref" "$dir/warm"
check "warm: nothing fetched, experts read from disk" grep -Eq "[1-9][0-9]* experts from disk, 0 fetched" "$dir/warm.err"

# 3. Greedy text.
a=$("$bin" run -m "$dir/www/tiny.gguf" -p "hello world" -n 16 --temp 0 2>/dev/null)
b=$("$bin" run -m "$url/tiny.gguf" --cache-dir "$C" -p "hello world" -n 16 --temp 0 2>/dev/null)
check "remote run generates the local text" test "$a" = "$b"
check "cache verify: clean" "$bin" cache verify --cache-dir "$C" >/dev/null

# 4. hf:// through HF_ENDPOINT: token, redirect, commit pinning.
H=$dir/cache-hf
HF_ENDPOINT=$url HF_TOKEN=hf_test_token ev -m "hf://acme/tiny/tiny.gguf" --cache-dir "$H" >"$dir/hf" 2>"$dir/hf.err"
check "hf:// eval = local eval" cmp -s "$dir/ref" "$dir/hf"
check "hf:// revision pinned to the commit" grep -q "acme/tiny@$commit/tiny.gguf" "$H"/models/*/meta.json
check "hf:// requests went to the pinned commit" grep -q "resolve/$commit/tiny.gguf" "$dir/ng/ranges.log"
HF_ENDPOINT=$url HF_TOKEN=hf_test_token ev -m "hf://acme/cross/tiny.gguf" --cache-dir "$H" >"$dir/hf-cross" 2>"$dir/hf-cross.err"
check "hf:// redirected to another host: the token is not sent there, eval = local eval" cmp -s "$dir/ref" "$dir/hf-cross"
HF_ENDPOINT=$url HF_TOKEN=wrong ev -m "hf://acme/tiny@main/tiny.gguf" --cache-dir "$H" >/dev/null 2>"$dir/hf401.err"
check "hf:// with a bad token: clear error naming HTTP 401" grep -q "HTTP 401" "$dir/hf401.err"

# 5. Split model.
ev -m "$dir/www/sp-00001-of-00003.gguf" >"$dir/sp-ref" 2>/dev/null
ev -m "$url/sp-00001-of-00003.gguf" --cache-dir "$C" --mem "$mem" >"$dir/sp" 2>"$dir/sp.err"
check "split model over HTTP = local split model" cmp -s "$dir/sp-ref" "$dir/sp"
check "split model: three core parts cached" test "$(ls "$C"/models/sp-*/core-*.ok | wc -l)" = 3

# 6. A corrupt expert entry and a corrupt core chunk are dropped and fetched again.
entry=$(ls "$C"/models/tiny-*/experts/* | head -1)
python3 -c "
import sys; f=open(sys.argv[1],'r+b'); f.seek(4096); b=f.read(1); f.seek(4096); f.write(bytes([b[0]^0xff]))" "$entry"
core=$(ls "$C"/models/tiny-*/core-1.bin)
python3 -c "
import sys; f=open(sys.argv[1],'r+b'); f.seek(100); b=f.read(1); f.seek(100); f.write(bytes([b[0]^0x01]))" "$core"
ev -m "$url/tiny.gguf" --cache-dir "$C" --stats >"$dir/corrupt" 2>"$dir/corrupt.err"
check "after corruption: eval = local eval" cmp -s "$dir/ref" "$dir/corrupt"
check "after corruption: the entry was reported corrupt and refetched" grep -q "dropping corrupt cache entry" "$dir/corrupt.err"
check "after corruption: the core chunk failed its checksum and was refetched" grep -q "failed their checksum" "$dir/corrupt.err"
check "after corruption: cache verify clean" "$bin" cache verify --cache-dir "$C"

# 7. A disk budget evicts experts (never the core) and the output stays exact.
B=$dir/cache-budget
core_kb=$(( $(stat -c %s "$dir/www/tiny.gguf") / 1024 ))
budget=$(python3 -c "print(f'{2.4 + 2.5:.1f}M')")  # the core and about three experts
ev -m "$url/tiny.gguf" --cache-dir "$B" --disk-cache "$budget" --mem "$mem" --stats >"$dir/budget" 2>"$dir/budget.err"
check "--disk-cache $budget: eval = local eval" cmp -s "$dir/ref" "$dir/budget"
check "--disk-cache: experts were evicted" grep -Eq "[1-9][0-9]* evicted" "$dir/budget.err"
used=$(du -s --block-size=1 "$B/models" | cut -f1)
check "--disk-cache: the cache ($used bytes) is within the budget plus one expert" \
  python3 -c "import sys; sys.exit(0 if $used <= 4.9*2**20 + 0.9e6 else 1)"
check "--disk-cache: the core stayed" test -f "$(ls -d "$B"/models/tiny-*)/core-1.ok"

# 8. Two processes at once on a fresh cache: same output, each expert range fetched once.
T=$dir/cache-two
: >"$dir/ng/ranges.log"; kill -USR1 "$(cat "$dir/ng/nginx.pid")"; sleep 0.2
ev -m "$url/tiny.gguf" --cache-dir "$T" --mem "$mem" >"$dir/two-a" 2>"$dir/two-a.err" &
ev -m "$url/tiny.gguf" --cache-dir "$T" --mem "$mem" >"$dir/two-b" 2>"$dir/two-b.err" &
wait
check "two processes: both = local eval" bash -c "cmp -s '$dir/ref' '$dir/two-a' && cmp -s '$dir/ref' '$dir/two-b'"
dups=$(grep '^GET /tiny.gguf' "$dir/ng/ranges.log" | awk '{print $4}' | grep -v '^bytes=0-' | sort | uniq -d | wc -l)
check "two processes: no byte range fetched twice ($dups duplicates)" test "$dups" = 0

# 9. pull --layers fetches those layers' experts only; cache stats and clear.
P=$dir/cache-pull
"$bin" pull "$url/tiny.gguf" --cache-dir "$P" --layers 1-1 >"$dir/pull.out" 2>"$dir/pull.err"
check "pull --layers 1-1: says first what it needs on disk and in RAM" \
  bash -c "head -8 '$dir/pull.err' | grep -Eq 'needs: disk [0-9.]+ [KMG]iB .*; RAM at least [0-9.]+ [KMG]iB'"
check "pull: progress bars with bytes, rate and ETA" \
  bash -c "tr '\r' '\n' <'$dir/pull.err' | grep -Eq '^experts \[.*\] [0-9.]+/[0-9.]+ MiB [0-9.]+ MiB/s ETA'"
check "pull --layers 1-1: layer 1's 8 experts only" test "$(ls "$P"/models/tiny-*/experts | grep -c '^1-')" = 8 -a \
  "$(ls "$P"/models/tiny-*/experts | grep -c '^0-')" = 0
"$bin" cache stats --cache-dir "$P" >"$dir/stats"
check "cache stats: one model, core complete, 8 experts" grep -q "experts: 8 cached" "$dir/stats"
"$bin" cache warm "$url/tiny.gguf" --cache-dir "$P" -p "hello world" -p "a second prompt" >/dev/null 2>"$dir/warm-p.err"
check "cache warm -p: the prompts' layer-0 experts fetched" \
  bash -c "[ \$(ls '$P'/models/tiny-*/experts | grep -c '^0-') -ge 2 ] && grep -q 'warmed with 2 prompt' '$dir/warm-p.err'"
n_before=$(ls "$P"/models/tiny-*/experts | wc -l)
rm -f "$P"/models/tiny-*/experts/*
"$bin" cache warm "$url/tiny.gguf" --cache-dir "$P" >/dev/null 2>"$dir/warm-u.err"
check "cache warm (recorded usage): the same $n_before experts again" \
  test "$(ls "$P"/models/tiny-*/experts | wc -l)" = "$n_before"
"$bin" cache prune --cache-dir "$P" --disk-cache 3M >"$dir/prune.out"
check "cache prune --disk-cache 3M: experts evicted, the core kept" bash -c \
  "grep -Eq 'pruned [1-9][0-9]* expert' '$dir/prune.out' && [ \$(du -s --block-size=1 '$P' | cut -f1) -le 3300000 ] && test -f $P/models/tiny-*/core-1.ok"
"$bin" cache clear "$url/tiny.gguf" --cache-dir "$P" >/dev/null
check "cache clear removes the model" test -z "$(ls "$P/models")"

# 9b. Where the cache lives without --cache-dir; pull fetches the core only by
# default; adjacent experts are fetched as one range per part (gate, up, down) at
# most: parts that lie one after another in the file join into one request.
DELTAFIN_CACHE_DIR=$dir/env-cache "$bin" pull "$url/tiny.gguf" >/dev/null 2>"$dir/pull-env.err"
check "DELTAFIN_CACHE_DIR: the cache is there; pull took the core only" bash -c \
  "test -f $dir/env-cache/models/tiny-*/core-1.ok && [ -z \"\$(ls $dir/env-cache/models/tiny-*/experts)\" ]"
(unset DELTAFIN_CACHE_DIR; XDG_CACHE_HOME=$dir/xdg "$bin" pull "$url/tiny.gguf" >/dev/null 2>&1)
check "default cache directory: \$XDG_CACHE_HOME/deltafin" test -f "$(ls -d "$dir"/xdg/deltafin/models/tiny-* | head -1)/core-1.ok"
: >"$dir/ng/ranges.log"; kill -USR1 "$(cat "$dir/ng/nginx.pid")"; sleep 0.2
DELTAFIN_CACHE_DIR=$dir/env-cache "$bin" pull "$url/tiny.gguf" --layers 0-0 >/dev/null 2>&1
n_req=$(grep '^GET /tiny.gguf' "$dir/ng/ranges.log" | grep -vc 'bytes=0-0 ')
check "pull --layers 0-0: 8 adjacent experts in $n_req range requests (at most one per part)" \
  test "$n_req" -ge 1 -a "$n_req" -le 3

# 10. The file changes upstream: a clear error, nothing mixed.
cp "$dir/www/tiny.gguf" "$dir/tiny.orig"
"$bin" synth --preset tiny --arch qwen3moe --experts 8 --seed 7 --force -o "$dir/www/tiny.gguf" >/dev/null 2>&1
# nginx's ETag is the modification time in seconds and the size: a file rewritten
# within the same second at the same size is indistinguishable. Later is realistic.
touch -d "@$(( $(date +%s) + 3600 ))" "$dir/www/tiny.gguf"
ev -m "$url/tiny.gguf" --cache-dir "$C" >/dev/null 2>"$dir/changed.err"; rc=$?
check "changed upstream: fails" test $rc != 0
check "changed upstream: the error says the file changed" grep -q "changed at the origin" "$dir/changed.err"
cp "$dir/tiny.orig" "$dir/www/tiny.gguf"
exit $fail
