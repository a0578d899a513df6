#!/usr/bin/env bash
# Remote-model benchmark: a model served by nginx over a loopback link limited to
# RATE_MBIT by tc (a token bucket on `lo` inside a private network namespace, so the
# limit is the link's, shared by every connection, and nothing else on the machine is
# affected). MODEL is a .gguf file or a Hugging Face folder (served as a URL ending
# in '/', as `run -m http://HOST/DIR/` takes it). Measures
#   0. a cold start from an empty cache (headers, core and experts on demand): time
#      to the first token, bytes fetched against bytes needed (bench/remote_bytes.py:
#      metadata + core as stored + the experts touched), range requests per expert,
#      link utilisation while fetching (deltafin's busy time) -> OUTDIR/summary.txt;
#   1. pull of the core and of two layers' experts (bulk download): link utilisation;
#   2. a cold run: time to first token with only the core local, and link
#      utilisation while fetching on demand (received bytes / busy time / rate);
#   3. (not with QUICK=1) a sequence of prompts on the filling cache, then the same
#      prompts warm: tokens/s per prompt -> CSV and a PNG plot.
# Needs root (unshare -n, tc).
# usage: [QUICK=1] [THREADS=N] bench/remote_bench.sh DELTAFIN MODEL OUTDIR [RATE_MBIT]
set -eu
bin=$(realpath "$1"); model=$(realpath "$2"); out=$(mkdir -p "$3" && cd "$3" && pwd); rate=${4:-400}
src=$(cd "$(dirname "$0")/.." && pwd)
if [ "${IN_NETNS:-}" != 1 ]; then
  exec unshare -n env IN_NETNS=1 bash "$0" "$@"
fi
ip link set lo up
tc qdisc add dev lo root tbf rate ${rate}mbit burst 256kb latency 200ms
source "$src/tests/remote/nginx.sh"
www=$(dirname "$model"); name=$(basename "$model")
start_nginx "$out/ng" "$www"
trap 'stop_nginx "$out/ng"' EXIT
url=http://127.0.0.1:$NGINX_PORT/$name
[ -d "$model" ] && url=$url/
threads=()
[ -n "${THREADS:-}" ] && threads=(-t "$THREADS")
C=$out/cache; rm -rf "$C"
limit_mbs=$(python3 -c "print($rate/8)")
echo "link: tc tbf $rate Mbit/s = $limit_mbs MB/s on lo (private netns); model $name ($url)"
prompt="The history of the region begins with"

# 0. A cold start: nothing local.
n0=$(wc -l <"$out/ng/ranges.log")
t0=$(date +%s.%N)
"$bin" run -m "$url" --cache-dir "$C" -p "$prompt" -n 16 --temp 0 --stats --mem 4G --profile none "${threads[@]}" \
  >"$out/start.txt" 2>"$out/start.err"
wall=$(python3 -c "print($(date +%s.%N) - $t0)")
grep -E "time to first token|network:|disk cache:" "$out/start.err"
python3 "$src/bench/remote_bytes.py" "$model" "$out/ng/ranges.log" "$n0" "$(ls -d "$C"/models/*/ | head -1)" \
  "$out/start.err" "$wall" "$rate" | tee "$out/summary.txt"
rm -rf "$C"

# 1. The core; bulk: the experts of two layers (a fresh download).
"$bin" pull "$url" --cache-dir "$C" 2>&1 | tail -2
"$bin" pull "$url" --cache-dir "$C" --layers 0-1 2>&1 | grep -E "^experts:" | tail -1
rm -rf "$C"/models/*/experts

# 2. A cold run with only the core local.
"$bin" run -m "$url" --cache-dir "$C" -p "$prompt" -n 16 --temp 0 --stats --mem 4G --profile none "${threads[@]}" \
  >"$out/cold.txt" 2>"$out/cold.err"
grep -E "time to first token|network:|disk cache:|decode:" "$out/cold.err"
[ "${QUICK:-}" = 1 ] && exit 0

# 3. Prompts on a filling cache, then warm.
rm -rf "$C"/models/*/experts "$C"/models/*/profile "$C"/models/*/usage
prompts=("Once upon a time in a small village" "The quick brown fox jumps over the lazy dog"
  "In 1905 Albert Einstein published" "def fibonacci(n): return" "The recipe calls for two cups of flour"
  "Rain fell on the old harbour town" "Quantum computers use qubits to" "She opened the letter and read"
  "The stock market closed higher today" "Photosynthesis converts light into" "Il était une fois"
  "The spacecraft entered orbit around")
echo "pass,prompt,ttft_s,decode_tok_s,total_tok_s,fetched_mib,net_mibs" >"$out/fill.csv"
for pass in cold warm; do
  i=0
  for p in "${prompts[@]}"; do
    i=$((i + 1))
    "$bin" run -m "$url" --cache-dir "$C" -p "$p" -n 24 --temp 0 --ignore-eos --stats --mem 4G --profile none \
      "${threads[@]}" >/dev/null 2>"$out/p.err"
    python3 - "$out/p.err" "$pass" "$i" >>"$out/fill.csv" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
pp = re.search(r"prompt: (\d+) tokens in ([\d.]+) s", t); dd = re.search(r"decode: (\d+) tokens in ([\d.]+) s", t)
ttft = float(re.search(r"time to first token: ([\d.]+)", t).group(1))
n_tok = int(pp.group(1)) + int(dd.group(1)); total_s = float(pp.group(2)) + float(dd.group(2))
dec = (int(dd.group(1)) - 1) / max(float(dd.group(2)), 1e-9)
mb = float(re.search(r"fetched from the origin \(([\d.]+) MiB", t).group(1))
net = float(re.search(r"([\d.]+) MiB/s while busy", t.split("network:")[1]).group(1))
print(f"{sys.argv[2]},{sys.argv[3]},{ttft:.3f},{dec:.2f},{n_tok/total_s:.2f},{mb:.1f},{net:.1f}")
PY
  done
done
cat "$out/fill.csv"
/usr/bin/python3 "$src/bench/plot_remote.py" "$out/fill.csv" "$out/remote_fill.png" "$limit_mbs"
