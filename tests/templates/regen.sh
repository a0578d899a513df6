#!/usr/bin/env bash
# Regenerate the chat-template goldens in tests/templates/expected/ with the
# Hugging Face JS reference renderer: every template x conversation case, and
# the construct snippets of snippets.json (-> expected/snippets.json).
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
