#!/usr/bin/env bash
# Expert streaming under a memory cap: deltafin against llama.cpp (node-llama-cpp,
# mmap, its default) on a synthetic kimi-k2-mini several times larger than the cap.
#   1. fio: the disk's random-read bandwidth (1-16 MiB O_DIRECT reads, 16 in flight).
#   2. Uniform routing: deltafin bench (next-layer prefetch auto, then off) and
#      llama.cpp at the device's default readahead and at 128 KB, each in the same
#      cgroup v1 memory limit after dropping the page cache; peak memory of each from
#      the cgroup's memory.max_usage_in_bytes.
#   3. Skewed routing (--skew 1): deltafin with LFU and with LRU (hit rates), and
#      llama.cpp at 128 KB.
#   4. The I/O roofline of each deltafin decode: bytes the misses require per token /
#      fio bandwidth + deltafin's compute time per token (its time not blocked on
#      reads), deltafin's tokens/s as % of it, bytes read over bytes required. Reads
#      overlap compute, so a run can beat this serial roofline; the overlap bound
#      1 / max(I/O time, compute time) is printed beside it.
# With --sweep "CAP CAP ...": instead, decode tokens/s of deltafin and llama.cpp (128 KB
# readahead) at each cap on the uniform model -> sweep.csv and sweep.png in --out.
# The readahead is restored on exit, also on failure. Needs root and cgroup v1.
#
# usage: bench/stream_vs_llama.sh [--cap 1536M] [--experts 512] [-p 32] [-n 16]
#          [--llama-n N (default: -n)] [-r 2] [-t 2] [--models DIR] [--out DIR] [--skip-llama-default]
#          [--sweep "256M 1G 4G"]
# Results: a table on stdout, JSON lines and logs in --out (default build/stream-bench).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DELTAFIN:-$here/build/deltafin}
cap=1536M experts=512 np=32 ng=16 lng="" reps=2 threads=2
mdir=$here/build/bench-models out=$here/build/stream-bench skip_default=0 sweep=""
while [ $# -gt 0 ]; do
  case $1 in
    --cap) cap=$2; shift 2 ;;
    --experts) experts=$2; shift 2 ;;
    -p) np=$2; shift 2 ;;
    -n) ng=$2; shift 2 ;;
    --llama-n) lng=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --models) mdir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-llama-default) skip_default=1; shift ;;
    --sweep) sweep=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
lng=${lng:-$ng}  # llama.cpp decodes as many tokens as deltafin unless told otherwise
cg_root=/sys/fs/cgroup/memory
[ "$(id -u)" = 0 ] || { echo "needs root (cgroup, drop_caches, readahead)" >&2; exit 77; }
[ -w $cg_root ] || { echo "needs cgroup v1 memory at $cg_root" >&2; exit 77; }
command -v fio >/dev/null || { echo "needs fio (scripts/setup)" >&2; exit 77; }
cap_bytes=$(numfmt --from=iec "$cap")
mkdir -p "$mdir" "$out"
res=$out/results.jsonl
: >"$res"

# --- models ---
model() { # skew -> path (synthesised once)
  local m=$mdir/kimi-k2-mini-e$experts-skew$1.gguf
  if [ ! -f "$m" ]; then
    local sk=(); [ "$1" = 0 ] || sk=(--skew "$1")
    nice -n 10 "$bin" synth --preset kimi-k2-mini --type Q8_0 --mla joined --experts "$experts" "${sk[@]}" \
      --force -o "$m.tmp" >&2 && mv "$m.tmp" "$m"
  fi
  echo "$m"
}
mu=$(model 0)
ms=$(model 1)
size=$(stat -c %s "$mu")
echo "model: kimi-k2-mini, $experts experts/layer, $(numfmt --to=iec "$size") (Q8_0); cap $cap = $(python3 -c "print(f'{$size/$cap_bytes:.1f}')")x smaller"

# --- the device's readahead, restored on exit ---
dev=$(basename "$(df --output=source "$mu" | tail -1)")
ra_file=/sys/class/block/$dev/queue/read_ahead_kb
[ -f "$ra_file" ] || ra_file=/sys/class/block/$(basename "$(dirname "$(readlink -f /sys/class/block/$dev)")")/queue/read_ahead_kb
ra_orig=$(cat "$ra_file")
cg=$cg_root/deltafin-stream-$$
restore() {
  echo "$ra_orig" >"$ra_file" || true
  [ -d "$cg" ] && { cat "$cg/tasks" 2>/dev/null | xargs -r -n1 kill 2>/dev/null || true; rmdir "$cg" 2>/dev/null || true; }
}
trap restore EXIT INT TERM
echo "device $dev, readahead $ra_orig KB ($ra_file)"

# --- 1. fio ---
fio --name=randread --filename="$mu" --readonly --direct=1 --rw=randread --bsrange=1M-16M --ioengine=libaio \
  --iodepth=16 --runtime=10 --time_based --output-format=json >"$out/fio.json" 2>"$out/fio.err"
bw=$(python3 -c "import json; print(json.load(open('$out/fio.json'))['jobs'][0]['read']['bw_bytes'])")
echo "fio: random 1-16 MiB O_DIRECT reads, 16 in flight: $(python3 -c "print(f'{$bw/1e9:.2f}')") GB/s"

# --- runs in the cgroup ---
mkdir "$cg"
echo "$cap_bytes" >"$cg/memory.limit_in_bytes"
# label, command... : drops the page cache, runs the command inside the cgroup, and
# appends its JSON lines (tagged with label and peak memory) to $res.
run_capped() {
  local label=$1; shift
  sync; echo 3 >/proc/sys/vm/drop_caches
  echo 0 >"$cg/memory.max_usage_in_bytes"
  echo 0 >"$cg/memory.failcnt"
  local rc=0
  bash -c 'echo $$ >"$1/tasks"; shift; exec "$@"' _ "$cg" "$@" >"$out/$label.out" 2>"$out/$label.err" || rc=$?
  local peak; peak=$(cat "$cg/memory.max_usage_in_bytes")
  local oom; oom=$(cat "$cg/memory.failcnt")
  python3 - "$out/$label.out" "$label" "$peak" "$rc" "$oom" >>"$res" <<'PY'
import json, sys
path, label, peak, rc, hits = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
n = 0
for l in open(path):
    l = l.strip()
    if not l.startswith("{"): continue
    o = json.loads(l); o["label"] = label; o["peak_cgroup"] = peak; o["rc"] = rc; o["limit_hits"] = hits
    print(json.dumps(o)); n += 1
if n == 0: print(json.dumps({"label": label, "rc": rc, "peak_cgroup": peak, "failed": True}))
PY
  echo "  $label: exit $rc, peak $(numfmt --to=iec "$peak") (cgroup), limit hits $oom" >&2
}
df_bench() { # label model extra-args...
  local label=$1 m=$2; shift 2
  run_capped "$label" "$bin" bench -m "$m" -p "$np" -n "$ng" -r "$reps" -t "$threads" --mem "$cap" \
    --profile none --json "$@"
}
ll_bench() { # label model readahead_kb
  echo "$3" >"$ra_file"
  run_capped "$1" node "$here/bench/llama_bench.mjs" --model "$2" -p "$np" -n "$lng" -r 1 -t "$threads"
  echo "$ra_orig" >"$ra_file"
}
export DELTAFIN_ORACLE_DIR=${DELTAFIN_ORACLE_DIR:-$here/build/oracle}

if [ -n "$sweep" ]; then
  np=0
  for cap in $sweep; do
    cap_bytes=$(numfmt --from=iec "$cap")
    echo "$cap_bytes" >"$cg/memory.limit_in_bytes"
    echo "cap $cap:" >&2
    df_bench "sweep-df-$cap" "$mu"
    ll_bench "sweep-llama-$cap" "$mu" 128
  done
  # matplotlib: the first python3 that has it (Debian's, where a pyenv one is first on PATH)
  py=python3
  python3 -c "import matplotlib" 2>/dev/null || py=/usr/bin/python3
  "$py" "$here/bench/plot_stream_sweep.py" "$res" "$out" "$(basename "$mu")"
  exit 0
fi

echo "uniform routing:" >&2
df_bench df-uniform "$mu"
df_bench df-uniform-noprefetch "$mu" --prefetch off
ll_bench llama-uniform-ra128 "$mu" 128
[ "$skip_default" = 1 ] || ll_bench llama-uniform-ra$ra_orig "$mu" "$ra_orig"
echo "skewed routing:" >&2
df_bench df-skew-lfu "$ms"
df_bench df-skew-lru "$ms" --cache-policy lru
ll_bench llama-skew-ra128 "$ms" 128

# --- report ---
python3 - "$res" "$bw" "$cap_bytes" "$ra_orig" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bw, cap, ra = float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
get = lambda label, test: next((r for r in rows if r.get("label") == label and r.get("test") == test), None)
tps = lambda r: r["tokens_per_second"] if r else None
f = lambda v, spec=".2f": "-" if v is None else format(v, spec)
print(f"\n{'run':<28} {'test':<4} {'tok/s':>8} {'hit %':>6} {'MB/tok read':>11} {'MB/tok need':>11} {'read/need':>9} "
      f"{'roofline':>9} {'% roof':>7} {'overlap':>8} {'peak MB':>8} {'RSS MB':>7} {'at limit':>8}")
for r in rows:
    if r.get("failed"):
        print(f"{r['label']:<28} FAILED (exit {r['rc']}), see its .err"); continue
    roof = pct = ratio = need = bound = None
    if r["label"].startswith("df-") and r["test"] == "tg":
        tok = r["n"] * r["reps"]
        need = r["bytes_needed_per_token"]
        compute = max(r["seconds"] - r["io_wait_s"], 0) / tok
        roof = 1.0 / (need / bw + compute)
        bound = 1.0 / max(need / bw, compute)
        pct = 100 * r["tokens_per_second"] / roof
        ratio = r["bytes_per_token"] / need if need else None
    elif r["label"].startswith("df-"):
        need = r["bytes_needed_per_token"]
        ratio = r["bytes_per_token"] / need if need else None
    hit = 100 * r["hit_rate"] if "hit_rate" in r else None
    print(f"{r['label']:<28} {r['test']:<4} {f(tps(r))} {f(hit, '.1f'):>6} "
          f"{f(r.get('bytes_per_token', 0) / 1e6 if 'bytes_per_token' in r else None, '.1f'):>11} "
          f"{f(need / 1e6 if need else None, '.1f'):>11} {f(ratio):>9} {f(roof):>9} {f(pct, '.0f'):>7} {f(bound):>8} "
          f"{r['peak_cgroup'] / 2**20:8.0f} {f(r['peak_rss'] / 2**20 if 'peak_rss' in r else None, '.0f'):>7} "
          f"{r['limit_hits']:>8}")
def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"
print(f"\ncap {cap / 2**20:.0f} MiB; disk {bw / 1e9:.2f} GB/s (fio)")
for test in ("tg", "pp"):
    d, l128, ldef = tps(get("df-uniform", test)), tps(get("llama-uniform-ra128", test)), tps(get(f"llama-uniform-ra{ra}", test))
    print(f"uniform {test}: deltafin {f(d)} t/s; vs llama.cpp at 128 KB readahead {ratio(d, l128)}, "
          f"at {ra} KB {ratio(d, ldef)}")
    d, l128 = tps(get("df-skew-lfu", test)), tps(get("llama-skew-ra128", test))
    print(f"skewed  {test}: deltafin {f(d)} t/s; vs llama.cpp at 128 KB readahead {ratio(d, l128)}")
lfu, lru = get("df-skew-lfu", "tg"), get("df-skew-lru", "tg")
if lfu and lru:
    print(f"skewed decode hit rate: LFU {100 * lfu['hit_rate']:.1f}% vs LRU {100 * lru['hit_rate']:.1f}%")
for lab in ("df-uniform", "df-skew-lfu"):
    r = get(lab, "tg")
    if r and r.get("prefetch", {}).get("layers"):
        p = r["prefetch"]
        print(f"{lab} prefetch ({p['mode']}): recall {100 * p['recall']:.1f}%, useful {100 * p['useful']:.1f}%, "
              f"prefetched bytes used {100 * p['prefetched_bytes_used']:.1f}%, layers on "
              f"{sum(1 for l in p['layers'] if l['on'])}/{len(p['layers'])}")
# The cgroup cannot go over its limit; what tells is whether a run pressed against
# it (limit hits: reclaim of its page cache) and deltafin's own peak RSS vs --mem.
over = sorted({r["label"] for r in rows if r.get("peak_rss", 0) > cap})
pressed = sorted({r["label"] for r in rows if r.get("limit_hits", 0) > 0})
print("deltafin peak RSS within --mem: " + ("yes" if not over else "NO: " + ", ".join(over)))
print("runs that hit the cgroup limit (reclaim): " + (", ".join(pressed) if pressed else "none"))
PY
