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
        if (stream && !write(w->start())) return false;
        auto last_write = std::chrono::steady_clock::now();
        for (;;) {
          std::string out, failed;
          ctx->next(heartbeat, [&](int, Replies::Choice& c, const GenUpdate& u) {
            out += w->push(c.reply.push(u.text));
            if (c.reply.full()) c.h->stop();
            if (!u.done) return;
            out += w->push(c.reply.finish());
            if (u.finish_reason == "error") failed = u.error;
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
            if (w->n_calls() > 0) m->count_tool_calls(w->n_calls());
            const GenUpdate& last = ctx->choices[0].last;
            out += w->finish(last.finish_reason, last.stop_string, ctx->usage());
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
