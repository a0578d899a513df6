#!/usr/bin/env bash
# A GGUF published as raw byte fragments (one file cut into parts meant to be
# concatenated, NAME.part1ofN ...; format/fragments.h), read in place as one model:
# `synth --fragments N` writes the cut file; the logits from the fragments equal
# those of the whole file bit for bit, named by the first part's name or by repeated
# -m, resident and with experts streamed (cuts on block boundaries: uncached reads
# per fragment; cuts anywhere: reads through the fragments), locally and over HTTP
# (nginx on loopback, a URL and hf://, experts streaming through the disk cache, a
# warm cache fetching nothing); a missing, short or misplaced part is a clear error
# naming it.
# usage: fragments.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-fragments; rm -rf "$dir"; mkdir -p "$dir/www"
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

w=$dir/www
syn() { "$bin" synth --preset tiny --arch qwen3moe --experts 8 --seed 5 "$@"; }
syn -o "$w/whole.gguf" >/dev/null 2>&1 || { echo "FAIL synth"; exit 1; }
syn --fragments 3 -o "$w/m.gguf" >/dev/null 2>"$dir/synth.err"
check "synth --fragments 3 exits 0" test $? = 0
p1=$w/m.gguf.part1of3 p2=$w/m.gguf.part2of3 p3=$w/m.gguf.part3of3
check "synth --fragments 3: three parts, no whole file left" test -f "$p1" -a -f "$p2" -a -f "$p3" -a ! -e "$w/m.gguf"
check "the parts concatenated are the whole file" cmp -s "$w/whole.gguf" <(cat "$p1" "$p2" "$p3")
s1=$(stat -c %s "$p1")
check "cut on 4096-byte boundaries ($s1 bytes a part)" test $((s1 % 4096)) = 0 -a "$(stat -c %s "$p2")" = "$s1"
# Cut anywhere (an odd size): no fragment boundary on a block boundary.
syn --fragments 4 --fragment-align 1 -o "$w/odd.gguf" >/dev/null 2>&1
o=$w/odd.gguf
check "--fragment-align 1: parts of an odd size" test $(( $(stat -c %s "$o.part1of4") % 2 )) = 1 -o \
  $(( $(stat -c %s "$o.part1of4") % 4096 )) != 0

ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
ev() { "$bin" eval --ids $ids --top 20 --all-positions -b 6 "$@"; }
ev -m "$w/whole.gguf" >"$dir/ref" 2>/dev/null || { echo "FAIL eval of the whole file"; exit 1; }
ev -m "$p1" >"$dir/pattern" 2>"$dir/pattern.err"
check "-m NAME.part1of3 (the others by name) = the whole file" cmp -s "$dir/ref" "$dir/pattern"
ev -m "$p1" -m "$p2" -m "$p3" >"$dir/list" 2>"$dir/list.err"
check "-m PART1 -m PART2 -m PART3 = the whole file" cmp -s "$dir/ref" "$dir/list"
ev -m "$o.part1of4" >"$dir/odd" 2>/dev/null
check "cut anywhere: = the whole file" cmp -s "$dir/ref" "$dir/odd"

# Streamed experts, a RAM cache of about two experts.
mem=$("$bin" eval -m "$w/whole.gguf" --ids 1 --mem 1K --profile none 2>&1 | grep -o 'give --mem of at least [0-9.]*' | grep -o '[0-9.]*')
mem=$(python3 -c "print(f'{$mem + 1.6:.2f}M')")
ev -m "$w/whole.gguf" --mem "$mem" --profile none >"$dir/ref-stream" 2>/dev/null
check "streamed whole file = resident" cmp -s "$dir/ref" "$dir/ref-stream"
ev -m "$p1" --mem "$mem" --profile none --stats >"$dir/stream" 2>"$dir/stream.err"
check "fragments, experts streamed (--mem $mem) = the whole file" cmp -s "$dir/ref" "$dir/stream"
check "fragments, streamed: experts were read and evicted" grep -q "evictions [1-9]" "$dir/stream.err"
ev -m "$o.part1of4" --mem "$mem" --profile none >"$dir/odd-stream" 2>/dev/null
check "cut anywhere, experts streamed = the whole file" cmp -s "$dir/ref" "$dir/odd-stream"
"$bin" inspect -m "$p1" >"$dir/inspect" 2>&1
check "inspect reads the fragments" grep -q "qwen3moe" "$dir/inspect"

# Errors, each naming the part.
ev -m "$p2" >/dev/null 2>"$dir/e-part2"
check "part 2 alone: says to give the first part" grep -q "is part 2 of 3 .*give the first part, .*part1of3" "$dir/e-part2"
ev -m "$p1" -m "$p3" -m "$p2" >/dev/null 2>"$dir/e-order"
check "parts out of order: named" grep -q "fragment 2 of 3 is given as .*part3of3" "$dir/e-order"
mv "$p3" "$dir/p3"
ev -m "$p1" >/dev/null 2>"$dir/e-missing"; rc=$?
check "missing part: fails, naming it" test $rc != 0 -a -n "$(grep "part 3 of 3 .*m.gguf.part3of3.* is missing" "$dir/e-missing")"
head -c 1000 "$dir/p3" >"$p3"
ev -m "$p1" >/dev/null 2>"$dir/e-short-last"; rc=$?
check "short last part: fails, listing the parts" test $rc != 0 -a -n "$(grep "part 3 .*part3of3 (1000 bytes" "$dir/e-short-last")"
mv "$dir/p3" "$p3"
cp "$p2" "$dir/p2"; truncate -s 5000 "$p2"
ev -m "$p1" >/dev/null 2>"$dir/e-short"; rc=$?
check "short middle part: fails, naming it" test $rc != 0 -a -n "$(grep "part 2 of 3 .*part2of3) is short: 5000 bytes" "$dir/e-short")"
mv "$dir/p2" "$p2"
check "the parts are whole again" cmp -s "$w/whole.gguf" <(cat "$p1" "$p2" "$p3")

# Over HTTP: the same fragments from nginx, experts through the disk cache.
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
commit=0123456789abcdef0123456789abcdef01234567
start_nginx "$dir/ng" "$w" "" "
    location ~ ^/acme/frag/resolve/(main|$commit)/(.+)\$ {
      add_header X-Repo-Commit $commit always;
      return 302 /cdn/\$2;
    }
    location /cdn/ { alias $w/; }"
url=http://127.0.0.1:$NGINX_PORT
C=$dir/cache
ev -m "$url/m.gguf.part1of3" --cache-dir "$C" --mem "$mem" --stats >"$dir/http-cold" 2>"$dir/http-cold.err"
check "HTTP, NAME.part1of3 (cold, --mem $mem) = the whole file" cmp -s "$dir/ref" "$dir/http-cold"
check "HTTP cold: experts fetched from the origin" grep -Eq "[1-9][0-9]* fetched from the origin" "$dir/http-cold.err"
check "HTTP: the ranges went to each fragment" bash -c \
  "grep -q '^GET /m.gguf.part1of3' '$dir/ng/ranges.log' && grep -q '^GET /m.gguf.part2of3' '$dir/ng/ranges.log' && grep -q '^GET /m.gguf.part3of3' '$dir/ng/ranges.log'"
check "HTTP: meta.json pins every fragment" test "$(grep -c '"etag"' "$C"/models/*/meta.json)" = 4
ev -m "$url/m.gguf.part1of3" --cache-dir "$C" --mem "$mem" --stats >"$dir/http-warm" 2>"$dir/http-warm.err"
check "HTTP warm = the whole file" cmp -s "$dir/ref" "$dir/http-warm"
check "HTTP warm: nothing fetched" grep -Eq "[1-9][0-9]* experts from disk, 0 fetched" "$dir/http-warm.err"
ev -m "$url/m.gguf.part1of3" -m "$url/m.gguf.part2of3" -m "$url/m.gguf.part3of3" --cache-dir "$C" --stats \
  >"$dir/http-list" 2>"$dir/http-list.err"
check "HTTP, -m URL1 -m URL2 -m URL3 = the whole file, from the same cache" bash -c \
  "cmp -s '$dir/ref' '$dir/http-list' && grep -Eq ' 0 fetched' '$dir/http-list.err' && [ \$(ls '$C/models' | wc -l) = 1 ]"
ev -m "$url/odd.gguf.part1of4" --cache-dir "$C" --mem "$mem" >"$dir/http-odd" 2>/dev/null
check "HTTP, cut anywhere = the whole file" cmp -s "$dir/ref" "$dir/http-odd"
HF_ENDPOINT=$url ev -m "hf://acme/frag/m.gguf.part1of3" --cache-dir "$dir/cache-hf" >"$dir/hf" 2>"$dir/hf.err"
check "hf://.../m.gguf.part1of3 = the whole file, fragments at the pinned commit" bash -c \
  "cmp -s '$dir/ref' '$dir/hf' && grep -q 'resolve/$commit/m.gguf.part3of3' '$dir/ng/ranges.log'"
mv "$p2" "$dir/p2"
ev -m "$url/m.gguf.part1of3" --cache-dir "$dir/cache-e" >/dev/null 2>"$dir/e-http"; rc=$?
check "HTTP, a part that is not there: fails, naming it" \
  test $rc != 0 -a -n "$(grep "part 2 of 3 .*m.gguf.part2of3.* is missing.*404" "$dir/e-http")"
mv "$dir/p2" "$p2"
exit $fail
