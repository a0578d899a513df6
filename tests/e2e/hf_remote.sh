#!/usr/bin/env bash
# A Hugging Face folder (config.json + safetensors, no GGUF) run straight from an
# origin: nginx on loopback serves a folder written by `synth --format hf` laid out
# as the hub (/OWNER/REPO/resolve/REV/FILE, X-Repo-Commit, the API's listing as
# static JSON, a token required), reached as hf://OWNER/REPO and as an http:// URL
# prefix. Checks:
#   - teacher-forced logits (`eval`) from hf://acme/tiny and from the http:// prefix
#     equal those from the local folder bit for bit; so do a kimi-k3 folder's, whose
#     compressed-tensors MXFP4 experts are reshuffled into MXFP4 blocks as they land;
#   - the shards' bytes requested are the headers, the core and the experts the ids
#     needed, and less than the files (printed); each expert is one request where
#     its tensors lie together in a shard;
#   - the vision tower's bytes are never requested;
#   - a second run, and an --offline one, request no shard bytes (the cache serves);
#   - a shard that is missing (404) or truncated fails naming the shard;
#   - HF_TOKEN is sent (the origin refuses requests without it) and never printed.
# usage: hf_remote.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-hf-remote; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

commit=0123456789abcdef0123456789abcdef01234567
W=$dir/www
local_dir=$dir/local
"$bin" synth --preset tiny --arch qwen3moe --type BF16 --expert-type BF16 --seed 3 --format hf -o "$local_dir" \
  >/dev/null 2>"$dir/synth.err" || { echo "FAIL synth --format hf: $(cat "$dir/synth.err")"; exit 1; }
# Repositories: tiny (as written), missing (a shard gone), trunc (a shard cut short);
# each at resolve/COMMIT with main a link to it, and the API's listing.
for repo in tiny missing trunc; do
  mkdir -p "$W/acme/$repo/resolve"
  cp -r "$local_dir" "$W/acme/$repo/resolve/$commit"
  ln -s "$commit" "$W/acme/$repo/resolve/main"
done
shard2=$(cd "$local_dir" && ls model-00002-of-*.safetensors)
rm "$W/acme/missing/resolve/$commit/$shard2"
python3 - "$W/acme/trunc/resolve/$commit/$shard2" <<'PY'
import os, sys
p = sys.argv[1]; n = os.path.getsize(p); os.truncate(p, n - 1000)
PY
python3 - "$W" "$local_dir" <<'PY'
import json, os, sys
W, d = sys.argv[1], sys.argv[2]
files = sorted(os.listdir(d))
for repo in ["tiny", "missing", "trunc"]:
    os.makedirs(f"{W}/api/models/acme/{repo}/tree", exist_ok=True)
    json.dump([{"type": "file", "path": f, "size": 1} for f in files], open(f"{W}/api/models/acme/{repo}/tree/main", "w"))
PY
mkdir -p "$W/plain"; cp -r "$local_dir" "$W/plain/tiny"
token=hf_remote_test_secret_7f3a
start_nginx "$dir/ng" "$W" "" "
    location /acme/ {
      if (\$http_authorization != 'Bearer $token') { return 401; }
      add_header X-Repo-Commit $commit always;
    }
    location /api/ {
      if (\$http_authorization != 'Bearer $token') { return 401; }
    }"
export HF_ENDPOINT=http://127.0.0.1:$NGINX_PORT HF_TOKEN=$token
unset HF_TOKEN_PATH
export HF_HOME=$dir/no-hf-home
log=$dir/ng/ranges.log
C=$dir/cache
ids=1,17,33,250,9
ev() { "$bin" eval --ids $ids --top 10 --all-positions "$@"; }
ev -m "$local_dir" >"$dir/ref" 2>"$dir/ref.err" || { echo "FAIL local eval: $(cat "$dir/ref.err")"; exit 1; }

# 1. hf://acme/tiny = the local folder, bit for bit.
n0=$(wc -l <"$log")
ev -m hf://acme/tiny --cache-dir "$C" -v --stats >"$dir/hf1" 2>"$dir/hf1.err"
check "hf://acme/tiny: eval = the local folder's, bit for bit" cmp -s "$dir/ref" "$dir/hf1"
[ -s "$dir/hf1" ] || cat "$dir/hf1.err" | tail -5
tail -n +$((n0 + 1)) "$log" >"$dir/run1.log"
check "  the revision was pinned: shards read at resolve/$commit" grep -q "/resolve/$commit/model-" "$dir/run1.log"

# 2. What was fetched: shard headers, the core, the experts needed; never the tower.
cache_model=$(dirname "$(grep -l '"folder": true' "$C"/models/*/meta.json | head -1)")
python3 - "$local_dir" "$dir/run1.log" "$cache_model" <<'PY' >"$dir/bytes" 2>&1
import json, os, re, struct, sys
d, logf, cm = sys.argv[1], sys.argv[2], sys.argv[3]
shards = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
total = sum(os.path.getsize(os.path.join(d, s)) for s in shards)
header = core = 0
expert = {}   # (layer, expert) -> bytes
vision = []   # (shard, begin, end)
for s in shards:
    b = open(os.path.join(d, s), "rb").read(8)
    n = struct.unpack("<Q", b)[0]
    h = json.loads(open(os.path.join(d, s), "rb").read(8 + n)[8:])
    header += 8 + n
    for name, t in h.items():
        if name == "__metadata__": continue
        a, e = t["data_offsets"]
        if name.startswith("vision_tower."):
            vision.append((s, 8 + n + a, 8 + n + e)); continue
        m = re.match(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.", name)
        if m: expert[(int(m[1]), int(m[2]))] = expert.get((int(m[1]), int(m[2])), 0) + e - a
        else: core += e - a
entries = os.listdir(os.path.join(cm, "experts"))
need_experts = sum(expert[tuple(int(x) for x in e.split("-"))] for e in entries)
# Every shard request: a probe (byte 0), the header's length or JSON, a whole core
# tensor (once) or a whole expert tensor; never the vision tower, nothing else.
tensor_at = {}
for s in shards:
    n = struct.unpack("<Q", open(os.path.join(d, s), "rb").read(8))[0]
    h = json.loads(open(os.path.join(d, s), "rb").read(8 + n)[8:])
    for name, t in h.items():
        if name != "__metadata__": tensor_at[(s, 8 + n + t["data_offsets"][0])] = (name, t["data_offsets"][1] - t["data_offsets"][0], n)
fetched = requests = expert_bytes = 0
bad, core_seen = [], {}
for line in open(logf):
    m = re.match(r"GET (\S+) HTTP/\S+ bytes=(\d+)-(\d+) (\d+) (\d+)", line)
    if not m or not m[1].endswith(".safetensors"): continue
    s = m[1].rsplit("/", 1)[1]; lo, n = int(m[2]), int(m[3]) + 1 - int(m[2])
    fetched += int(m[5]); requests += 1
    hn = struct.unpack("<Q", open(os.path.join(d, s), "rb").read(8))[0]
    if (lo, n) in ((0, 1), (0, 8), (8, hn)): continue
    t = tensor_at.get((s, lo))
    if not t or t[0].startswith("vision_tower.") or n % t[1] != 0:   # an expert's tensors may come in one request
        bad.append(line.strip()); continue
    if ".mlp.experts." in t[0]: expert_bytes += n
    else:
        core_seen[t[0]] = core_seen.get(t[0], 0) + 1
        if n != t[1]: bad.append(line.strip())
twice = [k for k, v in core_seen.items() if v > 1]
probe_and_len = len(shards)  # the probes; the 8-byte lengths are in the headers
expected = header + core + need_experts + probe_and_len
print(f"shard files: {total} bytes; fetched {fetched} bytes in {requests} range requests")
print(f"  headers {header} + core {core} + probes {probe_and_len} + expert tensors {expert_bytes} "
      f"({len(entries)} of {len(expert)} experts cached: {need_experts})")
print(f"requests that are not a header, a core tensor or expert tensors: {len(bad)} {bad[:3]}")
print(f"core tensors requested twice: {twice[:3]}")
ok = (fetched < total and not bad and not twice and len(core_seen) * 0 == 0 and
      fetched == header + core + probe_and_len + expert_bytes and expert_bytes >= need_experts)
sys.exit(0 if ok else 1)
PY
rc=$?
sed 's/^/     /' "$dir/bytes"
check "fetched = headers + core (once) + expert tensors (< the files), the vision tower never" test $rc -eq 0
entries=$(ls "$cache_model/experts" | wc -l)
check "  one range request per expert at most (--stats: $(grep -o '[0-9]* fetched from the origin ([^)]*)' "$dir/hf1.err"))" \
  python3 -c "
import re,sys
m=re.search(r'(\d+) fetched from the origin \([0-9.]+ MiB in (\d+) range requests\)', open('$dir/hf1.err').read())
sys.exit(0 if m and int(m[1]) > 0 and int(m[2]) <= 3*int(m[1]) else 1)"

# 3. Again: the cache serves; no shard bytes are requested. --offline: nothing sent.
n1=$(wc -l <"$log")
ev -m hf://acme/tiny --cache-dir "$C" >"$dir/hf2" 2>"$dir/hf2.err"
check "second run: eval = the local folder's" cmp -s "$dir/ref" "$dir/hf2"
check "  no shard was requested (only: $(tail -n +$((n1 + 1)) "$log" | awk '{print $2}' | tr '\n' ' '))" \
  sh -c "! tail -n +$((n1 + 1)) '$log' | grep -q safetensors"
n2=$(wc -l <"$log")
ev -m hf://acme/tiny --cache-dir "$C" --offline >"$dir/hf3" 2>"$dir/hf3.err"
check "--offline: eval = the local folder's" cmp -s "$dir/ref" "$dir/hf3"
check "  nothing reached nginx" test "$(wc -l <"$log")" = "$n2"

# 4. An http:// URL prefix of the folder.
ev -m "$HF_ENDPOINT/plain/tiny/" --cache-dir "$C" >"$dir/url" 2>"$dir/url.err"
check "http://.../plain/tiny/: eval = the local folder's" cmp -s "$dir/ref" "$dir/url"
[ -s "$dir/url" ] || tail -3 "$dir/url.err"

# 4b. Kimi K3's compressed-tensors MXFP4 experts (codes and scales side by side in a
# shard, reshuffled into MXFP4 blocks as they land) over http://: the local folder's
# logits, and each expert fetched as one span of its shard (no more requests than experts).
k3=$W/plain/k3
"$bin" synth --preset tiny --arch kimi-k3 --type BF16 --expert-type MXFP4 --seed 7 --format hf -o "$k3" \
  >/dev/null 2>"$dir/synth-k3.err" || { echo "FAIL synth kimi-k3 --format hf: $(cat "$dir/synth-k3.err")"; exit 1; }
ev -m "$k3" >"$dir/ref-k3" 2>"$dir/ref-k3.err" || { echo "FAIL local kimi-k3 eval: $(cat "$dir/ref-k3.err")"; exit 1; }
ev -m "$HF_ENDPOINT/plain/k3/" --cache-dir "$C" --stats >"$dir/url-k3" 2>"$dir/url-k3.err"
check "http://.../plain/k3/ (MXFP4 experts): eval = the local folder's" cmp -s "$dir/ref-k3" "$dir/url-k3"
[ -s "$dir/url-k3" ] || tail -3 "$dir/url-k3.err"
check "  experts fetched, no more range requests than experts ($(grep -o '[0-9]* fetched from the origin ([^)]*)' "$dir/url-k3.err"))" \
  python3 -c "
import re,sys
m=re.search(r'(\d+) fetched from the origin \([0-9.]+ MiB in (\d+) range requests\)', open('$dir/url-k3.err').read())
sys.exit(0 if m and int(m[1]) > 0 and int(m[2]) <= int(m[1]) else 1)"

# 5. A missing shard (404) and a truncated one fail naming the shard.
ev -m hf://acme/missing --cache-dir "$C" >/dev/null 2>"$dir/missing.err"; rc=$?
check "a missing shard: refused, naming $shard2 and the 404" \
  sh -c "test $rc -ne 0 && grep -q '$shard2' '$dir/missing.err' && grep -q 404 '$dir/missing.err'"
ev -m hf://acme/trunc --cache-dir "$C" >/dev/null 2>"$dir/trunc.err"; rc=$?
check "a truncated shard: refused, naming $shard2" sh -c "test $rc -ne 0 && grep -q '$shard2' '$dir/trunc.err'"

# 6. The token: without it the origin refuses; it never appears in any output.
HF_TOKEN= ev -m hf://acme/tiny@main --cache-dir "$dir/cache-notoken" >/dev/null 2>"$dir/notoken.err"; rc=$?
check "without HF_TOKEN: HTTP 401, explained" sh -c "test $rc -ne 0 && grep -q 401 '$dir/notoken.err'"
check "HF_TOKEN never printed" sh -c "! grep -rq '$token' '$dir'/*.err '$dir'/hf* '$dir/url' $C/models/*/meta.json"
exit $fail
