#!/usr/bin/env bash
# Runs a command under a cgroup v1 memory limit after dropping the page cache, as a
# machine with that much RAM would run it, and prints the cgroup's peak usage and
# how often it hit the limit (reclaim) to stderr. Needs root and cgroup v1.
# usage: bench/in_cgroup.sh CAP -- COMMAND [ARGS...]     e.g. bench/in_cgroup.sh 700M -- build/deltafin bench ...
set -u
cap=${1:?usage: in_cgroup.sh CAP -- COMMAND...}; shift
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: in_cgroup.sh CAP -- COMMAND..." >&2; exit 2; }
root=/sys/fs/cgroup/memory
[ -w $root ] || { echo "needs root and cgroup v1 memory at $root" >&2; exit 77; }
cg=$root/deltafin-bench-$$
mkdir "$cg" || exit 1
trap 'rmdir "$cg" 2>/dev/null' EXIT
echo "$cap" >"$cg/memory.limit_in_bytes" || exit 1
sync; echo 3 >/proc/sys/vm/drop_caches
bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$cg" "$@"
rc=$?
echo "cgroup $cap: peak $(numfmt --to=iec "$(cat "$cg/memory.max_usage_in_bytes")"), limit hits $(cat "$cg/memory.failcnt")" >&2
exit $rc
