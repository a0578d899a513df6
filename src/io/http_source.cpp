#include "io/http_source.h"

#include <xxhash.h>

#include <algorithm>
#include <vector>

namespace deltafin {

std::string identity_change(const HttpIdentity& was, const HttpIdentity& now) {
  if (was.size != now.size) return fmt::format("its size was {} bytes and is now {}", was.size, now.size);
  // The validator `was` was pinned by must still come, with the same value: an
  // origin that stops sending it may be serving another revision at the same size.
  if (!was.etag.empty()) {
    if (now.etag.empty()) return fmt::format("its ETag was {} and the origin now sends none", was.etag);
    if (was.etag != now.etag) return fmt::format("its ETag was {} and is now {}", was.etag, now.etag);
    return "";
  }
  if (!was.last_modified.empty()) {
    if (now.last_modified.empty())
      return fmt::format("its Last-Modified was '{}' and the origin now sends none", was.last_modified);
    if (was.last_modified != now.last_modified)
      return fmt::format("its Last-Modified was '{}' and is now '{}'", was.last_modified, now.last_modified);
    return "";
  }
  if (was.fingerprint != 0 && now.fingerprint != 0 && was.fingerprint != now.fingerprint)
    return fmt::format("its first and last {} KiB hash to {:016x}, they hashed to {:016x} (the origin sends no "
                       "ETag or Last-Modified, so only the size and these bytes are pinned)",
                       kFingerprintBytes / 1024, now.fingerprint, was.fingerprint);
  return "";
}

Result<uint64_t> fingerprint_of(HttpClient& client, const std::string& url, const HttpIdentity& id) {
  const uint64_t head = std::min(id.size, kFingerprintBytes);
  const uint64_t tail_at = id.size - std::min(id.size, kFingerprintBytes);
  std::vector<char> buf(size_t(head + (id.size - tail_at)));
  if (head) DF_TRY(client.get_range_sync(url, 0, head, buf.data(), &id));
  if (id.size > tail_at) DF_TRY(client.get_range_sync(url, tail_at, id.size - tail_at, buf.data() + head, &id));
  const uint64_t h = XXH3_64bits(buf.data(), buf.size());
  return h ? h : 1;  // 0 means "not computed"
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
