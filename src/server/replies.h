// The replies of one request's choices as the scheduler produces them, and how they
// are written by an API's writer (reply_blocks.h's ReplyWriter: OpenAI's chat and text
// completions, the Responses API, Anthropic's Messages API).
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/reply_parser.h"
#include "runtime/scheduler.h"
#include "chat/tool_calls.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/reply_blocks.h"

namespace deltafin::server {

// The replies of one request (its n choices) while they are generated.
struct Replies {
  struct Choice {
    Choice(std::shared_ptr<GenHandle> handle, const ReplyFormat& f) : h(std::move(handle)), reply(f) {}
    std::shared_ptr<GenHandle> h;
    ReplyParser reply;  // the model's text -> reasoning, content, tool calls
    bool done = false;
    GenUpdate last;                // the final update, once done
    std::string reasoning, content;  // all of it (non-streaming responses)
    std::vector<ToolCall> calls;     // all of them (streaming: their names only)
    std::vector<TokenLogprob> lps;   // logprobs: all (non-streaming) or those not sent yet
    bool echoed = false;             // streaming echo: the prompt's chunk is out
    bool prompt_in = false;          // the prompt's logprobs arrived (first in lps)
    void add(const ReplyPiece& t) {
      reasoning += t.reasoning;
      content += t.content;
      add_deltas(&calls, t.calls);
    }
  };
  std::vector<std::shared_ptr<GenHandle>> hs;
  std::vector<Choice> choices;
  std::string id;
  // echo: the prompt's text (as the detokenizer gives it) and where each of its tokens
  // starts; the completion's offsets come after it.
  std::string echo_text;
  std::vector<size_t> echo_offsets;
  int64_t created = std::time(nullptr);

  Replies(std::vector<std::shared_ptr<GenHandle>> handles, const ReplyFormat& f, std::string rid)
      : hs(std::move(handles)), id(std::move(rid)) {
    for (auto& h : hs) choices.emplace_back(h, f);
  }
  void cancel() {
    for (auto& h : hs) h->cancel();
  }
  bool all_done() const {
    return std::all_of(choices.begin(), choices.end(), [](const Choice& c) { return c.done; });
  }
  // Waits up to `timeout` for news and calls f(index, choice, update) for each choice
  // that has some.
  template <class F>
  void next(std::chrono::milliseconds timeout, F&& f) {
    GenHandle::wait_any(hs, timeout);
    for (size_t i = 0; i < choices.size(); ++i) {
      Choice& c = choices[i];
      if (c.done) continue;
      GenUpdate u = c.h->wait(std::chrono::milliseconds(0));
      if (u.done) c.done = true, c.last = u;
      for (size_t k = 0; k < u.prompt_logprobs.size(); ++k) {
        c.lps.push_back(u.prompt_logprobs[k]);
        c.lps.back().offset = k < echo_offsets.size() ? echo_offsets[k] : echo_text.size();
      }
      if (!u.prompt_logprobs.empty()) c.prompt_in = true;
      for (const TokenLogprob& t : u.logprobs) {
        c.lps.push_back(t);
        c.lps.back().offset += echo_text.size();
      }
      if (!u.text.empty() || u.done || !u.prompt_logprobs.empty()) f(int(i), c, u);
    }
  }
  // The prompt counts once (OpenAI's usage for n choices); completions add up.
  json usage() const {
    int generated = 0;
    for (const Choice& c : choices) generated += c.last.n_generated;
    return usage_json(choices[0].last.n_prompt, generated, choices[0].last.n_cached);
  }
};


// A request's replies written by an API's writer: its events as they come (stream), or
// the whole body at the end (a space once a heartbeat meanwhile: how a client that left
// is noticed).
// `finished` (if set) runs once the reply has ended well (not failed or cancelled),
// before its last events are sent.
void write_reply(httplib::Response& res, std::shared_ptr<Replies> ctx, std::shared_ptr<ReplyWriter> w, bool stream,
                 std::chrono::milliseconds heartbeat, Metrics* m, std::function<void()> finished = {});

}  // namespace deltafin::server
