// write_reply: the one part of the replies that talks to httplib, apart from the
// writers (reply_writers.cpp) so that what links the writers without a server (the
// unit tests, and a build whose httplib cannot be linked: cmake/dependencies.cmake)
// does not pull httplib in.
#include "server/replies.h"

namespace deltafin::server {

void write_reply(httplib::Response& res, std::shared_ptr<Replies> ctx, std::shared_ptr<ReplyWriter> w, bool stream,
                 std::chrono::milliseconds heartbeat, Metrics* m, std::function<void()> finished) {
  if (stream) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      stream ? "text/event-stream" : "application/json",
      [ctx, w, heartbeat, m, stream, finished](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) {
          if (sink.write(s.data(), s.size())) return true;
          ctx->cancel();
          return false;
        };
        if (stream) {
          const std::string s = w->start();
          if (!s.empty() && !write(s)) return false;
        }
        auto last_write = std::chrono::steady_clock::now();
        for (;;) {
          std::string out, failed;
          ctx->next(heartbeat, [&](int i, Replies::Choice&, const GenUpdate& u) {
            out += w->update(*ctx, i, u);
            if (u.done && u.finish_reason == "error") failed = u.error;
          });
          if (failed.empty() && !ctx->all_done()) {
            const auto now = std::chrono::steady_clock::now();
            if (stream && !out.empty()) {
              if (!write(out)) return false;
              last_write = now;
            } else if (now - last_write >= heartbeat) {
              if (!write(stream ? w->keepalive() : " ")) return false;
              last_write = now;
            }
            continue;
          }
          if (!failed.empty()) {
            ctx->cancel();
            out += w->fail("generation failed: " + failed);
          } else {
            out += w->end(*ctx, m);
            if (finished) finished();
          }
          if (!write(stream ? out : w->whole())) return false;
          sink.done();
          return true;
        }
      },
      [ctx](bool ok) {
        if (!ok) ctx->cancel();
      });
}

}  // namespace deltafin::server
