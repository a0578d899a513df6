#include "chat_input.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace deltafin::tools {

InputStatus LineInput::read_line(std::string* line) {
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      *line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      return InputStatus::Ok;
    }
    if (eof_) {
      if (buf_.empty()) return InputStatus::Eof;
      *line = std::move(buf_);
      buf_.clear();
      return InputStatus::Ok;
    }
    if (interrupted_ && interrupted_->load()) {
      buf_.clear();  // the terminal discards the unfinished line on ^C as well
      return InputStatus::Interrupted;
    }
    // poll() returns EINTR on a signal even under SA_RESTART (which keeps writes
    // to the terminal from failing on ^C); the flag check above then decides.
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, -1) < 0) {
      if (errno == EINTR) continue;
      eof_ = true;
      continue;
    }
    char chunk[4096];
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof_ = true;
      continue;
    }
    buf_.append(chunk, size_t(n));
  }
}

namespace {
bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
}  // namespace

InputStatus read_message(LineInput& in, const std::function<void(bool first)>& prompt, std::string* message) {
  message->clear();
  std::string line;
  prompt(true);
  InputStatus s = in.read_line(&line);
  if (s != InputStatus::Ok) return s;

  if (starts_with(line, "\"\"\"")) {  // """ block: up to a line ending in """
    std::string rest = line.substr(3);
    if (rest.size() >= 3 && ends_with(rest, "\"\"\"")) {
      *message = rest.substr(0, rest.size() - 3);
      return InputStatus::Ok;
    }
    // The text after the opening """ and before the closing one counts only if
    // not empty, so that """ on lines of their own enclose exactly the lines between.
    std::vector<std::string> lines;
    if (!rest.empty()) lines.push_back(rest);
    for (;;) {
      prompt(false);
      s = in.read_line(&line);
      if (s == InputStatus::Interrupted) return s;
      if (s == InputStatus::Eof) break;
      const bool last = ends_with(line, "\"\"\"");
      if (last) line.resize(line.size() - 3);
      if (!(last && line.empty())) lines.push_back(line);
      if (last) break;
    }
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) text += (i ? "\n" : "") + lines[i];
    *message = std::move(text);
    return InputStatus::Ok;
  }

  std::string text;
  while (!line.empty() && line.back() == '\\') {  // continuation
    line.pop_back();
    text += line;
    text += '\n';
    prompt(false);
    s = in.read_line(&line);
    if (s == InputStatus::Interrupted) return s;
    if (s == InputStatus::Eof) {
      line.clear();
      break;
    }
  }
  text += line;
  *message = std::move(text);
  return InputStatus::Ok;
}

}  // namespace deltafin::tools
