// Waiting on the scheduler's generation handles in tests.
#pragma once
#include <string>

#include "runtime/scheduler.h"

namespace deltafin {

// Until the request ends: its text appended to *text; the final update.
inline GenUpdate wait_done(GenHandle& h, std::string* text) {
  GenUpdate u;
  do {
    u = h.wait(std::chrono::milliseconds(100));
    *text += u.text;
  } while (!u.done);
  return u;
}

// Until the request's first text is out (it decodes then) or it ends.
inline GenUpdate wait_first_text(GenHandle& h, std::string* text) {
  GenUpdate u;
  do {
    u = h.wait(std::chrono::milliseconds(100));
    *text += u.text;
  } while (text->empty() && !u.done);
  return u;
}

// A greedy request for n tokens that ignores end-of-generation.
inline GenRequest greedy_request(const std::vector<int32_t>& prompt, int n) {
  GenRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

}  // namespace deltafin
