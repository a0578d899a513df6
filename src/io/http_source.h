// A ByteSource over HTTP range requests: one remote file, its size and ETag pinned
// when opened (a probe of its first byte), every later response checked against
// them. read_at blocks until the bytes are in (retries included).
#pragma once
#include <memory>
#include <string>

#include "io/byte_source.h"
#include "io/http_client.h"

namespace deltafin {

class HttpSource final : public ByteSource {
 public:
  // Probes `url`. `expect`: the identity the file must still have (from a cache);
  // a different size or ETag is an error that says the file changed.
  // `max_attempts`, `unreachable`: as for HttpClient::probe.
  static Result<std::unique_ptr<HttpSource>> open(std::shared_ptr<HttpClient> client, const std::string& url,
                                                  const HttpIdentity* expect = nullptr, int max_attempts = 0,
                                                  bool* unreachable = nullptr);
  // Trusts `id` without a probe (what a cache pinned).
  HttpSource(std::shared_ptr<HttpClient> client, std::string url, HttpIdentity id);

  uint64_t size() const override { return id_.size; }
  Status read_at(uint64_t offset, void* dst, size_t n) override;
  const std::string& name() const override { return name_; }

  const std::string& url() const { return url_; }
  const HttpIdentity& identity() const { return id_; }
  HttpClient& client() { return *client_; }
  // What the probe learned (redirect target, X-Repo-Commit, HTTP version).
  const HttpProbe& probe() const { return probe_; }

 private:
  std::shared_ptr<HttpClient> client_;
  std::string url_, name_;
  HttpIdentity id_;
  HttpProbe probe_;
};

// Says how two identities of one file differ ("" if they match). A validator
// (ETag, else Last-Modified) that `was` has and `now` lacks is a change; without
// validators the fingerprints are compared where both are known.
std::string identity_change(const HttpIdentity& was, const HttpIdentity& now);

// XXH3-64 of the first and last kFingerprintBytes of the object (never 0): what
// pins an object whose origin sends neither ETag nor Last-Modified.
Result<uint64_t> fingerprint_of(HttpClient& client, const std::string& url, const HttpIdentity& id);

}  // namespace deltafin
