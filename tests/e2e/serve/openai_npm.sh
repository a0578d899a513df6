# The official `openai` npm client for the serve_*.sh tests: the pinned version,
# installed into the build directory on first use; the test is skipped (77) when npm
# or the registry is unavailable. Sets npmdir. Set before sourcing: build.
OPENAI_VERSION=4.95.0
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: needs node and npm"; exit 77; }
npmdir=$build/npm-openai-$OPENAI_VERSION
if [ ! -d "$npmdir/node_modules/openai" ]; then
  mkdir -p "$npmdir"
  timeout 120 npm install --prefix "$npmdir" --no-audit --no-fund --silent "openai@$OPENAI_VERSION" >"$npmdir/install.log" 2>&1 ||
    { echo "skip: cannot install openai@$OPENAI_VERSION from npm: $(tail -3 "$npmdir/install.log")"; exit 77; }
fi
