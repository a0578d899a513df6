#include "server/openai_writer.h"

#include <algorithm>

#include "server/metrics.h"
#include "server/replies.h"

namespace deltafin::server {

namespace {

std::string sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

std::string trim_space(const std::string& s) {
  const size_t a = s.find_first_not_of(" \n\t\r");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \n\t\r") - a + 1);
}

json server_error(const std::string& message) {
  ApiError e;
  e.status = 500;
  e.message = message;
  e.type = "server_error";
  return e.body();
}

// OpenAI's tool_calls: [{id, type, function: {name, arguments}}].
json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls)
    out.push_back(json{{"id", make_id("call")},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

// The same as a stream's deltas: a call's first (with its name) carries its id and
// type, the others add to its arguments; deltas of one call in a row are joined.
json tool_call_deltas_json(const std::vector<ToolCallDelta>& deltas) {
  json out = json::array();
  for (size_t i = 0; i < deltas.size(); ++i) {
    const ToolCallDelta& d = deltas[i];
    std::string args = d.arguments;
    while (i + 1 < deltas.size() && deltas[i + 1].index == d.index && deltas[i + 1].name.empty())
      args += deltas[++i].arguments;
    json c{{"index", int(d.index)}};
    if (!d.name.empty()) {
      c["id"] = make_id("call");
      c["type"] = "function";
      c["function"] = json{{"name", d.name}, {"arguments", args}};
    } else {
      c["function"] = json{{"arguments", args}};
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

OpenAIWriter::OpenAIWriter(std::string id, std::string model, int64_t created, size_t n_choices, Options o,
                           PieceFn piece, Metrics* m)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      n_choices_(n_choices),
      o_(o),
      piece_(std::move(piece)),
      metrics_(m) {}

json OpenAIWriter::head(const char* object) const {
  return json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

std::string OpenAIWriter::chunk(int index, const json& delta_or_text, const json& finish, json lps) const {
  json c = head(o_.chat ? "chat.completion.chunk" : "text_completion");
  json choice{{"index", index}};
  if (o_.chat) choice["delta"] = delta_or_text;
  else choice["text"] = delta_or_text;
  choice["logprobs"] = std::move(lps);
  choice["finish_reason"] = finish;
  c["choices"] = json::array({choice});
  return sse(c);
}

json OpenAIWriter::take_lps(Replies& r, int index, size_t n) const {
  if (!o_.logprobs) return nullptr;
  Replies::Choice& c = r.choices[size_t(index)];
  n = std::min(n, c.lps.size());
  const std::vector<TokenLogprob> some(c.lps.begin(), c.lps.begin() + std::ptrdiff_t(n));
  json j = o_.chat ? chat_logprobs_json(some, piece_) : completion_logprobs_json(some, piece_);
  c.lps.erase(c.lps.begin(), c.lps.begin() + std::ptrdiff_t(n));
  return j;
}

// The choice's logprobs so far go with its first chunk of text.
std::string OpenAIWriter::text_chunks(int index, Replies& r, const ReplyPiece& t) {
  std::string out;
  if (o_.chat) {
    if (!t.reasoning.empty())
      out += chunk(index, json{{"reasoning_content", t.reasoning}}, nullptr, take_lps(r, index));
    if (!t.content.empty()) out += chunk(index, json{{"content", t.content}}, nullptr, take_lps(r, index));
    if (!t.calls.empty()) {
      Replies::Choice& c = r.choices[size_t(index)];
      for (const ToolCallDelta& d : t.calls)
        if (!d.name.empty()) c.calls.push_back(ToolCall{d.name, ""});
      out += chunk(index, json{{"tool_calls", tool_call_deltas_json(t.calls)}}, nullptr, take_lps(r, index));
    }
  } else if (!t.content.empty() || !t.reasoning.empty()) {
    out += chunk(index, t.reasoning + t.content, nullptr, take_lps(r, index));
  }
  return out;
}

std::string OpenAIWriter::start() {
  if (!o_.chat) return {};
  std::string roles;
  for (size_t i = 0; i < n_choices_; ++i) roles += chunk(int(i), json{{"role", "assistant"}, {"content", ""}}, nullptr);
  return roles;
}

std::string OpenAIWriter::update(Replies& r, int i, const GenUpdate& u) {
  Replies::Choice& c = r.choices[size_t(i)];
  if (!o_.stream) {  // the whole object at the end: collect
    c.add(c.reply.push(u.text));
    if (c.reply.full()) c.h->stop();
    if (u.done) c.add(c.reply.finish());
    return {};
  }
  std::string out;
  // echo: the prompt's text first, with its logprobs once they are in.
  if (o_.echo && !c.echoed && (!o_.logprobs || c.prompt_in || u.done)) {
    c.echoed = true;
    out += chunk(i, r.echo_text, nullptr, take_lps(r, i, c.prompt_in ? r.echo_offsets.size() : 0));
  }
  out += text_chunks(i, r, c.reply.push(u.text));
  if (c.reply.full()) c.h->stop();
  if (!u.done) return out;
  const ReplyPiece end = c.reply.finish();
  out += text_chunks(i, r, end);
  std::string finish = openai_finish_reason(u.finish_reason);
  if (o_.chat && !c.calls.empty()) {
    metrics_->count_tool_calls(c.calls.size());
    if (finish != "length") finish = "tool_calls";
  }
  if (u.finish_reason != "error")
    out += chunk(i, o_.chat ? json::object() : json(""), finish, c.lps.empty() ? json(nullptr) : take_lps(r, i));
  return out;
}

std::string OpenAIWriter::end(Replies& r, Metrics* m) {
  if (o_.stream) {
    std::string out;
    if (o_.include_usage) {
      json c = head(o_.chat ? "chat.completion.chunk" : "text_completion");
      c["choices"] = json::array();
      c["usage"] = r.usage();
      out += sse(c);
    }
    return out + "data: [DONE]\n\n";
  }
  json choices = json::array();
  for (size_t i = 0; i < r.choices.size(); ++i) {
    Replies::Choice& c = r.choices[i];
    json choice{{"index", int(i)}};
    std::string finish = openai_finish_reason(c.last.finish_reason);
    if (o_.chat) {
      json msg{{"role", "assistant"}, {"content", c.content}};
      if (!c.calls.empty()) {
        m->count_tool_calls(c.calls.size());
        const std::string before = trim_space(c.content);
        msg["content"] = before.empty() ? json(nullptr) : json(before);
        msg["tool_calls"] = tool_calls_json(c.calls);
        if (finish != "length") finish = "tool_calls";
      }
      if (!c.reasoning.empty()) msg["reasoning_content"] = c.reasoning;
      choice["message"] = msg;
    } else {
      choice["text"] = r.echo_text + c.reasoning + c.content;
    }
    choice["logprobs"] = take_lps(r, int(i));
    choice["finish_reason"] = finish;
    choices.push_back(choice);
  }
  json body = head(o_.chat ? "chat.completion" : "text_completion");
  body["choices"] = choices;
  body["usage"] = r.usage();
  whole_ = body.dump();
  return {};
}

std::string OpenAIWriter::fail(const std::string& message) {
  const json body = server_error(message);
  whole_ = body.dump();
  return o_.stream ? sse(body) + "data: [DONE]\n\n" : std::string();
}

}  // namespace deltafin::server
