#!/usr/bin/env bash
# Regenerate the chat-template goldens in tests/templates/expected/ with the
# Hugging Face JS reference renderer: every template x conversation case, and
# the construct snippets of snippets.json (-> expected/snippets.json); the few cases
# the reference cannot render for want of list methods come from Python jinja2.
#
#   tests/templates/regen.sh <dir where `npm install @huggingface/jinja` was run> [templates dir]
#
# e.g.  mkdir -p /tmp/jref && (cd /tmp/jref && npm install @huggingface/jinja)
#       tests/templates/regen.sh /tmp/jref
# Templates default to ../shared/templates beside the repository.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ref_dir="${1:?usage: regen.sh <jinja reference dir> [templates dir]}"
tmpl_dir="${2:-$here/../../../shared/templates}"
if [[ ! -f "$ref_dir/node_modules/@huggingface/jinja/package.json" ]]; then
  echo "no @huggingface/jinja under $ref_dir/node_modules" >&2
  exit 1
fi
version="$(node -p "require('$ref_dir/node_modules/@huggingface/jinja/package.json').version")"
rm -rf "$here/expected"
mkdir -p "$here/expected"
TZ=UTC LANG=C LC_ALL=C JINJA_REF_DIR="$ref_dir" \
  node "$here/render_ref.mjs" --all "$tmpl_dir" "$here/conversations.json" "$here/expected"
TZ=UTC LANG=C LC_ALL=C JINJA_REF_DIR="$ref_dir" \
  node "$here/render_ref.mjs" --snippets "$here/snippets.json" "$here/conversations.json" "$here/expected/snippets.json"
echo "@huggingface/jinja $version" > "$here/expected/REFERENCE_VERSION"
# Where the JS reference fails only for want of list methods (append/pop), which Python
# jinja2 and llama.cpp have: the goldens come from Python jinja2 (render_jinja2.py).
for t in Kimi-K2-Instruct Kimi-K2-Thinking; do
  for c in tools parallel_tools; do
    for g in gen nogen; do
      rm -f "$here/expected/$t.$c.$g.error.txt"
      TZ=UTC python3 "$here/render_jinja2.py" "$tmpl_dir/$t.jinja" "$here/conversations.json" $c $g \
        > "$here/expected/$t.$c.$g.txt"
    done
  done
done
echo "Python jinja2 $(python3 -c 'import jinja2; print(jinja2.__version__)'): Kimi-K2-Instruct, Kimi-K2-Thinking tools cases" \
  >> "$here/expected/REFERENCE_VERSION"
