#!/usr/bin/env bash
# What web pages and token-counting clients need of deltafin serve: CORS for the
# origins given with --cors (a browser's preflight answered without the key, other
# origins refused), and /tokenize and /detokenize in llama.cpp's server's shapes,
# checked against the ids the completion endpoint evaluates.
# usage: serve_web.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3; name=serve-web
command -v curl >/dev/null && command -v python3 >/dev/null || { echo "skip: needs curl and python3"; exit 77; }
source "$src/tests/e2e/serve/common.sh"
ui=http://ui.example:3000
start_server --api-key sekrit --parallel 2 -c 1024 --cors "$ui"

auth=(-H "Authorization: Bearer sekrit")
# req METHOD PATH [curl args...]: body to $dir/body, headers to $dir/head, prints the status.
req() {
  local m=$1 p=$2; shift 2
  curl -s -o "$dir/body" -D "$dir/head" -w '%{http_code}' -X "$m" "$base$p" -H 'Content-Type: application/json' "$@"
}
py() { python3 -c "import json,sys; j=json.load(open('$dir/body')); sys.exit(0 if ($1) else 1)"; }
header() { grep -i "^$1:" "$dir/head" | cut -d' ' -f2- | tr -d '\r'; }

# --- /tokenize and /detokenize -------------------------------------------------------
text='Hello world, said the <|im_start|> marker'
check "tokenize without the key: 401" test "$(req POST /tokenize -d '{"content":"x"}')" = 401
check "tokenize: 200" test "$(req POST /tokenize "${auth[@]}" -d "{\"content\":\"$text\"}")" = 200
ids=$(python3 -c "import json; print(json.dumps(json.load(open('$dir/body'))['tokens']))")
check "  a list of ids" py "len(j['tokens']) > 5 and all(isinstance(t, int) for t in j['tokens'])"
check "  the marker is one token (parse_special by default)" py "151644 in j['tokens']"
req POST /tokenize "${auth[@]}" -d "{\"content\":\"$text\",\"parse_special\":false}" >/dev/null
check "parse_special false: the marker spelled in pieces" py "151644 not in j['tokens'] and len(j['tokens']) > len($ids)"
check "with_pieces: 200" test "$(req POST /tokenize "${auth[@]}" -d "{\"content\":\"$text\",\"with_pieces\":true}")" = 200
check "  the pieces join into the text, the ids as before" \
  py "''.join(t['piece'] for t in j['tokens']) == '$text' and [t['id'] for t in j['tokens']] == $ids"
# A rare character (U+9F98) is several byte-level tokens, each part of it.
check "with_pieces on a rare character: 200" \
  test "$(req POST /tokenize "${auth[@]}" -d '{"content":"\u9f98","with_pieces":true}')" = 200
check "  its pieces are byte lists that join into it" \
  py "all(isinstance(t['piece'], list) for t in j['tokens']) and bytes(b for t in j['tokens'] for b in t['piece']) == '\u9f98'.encode()"
check "detokenize: 200" test "$(req POST /detokenize "${auth[@]}" -d "{\"tokens\":$ids}")" = 200
check "  gives the text back" py "j == {'content': '$text'}"
# The ids a completion evaluates: /tokenize with add_special, as echo shows them.
req POST /tokenize "${auth[@]}" -d '{"content":"Once upon a time","add_special":true}' >/dev/null
n_tok=$(python3 -c "import json; print(len(json.load(open('$dir/body'))['tokens']))")
check "completion of the same text: 200" test "$(req POST /v1/completions "${auth[@]}" -d '{"prompt":"Once upon a time","max_tokens":1}')" = 200
check "  evaluates as many tokens as /tokenize counts ($n_tok)" py "j['usage']['prompt_tokens'] == $n_tok"
check "tokenize without content: 400" test "$(req POST /tokenize "${auth[@]}" -d '{"text":"x"}')" = 400
check "  names content" py "j['error']['param'] == 'content'"
check "tokenize with_pieces not a boolean: 400" test "$(req POST /tokenize "${auth[@]}" -d '{"content":"x","with_pieces":1}')" = 400
check "detokenize an id out of range: 400" test "$(req POST /detokenize "${auth[@]}" -d '{"tokens":[1,999999]}')" = 400
check "  names tokens and the id" py "j['error']['param'] == 'tokens' and '999999' in j['error']['message']"
check "detokenize not a list: 400" test "$(req POST /detokenize "${auth[@]}" -d '{"tokens":"1 2"}')" = 400

# --- CORS --------------------------------------------------------------------------
check "preflight from the allowed origin, without the key: 204" test "$(req OPTIONS /v1/chat/completions \
  -H "Origin: $ui" -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: authorization,content-type')" = 204
check "  allows the origin" test "$(header Access-Control-Allow-Origin)" = "$ui"
check "  allows POST" bash -c "grep -qi '^Access-Control-Allow-Methods:.*POST' '$dir/head'"
check "  allows the headers asked for" test "$(header Access-Control-Allow-Headers)" = "authorization,content-type"
check "preflight from another origin: 403" test "$(req OPTIONS /v1/chat/completions -H 'Origin: http://evil.example')" = 403
check "  without Access-Control-Allow-Origin" test -z "$(header Access-Control-Allow-Origin)"
check "  says how to allow it" py "'--cors' in j['error']['message'] and 'http://evil.example' in j['error']['message']"
check "the page's request: 200" test "$(req POST /v1/chat/completions "${auth[@]}" -H "Origin: $ui" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3}')" = 200
check "  carries Access-Control-Allow-Origin" test "$(header Access-Control-Allow-Origin)" = "$ui"
check "  and Vary: Origin" test "$(header Vary)" = Origin
curl -s -N -D "$dir/shead" -o "$dir/stream" "$base/v1/chat/completions" "${auth[@]}" -H "Origin: $ui" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true}'
check "a streamed reply carries it too" grep -qi "^Access-Control-Allow-Origin: $ui" "$dir/shead"
check "  and is whole" grep -q 'data: \[DONE\]' "$dir/stream"
check "the page's request without the key: 401, readable by the page" \
  test "$(req POST /v1/chat/completions -H "Origin: $ui" -d '{"messages":[{"role":"user","content":"Hi"}]}')" = 401
check "  (Access-Control-Allow-Origin on the error)" test "$(header Access-Control-Allow-Origin)" = "$ui"
check "another origin's request: no Access-Control-Allow-Origin" \
  test "$(req GET /v1/models "${auth[@]}" -H 'Origin: http://evil.example')" = 200
check "  (header absent)" test -z "$(header Access-Control-Allow-Origin)"
check "a request without Origin: no CORS headers" test "$(req GET /v1/models "${auth[@]}")" = 200
check "  (header absent)" test -z "$(header Access-Control-Allow-Origin)"
stop_server

# --cors '*': any origin.
start_server --parallel 1 -c 512 --cors '*'
check "--cors '*': a preflight from anywhere: 204" test "$(req OPTIONS /v1/completions -H 'Origin: http://a.example')" = 204
check "  allows that origin" test "$(header Access-Control-Allow-Origin)" = http://a.example
stop_server
exit $fail
