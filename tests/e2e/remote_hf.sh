#!/usr/bin/env bash
# Hugging Face habits against a hub on loopback (nginx serving a directory laid out as
# the hub: /OWNER/REPO/resolve/REV/FILE, and the API's listings as static JSON),
# reached through HF_ENDPOINT: hf://OWNER/REPO:QUANT picks the file or split set of
# that quantization (case-insensitive; an ambiguous or unknown tag lists the files),
# hf://OWNER/REPO a repository's only GGUF, -hf OWNER/REPO:QUANT as llama.cpp takes
# it; paginated listings and mirrors without the tree API; the token the login tools
# save ($HF_HOME/token, ~/.cache/huggingface/token) when HF_TOKEN is unset, never
# printed; a 401/403 explained (gated repository: accept the licence, set HF_TOKEN);
# inspect on remote models; :QUANT resolved from the cache offline.
# usage: remote_hf.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-hf; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

synth() { "$bin" synth --preset tiny --arch qwen3moe --experts 4 "$@" >/dev/null 2>&1 || { echo "FAIL synth $*"; exit 1; }; }
W=$dir/www
# acme/multi: several quantizations, one a split set in a folder, a vision projector.
R=$W/acme/multi/resolve/main; mkdir -p "$R/UD-IQ1_S"
synth --type Q8_0 -o "$R/Tiny-Q8_0.gguf"
synth --type Q4_0 -o "$R/Tiny-Q4_K_M.gguf"   # (the name is a label; deltafin computes Q4_0)
synth --type Q8_0 --seed 5 --split 2 -o "$R/UD-IQ1_S/Tiny-UD-IQ1_S.gguf"
cp "$R/Tiny-Q8_0.gguf" "$R/mmproj-Tiny-F16.gguf"
echo "# multi" >"$R/README.md"
# acme/one: one model; acme/amb: one tag in two folders; acme/gated: needs a token;
# acme/old: a mirror without the tree API; acme/paged: a listing in two pages.
mkdir -p "$W/acme/one/resolve/main" "$W/acme/amb/resolve/main/a" "$W/acme/amb/resolve/main/b" \
  "$W/acme/gated/resolve/main" "$W/acme/paged/resolve/main" "$W/acme/old/resolve/main"
cp "$R/Tiny-Q8_0.gguf" "$W/acme/one/resolve/main/tiny.gguf"; echo hi >"$W/acme/one/resolve/main/README.md"
cp "$R/Tiny-Q8_0.gguf" "$W/acme/amb/resolve/main/a/X-Q8_0.gguf"
cp "$R/Tiny-Q8_0.gguf" "$W/acme/amb/resolve/main/b/X-Q8_0.gguf"
cp "$R/Tiny-Q8_0.gguf" "$W/acme/gated/resolve/main/Gated-Q8_0.gguf"
cp "$R/Tiny-Q8_0.gguf" "$W/acme/paged/resolve/main/P-Q8_0.gguf"
cp "$R/Tiny-Q4_K_M.gguf" "$W/acme/paged/resolve/main/P-Q4_K_M.gguf"
cp "$R/Tiny-Q8_0.gguf" "$W/acme/old/resolve/main/Old-Q8_0.gguf"
# The API's listings, made from the tree as the hub would answer.
python3 - "$W" <<'PY'
import json, os, sys
W = sys.argv[1]
def tree(repo):
    root = f"{W}/acme/{repo}/resolve/main"
    out = []
    for d, subdirs, files in sorted(os.walk(root)):
        rel = os.path.relpath(d, root)
        for s in sorted(subdirs):
            out.append({"type": "directory", "path": os.path.normpath(os.path.join(rel, s))})
        for f in sorted(files):
            out.append({"type": "file", "path": os.path.normpath(os.path.join(rel, f)), "size": 1})
    return out
for repo in ["multi", "one", "amb", "gated"]:
    os.makedirs(f"{W}/api/models/acme/{repo}/tree", exist_ok=True)
    json.dump(tree(repo), open(f"{W}/api/models/acme/{repo}/tree/main", "w"))
t = tree("paged")
os.makedirs(f"{W}/api/models/acme/paged/tree", exist_ok=True)
json.dump(t[:1], open(f"{W}/api/models/acme/paged/tree/main", "w"))
json.dump(t[1:], open(f"{W}/api/models/acme/paged/tree/page2", "w"))
os.makedirs(f"{W}/api/models/acme/old/revision", exist_ok=True)
json.dump({"id": "acme/old", "siblings": [{"rfilename": e["path"]} for e in tree("old") if e["type"] == "file"]},
          open(f"{W}/api/models/acme/old/revision/main", "w"))
PY
start_nginx "$dir/ng" "$W" "" "
    location = /api/models/acme/paged/tree/main {
      add_header Link '<http://127.0.0.1:\$server_port/api/models/acme/paged/tree/page2>; rel=\"next\"';
    }
    location /acme/gated/ {
      if (\$http_authorization = '') { return 401; }
      if (\$http_authorization != 'Bearer hf_saved_token') { return 403; }
    }"
export HF_ENDPOINT=http://127.0.0.1:$NGINX_PORT
unset HF_TOKEN HF_TOKEN_PATH
export HF_HOME=$dir/no-hf-home
C=$dir/cache
ids=1,17,33,250,9,9,120,77
ev() { "$bin" eval --ids $ids --top 10 --all-positions "$@"; }
ev -m "$R/Tiny-Q4_K_M.gguf" >"$dir/ref-q4" 2>/dev/null || { echo "FAIL local eval"; exit 1; }
ev -m "$R/Tiny-Q8_0.gguf" >"$dir/ref-q8" 2>/dev/null
ev -m "$R/UD-IQ1_S/Tiny-UD-IQ1_S-00001-of-00002.gguf" >"$dir/ref-sp" 2>/dev/null
check "(the three models compute differently)" sh -c "! cmp -s '$dir/ref-q4' '$dir/ref-q8' && ! cmp -s '$dir/ref-q8' '$dir/ref-sp'"

# 1. :QUANT picks its file, case-insensitively.
ev hf://acme/multi:q4_k_m --cache-dir "$C" >"$dir/q4" 2>"$dir/q4.err"
check "hf://acme/multi:q4_k_m = the local Tiny-Q4_K_M.gguf" cmp -s "$dir/ref-q4" "$dir/q4"
check "  it asked the API for the listing" grep -q "GET /api/models/acme/multi/tree/main" "$dir/ng/ranges.log"
ev hf://acme/multi:Q8_0 --cache-dir "$C" >"$dir/q8" 2>/dev/null
check "hf://acme/multi:Q8_0 = the local Tiny-Q8_0.gguf (not the mmproj file)" cmp -s "$dir/ref-q8" "$dir/q8"
ev hf://acme/multi:UD-IQ1_S --cache-dir "$C" >"$dir/sp" 2>/dev/null
check "hf://acme/multi:UD-IQ1_S: the split set in its folder = the local split model" cmp -s "$dir/ref-sp" "$dir/sp"
check "  both parts came" test "$(ls "$C"/models/Tiny-UD-IQ1_S-*/core-*.ok 2>/dev/null | wc -l)" = 2

# 2. Unknown tag, several models and no tag, an ambiguous tag: errors that list the files.
ev hf://acme/multi:Q5_K_M --cache-dir "$C" >/dev/null 2>"$dir/e-unknown"; rc=$?
check "an unknown tag: refused, listing the models" sh -c "test $rc -ne 0 && grep -q \"matches 'Q5_K_M'\" '$dir/e-unknown' && grep -q 'Tiny-Q8_0.gguf' '$dir/e-unknown'"
ev hf://acme/multi --cache-dir "$C" >/dev/null 2>"$dir/e-several"; rc=$?
check "hf://OWNER/REPO of several models: asks for :QUANT, listing them" \
  sh -c "test $rc -ne 0 && grep -q ':QUANT' '$dir/e-several' && grep -q 'UD-IQ1_S/Tiny-UD-IQ1_S-00001-of-00002.gguf' '$dir/e-several' && ! grep -q mmproj '$dir/e-several'"
ev hf://acme/amb:Q8_0 --cache-dir "$C" >/dev/null 2>"$dir/e-amb"; rc=$?
check "an ambiguous tag: refused, naming both candidates" \
  sh -c "test $rc -ne 0 && grep -q 'a/X-Q8_0.gguf' '$dir/e-amb' && grep -q 'b/X-Q8_0.gguf' '$dir/e-amb'"

# 3. A repository with one GGUF; -hf as llama.cpp takes it; a paginated listing; a
# mirror without the tree API.
ev hf://acme/one --cache-dir "$C" >"$dir/one" 2>"$dir/one.err"
check "hf://acme/one (its only GGUF)" cmp -s "$dir/ref-q8" "$dir/one"
t_local=$("$bin" run -m "$R/Tiny-Q4_K_M.gguf" -p "hello" -n 8 --temp 0 2>/dev/null)
t_hf=$("$bin" run -hf acme/multi:Q4_K_M --cache-dir "$C" -p "hello" -n 8 --temp 0 2>/dev/null)
check "run -hf acme/multi:Q4_K_M = the local text" test "$t_local" = "$t_hf"
check "(page 1 of acme/paged lists P-Q4_K_M.gguf only)" sh -c "grep -q P-Q4_K_M '$W/api/models/acme/paged/tree/main' && ! grep -q P-Q8_0 '$W/api/models/acme/paged/tree/main'"
ev hf://acme/paged:Q8_0 --cache-dir "$C" >"$dir/paged" 2>"$dir/paged.err"
check "a listing in two pages (Link: rel=next): the file on page 2 found" cmp -s "$dir/ref-q8" "$dir/paged"
ev hf://acme/old:Q8_0 --cache-dir "$C" >"$dir/old" 2>"$dir/old.err"
check "no tree API: the 'siblings' of /api/models/REPO/revision/REV" cmp -s "$dir/ref-q8" "$dir/old"

# 4. Gated: no token -> 401 explained; the login tools' token file; a wrong token -> 403.
ev hf://acme/gated:Q8_0 --cache-dir "$C" >/dev/null 2>"$dir/e401"; rc=$?
check "no token: fails with HTTP 401" sh -c "test $rc -ne 0 && grep -q 'HTTP 401' '$dir/e401'"
check "  and says: gated, accept the licence on the model page, set HF_TOKEN; no token was sent" \
  sh -c "grep -q 'gated' '$dir/e401' && grep -q 'accept its licence on $HF_ENDPOINT/acme/gated' '$dir/e401' && grep -q 'HF_TOKEN' '$dir/e401' && grep -q 'no token was sent' '$dir/e401'"
mkdir -p "$dir/hf-home"; printf 'hf_saved_token\n' >"$dir/hf-home/token"
HF_HOME=$dir/hf-home ev hf://acme/gated:Q8_0 --cache-dir "$C" -v >"$dir/gated" 2>"$dir/gated.err"
check "HF_TOKEN unset: the token in \$HF_HOME/token is used" cmp -s "$dir/ref-q8" "$dir/gated"
check "  and never printed" sh -c "! grep -q hf_saved_token '$dir/gated.err'"
mkdir -p "$dir/home/.cache/huggingface"; printf 'hf_saved_token' >"$dir/home/.cache/huggingface/token"
(unset HF_HOME XDG_CACHE_HOME; HOME=$dir/home ev hf://acme/gated/Gated-Q8_0.gguf --cache-dir "$dir/cache2" >"$dir/gated2" 2>/dev/null)
check "HF_HOME unset too: ~/.cache/huggingface/token" cmp -s "$dir/ref-q8" "$dir/gated2"
HF_TOKEN=hf_wrong ev hf://acme/gated/Gated-Q8_0.gguf --cache-dir "$dir/cache3" >/dev/null 2>"$dir/e403"; rc=$?
check "a token without access: HTTP 403, explained, HF_TOKEN named as its source" \
  sh -c "test $rc -ne 0 && grep -q 'HTTP 403' '$dir/e403' && grep -q 'accept its licence' '$dir/e403' && grep -q 'token in HF_TOKEN' '$dir/e403' && ! grep -q hf_wrong '$dir/e403'"

# 5. inspect works on remote models (hf:// and http://).
"$bin" inspect hf://acme/multi:Q8_0 --cache-dir "$C" --mem 100M >"$dir/inspect" 2>&1; rc=$?
check "inspect hf://acme/multi:Q8_0: architecture, the file chosen, a budget" \
  sh -c "test $rc -eq 0 && grep -q 'architecture:   qwen3moe' '$dir/inspect' && grep -q 'Tiny-Q8_0.gguf' '$dir/inspect' && grep -q 'expected read' '$dir/inspect'"
"$bin" inspect "$HF_ENDPOINT/acme/one/resolve/main/tiny.gguf" --cache-dir "$C" >"$dir/inspect-url" 2>&1; rc=$?
check "inspect http://...: works" sh -c "test $rc -eq 0 && grep -q 'experts:        4 per MoE layer' '$dir/inspect-url'"

# 6. Offline, :QUANT is resolved from the copies in the cache.
ev hf://acme/multi:Q4_K_M --cache-dir "$C" --offline >"$dir/off" 2>"$dir/off.err"
check "--offline hf://acme/multi:Q4_K_M: from the cache" cmp -s "$dir/ref-q4" "$dir/off"
ev hf://acme/multi:Q6_K --cache-dir "$C" --offline >/dev/null 2>"$dir/off-e"; rc=$?
check "--offline, a tag not cached: refused, naming what the cache holds" \
  sh -c "test $rc -ne 0 && grep -q 'in the disk cache' '$dir/off-e'"
exit $fail
