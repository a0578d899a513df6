#!/usr/bin/env bash
# Runs a libFuzzer binary for a bounded time from the committed corpus.
# Usage: run_fuzzer.sh FUZZER SECONDS WORKDIR CORPUS [DICT]
# New interesting inputs go to WORKDIR/corpus (kept between runs), crashes, leaks,
# timeouts and OOMs to WORKDIR/artifacts; any of those fails the test. Limits: 10 s
# per input, 1 GiB RSS, 4 KiB inputs.
set -euo pipefail
fuzzer=$1 secs=$2 work=$3 corpus=$4 dict=${5:-}
mkdir -p "$work/corpus" "$work/artifacts"
args=(-max_total_time="$secs" -rss_limit_mb=1024 -malloc_limit_mb=1024 -timeout=10 -max_len=4096
      -print_final_stats=1 -artifact_prefix="$work/artifacts/")
[ -n "$dict" ] && args+=(-dict="$dict")
if ! "$fuzzer" "${args[@]}" "$work/corpus" "$corpus"; then
  echo "fuzzer failed; inputs in $work/artifacts:" >&2
  ls -l "$work/artifacts" >&2 || true
  echo "fix the bug, then copy the input into $corpus as a regression test" >&2
  exit 1
fi
