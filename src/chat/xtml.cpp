#include "chat/xtml.h"

#include <algorithm>

namespace deltafin {

namespace {
using json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<|open|>", kClose = "<|close|>", kSep = "<|sep|>";
// A tag's name and attributes longer than this are not a tag: the marker is text.
constexpr size_t kMaxHeader = 4096;


// Attribute values escape '&' and '"' (the template's escape_attr).
std::string unescape(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v.substr(i, 6) == "&quot;") out += '"', i += 5;
    else if (v.substr(i, 5) == "&amp;") out += '&', i += 4;
    else out += v[i];
  }
  return out;
}

struct Header {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::string attr(std::string_view key) const {
    for (const auto& [k, v] : attrs)
      if (k == key) return v;
    return {};
  }
};

// `call tool="f" index="1"` -> the name and attributes.
Header parse_header(std::string_view h) {
  Header t;
  size_t at = h.find(' ');
  t.name = std::string(h.substr(0, at));
  while (at != std::string_view::npos && at < h.size()) {
    while (at < h.size() && h[at] == ' ') ++at;
    const size_t eq = h.find("=\"", at);
    if (eq == std::string_view::npos) break;
    const size_t end = h.find('"', eq + 2);
    if (end == std::string_view::npos) break;
    t.attrs.emplace_back(std::string(h.substr(at, eq - at)), unescape(h.substr(eq + 2, end - eq - 2)));
    at = end + 1;
  }
  return t;
}
}  // namespace

std::vector<std::string> xtml_open_tags(std::string_view text) {
  std::vector<std::string> st;
  size_t at = 0;
  for (;;) {
    const size_t o = text.find(kOpen, at), c = text.find(kClose, at);
    const size_t m = std::min(o, c);
    if (m == std::string_view::npos) break;
    const size_t h = m + (m == o ? kOpen.size() : kClose.size());
    const size_t sep = text.find(kSep, h);
    if (sep == std::string_view::npos) break;
    const std::string name = parse_header(text.substr(h, sep - h)).name;
    if (m == o) {
      st.push_back(name);
    } else if (auto it = std::find(st.rbegin(), st.rend(), name); it != st.rend()) {
      st.erase(std::prev(it.base()), st.end());
    }
    at = sep + kSep.size();
  }
  return st;
}

XtmlReply::XtmlReply(std::vector<std::string> open, bool reasoning) : stack_(std::move(open)), reasoning_(reasoning) {}

SplitText XtmlReply::push(const std::string& s) {
  SplitText out;
  buf_ += s;
  for (;;) {
    const bool o = buf_.starts_with(kOpen), c = !o && buf_.starts_with(kClose);
    if (o || c) {
      const size_t m = o ? kOpen.size() : kClose.size();
      const size_t sep = buf_.find(kSep, m);
      if (sep == std::string::npos && buf_.size() - m <= kMaxHeader) break;  // the rest of the tag is to come
      if (sep == std::string::npos || sep - m > kMaxHeader) {  // not a tag: the marker is text
        text(std::string_view(buf_).substr(0, m), &out);
        buf_.erase(0, m);
        continue;
      }
      const std::string raw = buf_.substr(0, sep + kSep.size());
      gap_.clear();
      Header h = parse_header(std::string_view(buf_).substr(m, sep - m));
      buf_.erase(0, raw.size());
      if (o) {
        stack_.push_back(h.name);
        if (h.name == "call") {
          in_call_ = true;
          call_raw_.clear();
          const std::string name = h.attr("tool");
          named_ = !name.empty();
          n_args_ = 0;
          json_streaming_ = json_done_ = false;
          if (named_) deltas_.push_back(ToolCallDelta{n_calls_++, name, ""});
        } else if (h.name == "argument") {
          arg_key_ = h.attr("key");
          arg_type_ = h.attr("type");
          value_.clear();
        } else if (h.name == "json") {
          value_.clear();
          // The first part of a call: its text is the arguments, sent as it comes.
          json_streaming_ = in_call_ && named_ && n_args_ == 0 && !json_done_;
          if (json_streaming_) json_args_ = RawArguments();
        }
      } else if (auto it = std::find(stack_.rbegin(), stack_.rend(), h.name); it != stack_.rend()) {
        const size_t keep = size_t(stack_.rend() - it) - 1;
        while (stack_.size() > keep) pop();
      }
      if (in_call_) call_raw_ += raw;
      continue;
    }
    const size_t next = std::min(buf_.find(kOpen), buf_.find(kClose));
    if (next != std::string::npos) {
      text(std::string_view(buf_).substr(0, next), &out);
      buf_.erase(0, next);
      continue;
    }
    // Hold back a tail that could be the start of a marker.
    const size_t keep = std::max(partial_tag(buf_, kOpen), partial_tag(buf_, kClose));
    text(std::string_view(buf_).substr(0, buf_.size() - keep), &out);
    buf_.erase(0, buf_.size() - keep);
    break;
  }
  return out;
}

SplitText XtmlReply::finish() {
  SplitText out;
  std::string rest;
  rest.swap(buf_);
  text(rest, &out);
  out.content += unnamed_;
  unnamed_.clear();
  if (in_call_ && !named_) out.content += call_raw_;
  if (in_call_ && named_) {  // cut short: the call keeps what was read
    if (json_streaming_) add_args(json_args_.finish()), json_done_ = true;
    if (!json_done_) add_args(n_args_ ? "}" : "{}");
  }
  in_call_ = false;
  return out;
}

void XtmlReply::text(std::string_view s, SplitText* out) {
  if (s.empty()) return;
  if (in_call_) call_raw_ += s;
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
    const std::string& n = *it;
    if (n == "argument" || n == "json") {
      if (in_call_) {
        if (json_streaming_ && n == "json") add_args(json_args_.push(s));
        else value_ += s;
        return;
      }
      break;
    }
    if (n == "think") {
      (reasoning_ ? out->reasoning : out->content) += s;
      return;
    }
    if (n == "response") break;
    if (n == "call" || n == "tools" || n == "message") {
      // Between the parts whitespace is dropped: held, until text follows it before the
      // next tag. (Whatever the pieces: trailing whitespace of a run is held too.)
      const size_t body = s.find_last_not_of(" \n\t\r") + 1;  // 0 when blank
      if (body > 0) {
        out->content += gap_;
        out->content += s.substr(0, body);
        gap_.clear();
      }
      gap_ += s.substr(body);
      return;
    }
  }
  out->content += gap_;
  gap_.clear();
  out->content += s;
}

void XtmlReply::add_args(std::string a) {
  if (!a.empty()) deltas_.push_back(ToolCallDelta{n_calls_ - 1, "", std::move(a)});
}

// Leaves the innermost tag, finishing what it held.
void XtmlReply::pop() {
  const std::string n = stack_.back();
  stack_.pop_back();
  if (!in_call_) return;
  auto add_arg = [&](const std::string& key, const json& v) {
    add_args((n_args_++ ? "," : "{") + json(key).dump() + ":" + v.dump());
  };
  if (n == "argument" && named_ && !json_done_) {
    json v = json(value_);
    if (!arg_type_.empty() && arg_type_ != "string") {
      json parsed = json::parse(value_, nullptr, false);
      if (!parsed.is_discarded()) v = std::move(parsed);
    }
    add_arg(arg_key_, v);
  } else if (n == "json" && json_streaming_) {
    add_args(json_args_.finish());
    json_streaming_ = false;
    json_done_ = true;
  } else if (n == "json" && named_ && !json_done_) {  // after arguments: its members join them
    json v = json::parse(value_, nullptr, false);
    if (v.is_object()) {
      for (auto& [k, x] : v.items()) add_arg(k, x);
    } else {
      add_arg("value", json(value_));  // not an object: kept as text
    }
  } else if (n == "call") {
    in_call_ = false;
    if (!named_) {  // not a call anyone can answer: content, as written
      unnamed_ += call_raw_ + "<|close|>call<|sep|>";
      return;
    }
    if (!json_done_) add_args(n_args_ ? "}" : "{}");
  }
}

}  // namespace deltafin
