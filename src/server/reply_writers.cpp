// BlockReplyWriter's shared steps (server/replies.h); the HTTP side is replies.cpp.
#include "server/replies.h"

namespace deltafin::server {

std::string BlockReplyWriter::update(Replies& r, int i, const GenUpdate& u) {
  Replies::Choice& c = r.choices[size_t(i)];
  std::string out = push(c.reply.push(u.text));
  if (c.reply.full()) c.h->stop();
  if (u.done) out += push(c.reply.finish());
  return out;
}

std::string BlockReplyWriter::end(Replies& r, Metrics* m) {
  if (n_calls() > 0) m->count_tool_calls(n_calls());
  const GenUpdate& last = r.choices[0].last;
  return finish(last.finish_reason, last.stop_string, r.usage());
}

}  // namespace deltafin::server
