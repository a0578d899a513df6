# Official API clients from npm for the serve_*.sh tests: `npm_client PACKAGE VERSION`
# installs the pinned version into the build directory on first use and sets
# NODE_PATH to it; the test is skipped (77) when npm or the registry is unavailable.
# Set before sourcing: build.
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: needs node and npm"; exit 77; }
npm_client() {
  local pkg=$1 version=$2 dir
  dir=$build/npm-$(echo "$pkg" | tr -d '@' | tr '/' '-')-$version
  if [ ! -d "$dir/node_modules/$pkg" ]; then
    mkdir -p "$dir"
    timeout 120 npm install --prefix "$dir" --no-audit --no-fund --silent "$pkg@$version" >"$dir/install.log" 2>&1 ||
      { echo "skip: cannot install $pkg@$version from npm: $(tail -3 "$dir/install.log")"; exit 77; }
  fi
  export NODE_PATH=$dir/node_modules${NODE_PATH:+:$NODE_PATH}
}
