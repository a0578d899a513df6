#include "remote/http_source.h"

namespace deltafin {

std::string identity_change(const HttpIdentity& was, const HttpIdentity& now) {
  if (was.size != now.size) return fmt::format("its size was {} bytes and is now {}", was.size, now.size);
  if (!was.etag.empty() && !now.etag.empty() && was.etag != now.etag)
    return fmt::format("its ETag was {} and is now {}", was.etag, now.etag);
  if (was.etag.empty() && now.etag.empty() && !was.last_modified.empty() && !now.last_modified.empty() &&
      was.last_modified != now.last_modified)
    return fmt::format("its Last-Modified was '{}' and is now '{}'", was.last_modified, now.last_modified);
  return "";
}

HttpSource::HttpSource(std::shared_ptr<HttpClient> client, std::string url, HttpIdentity id)
    : client_(std::move(client)), url_(std::move(url)), name_(redact_url(url_)), id_(std::move(id)) {}

Result<std::unique_ptr<HttpSource>> HttpSource::open(std::shared_ptr<HttpClient> client, const std::string& url,
                                                     const HttpIdentity* expect, int max_attempts,
                                                     bool* unreachable) {
  auto probe = client->probe(url, max_attempts, unreachable);
  if (!probe.ok()) return make_error("cannot open {}: {}", redact_url(url), probe.error().message);
  if (expect) {
    std::string change = identity_change(*expect, probe->id);
    if (!change.empty())
      return make_error("{} changed at the origin since it was cached: {}. The cached bytes belong to the old "
                        "file; clear them with `deltafin cache clear` before using the new one",
                        redact_url(url), change);
  }
  auto src = std::make_unique<HttpSource>(std::move(client), url, probe->id);
  src->probe_ = *probe;
  return src;
}

Status HttpSource::read_at(uint64_t offset, void* dst, size_t n) {
  if (offset > id_.size || n > id_.size - offset)
    return make_error("{}: read of {} bytes at offset {} is past the end ({} bytes)", name_, n, offset, id_.size);
  if (n == 0) return {};
  return client_->get_range_sync(url_, offset, n, static_cast<char*>(dst), &id_);
}

}  // namespace deltafin
