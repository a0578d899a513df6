#!/usr/bin/env bash
# The operating-system calls that differ between Linux and macOS appear only in
# src/core/platform_*.cpp (core/platform.h), and the environment is read only by
# tools/environment.cpp: a grep of the C++ sources, comments and string literals left out.
# usage: platform_calls.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
src=$2
cd "$src" || exit 1
# Identifiers as code uses them, and the files Linux alone has (in string literals).
paths='"/proc/|"/sys/'
os='\bO_DIRECT\b|posix_fadvise|POSIX_FADV_|F_NOCACHE|F_RDAHEAD|\bsysconf\(|getauxval|HWCAP_|sysctl|host_statistics|\bmadvise\(|MAP_POPULATE|fallocate\(|\bstatfs\(|\bpipe2\(|\baccept4\(|SOCK_CLOEXEC|\bepoll_|\bsendfile\(|MSG_NOSIGNAL|SO_NOSIGPIPE|\bst_[mca]tim(espec)?\b|fdatasync|F_FULLFSYNC|ru_maxrss|mallinfo|malloc_zone'
fail=0
# Drops // comments and "..." literals (the words O_DIRECT and /proc/ appear in messages).
strip() { sed -E -e 's://.*$::' -e 's/"([^"\\]|\\.)*"/""/g' "$1"; }
while IFS= read -r f; do
  case "$f" in src/core/platform_*.cpp | tests/unit/test_platform.cpp | tests/unit/test_state_memory.cpp) continue ;; esac
  hits=$( (strip "$f" | grep -nE "$os"; sed -e 's://.*$::' "$f" | grep -nE "$paths") | sort -n)
  if [ -n "$hits" ]; then echo "FAIL $f calls the OS outside core/platform.h:"; echo "$hits" | sed 's/^/    /'; fail=1; fi
  if [ "$f" != tools/environment.cpp ] && strip "$f" | grep -qE '\b(std::)?(secure_)?getenv\('; then
    echo "FAIL $f reads the environment (only tools/environment.cpp does)"; fail=1
  fi
done < <(find src tools tests/unit -name '*.cpp' -o -name '*.h' | sort)
[ "$fail" = 0 ] && echo "ok   every OS-specific call is in src/core/platform_*.cpp"
exit $fail
