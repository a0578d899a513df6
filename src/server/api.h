// The OpenAI-compatible request and response bodies: validating a request's JSON
// into what the scheduler needs, and building the responses, stream chunks and
// error objects. No HTTP and no model here (pure functions, unit-testable).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json/json_grammar.h"
#include "runtime/sampler.h"

namespace deltafin::server {

using json = nlohmann::ordered_json;

// An error to send: HTTP status and the OpenAI error object
// {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
  json body() const;
};

// What both endpoints share after validation.
struct GenParams {
  std::optional<int> max_tokens;  // absent: until end of generation / context full
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // extension: keep generating past end-of-text
  std::string model;           // as given ("" if absent)
  int n = 1;                   // choices (completions of the same prompt)
  int logprobs = -1;           // >= 0: report logprobs with this many alternatives per token
  bool echo = false;           // completions: the prompt's text (and logprobs) before the completion
  // response_format (both endpoints; for completions an extension): json_object or
  // json_schema -> the grammar the reply must follow (null: free text), and the field
  // as given for the chat template (null when absent).
  std::shared_ptr<const JsonGrammar> json_grammar;
  json response_format;
};

struct ChatRequest {
  GenParams gen;
  json messages;              // normalized: content always a string ("" for an assistant's null beside tool_calls)
  json tools;                 // null when absent
  json template_kwargs;       // chat_template_kwargs (object or null)
  // tool_choice: null (absent), "none", "auto", "required", or {"type": "function",
  // "function": {"name": ...}} naming one of the tools. Passed to the template (Kimi
  // K3's tells the model); "none" also leaves calls unparsed; "required" or a name is
  // enforced by constrained decoding in every tool-call format (forced_calls.h).
  json tool_choice;
  // parallel_tool_calls (default true); false: a reply holds one call at most (a forced
  // one is constrained to one; otherwise generation stops where a second begins).
  bool parallel_tool_calls = true;
  // reasoning_effort (a string or null), passed to the template as it is: gpt-oss's
  // and DeepSeek V4's read it (Kimi K3's thinking_effort goes in chat_template_kwargs).
  json reasoning_effort;
};

struct CompletionRequest {
  GenParams gen;
  std::string prompt;                 // text prompt, or
  std::vector<int32_t> prompt_tokens; // token ids (prompt given as an array of integers)
};

// A 400 naming `param` (empty: the body as a whole).
ApiError bad_request(const std::string& param, const std::string& message);

// Limits every request's JSON is parsed under, so that no body can exhaust a worker
// thread's stack (values nested deeper are refused before anything copies them
// recursively) or take quadratic time (an ordered object looks keys up linearly, in
// the parser as in the code that reads it: with at most 1000 keys an object's
// quadratic part stays below a millisecond, and a body's whole parse linear in its
// size).
constexpr int kMaxJsonDepth = 512;       // arrays and objects inside one another
constexpr size_t kMaxJsonKeys = 1000;    // keys in one object
// `text` as JSON within those limits; on failure the reason (not JSON, too deep, too
// many keys, a number out of range) as valid UTF-8, and *over_limit whether a limit it was.
std::optional<std::string> parse_json_bounded(std::string_view text, json* out, bool* over_limit = nullptr);
// The body as a JSON object, or the 400 that says what is wrong with it.
std::optional<ApiError> parse_json_body(const std::string& body, json* out);

// What a request that sets no sampling field gets: the OpenAI APIs' defaults
// (temperature 1, top_p 1, no top_k or min_p).
SamplingParams api_default_sampling();

// Parse + validate. `n_vocab` bounds token ids in logit_bias / prompt arrays; `base`
// gives the sampling fields the request leaves out (the server's: the APIs' defaults
// with the model's recommended ones over them). On error returns the ApiError to send
// (400 with the offending param).
std::optional<ApiError> parse_chat_request(const std::string& body, int64_t n_vocab, ChatRequest* out,
                                           const SamplingParams& base = api_default_sampling());
std::optional<ApiError> parse_completion_request(const std::string& body, int64_t n_vocab, CompletionRequest* out,
                                                 const SamplingParams& base = api_default_sampling());

// /tokenize (as llama.cpp's server has it): {"content": text, "add_special": false,
// "parse_special": true, "with_pieces": false}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;   // the model's BOS (and EOS) where it adds them
  bool parse_special = true;  // special-token text becomes those tokens
  bool with_pieces = false;
};
std::optional<ApiError> parse_tokenize_request(const std::string& body, TokenizeRequest* out);
// /detokenize: {"tokens": [id, ...]}, each id in 0..n_vocab-1.
std::optional<ApiError> parse_detokenize_request(const std::string& body, int64_t n_vocab, std::vector<int32_t>* out);

// Response ids ("chatcmpl-...", "cmpl-...") unique within the process.
std::string make_id(const char* prefix);

// n_cached: prompt tokens the prompt cache spared (OpenAI's prompt_tokens_details.cached_tokens).
json usage_json(int n_prompt, int n_generated, int n_cached);

// A token id's text (bytes as the detokenizer gives them).
using PieceFn = std::function<std::string(int32_t)>;
// /tokenize's answer: {"tokens": [id, ...]}, or with pieces [{"id", "piece"}], the
// piece a string where its bytes are valid UTF-8, else the list of its bytes.
json tokenize_json(const std::vector<int32_t>& ids, bool with_pieces, const PieceFn& piece);

// A choice's "logprobs" for these tokens: chat {"content": [{token, logprob, bytes,
// top_logprobs}], "refusal": null}; completions {tokens, token_logprobs, top_logprobs
// (token -> logprob), text_offset (bytes into the text)}; a NaN logprob (a prompt's
// first token: nothing predicts it) is null, and so are its top_logprobs. A token's text is
// its bytes as UTF-8, U+FFFD for bytes that are only part of a character ("bytes"
// has them exactly).
json chat_logprobs_json(const std::vector<TokenLogprob>& lps, const PieceFn& piece);
json completion_logprobs_json(const std::vector<TokenLogprob>& lps, const PieceFn& piece);

// finish_reason as OpenAI spells it ("stop", "length"; cancelled/error -> "stop").
std::string openai_finish_reason(const std::string& reason);

}  // namespace deltafin::server
