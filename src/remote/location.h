// Where a model comes from: a local path, an http(s):// URL, or a Hugging Face file
// `hf://owner/repo[@revision]/path/in/repo.gguf`. A Hugging Face location becomes the
// hub's resolve URL (HF_ENDPOINT overrides https://huggingface.co), with HF_TOKEN as
// bearer token; the revision (default "main") is pinned to the commit the hub names
// (X-Repo-Commit) when the model is opened, so the bytes cannot change under a cache.
#pragma once
#include <string>

#include "core/result.h"

namespace deltafin {

struct ModelLocation {
  enum class Kind { Local, Url, HuggingFace };
  Kind kind = Kind::Local;
  std::string text;  // as given
  std::string path;  // Local
  std::string url;   // Url; HuggingFace: the resolve URL at `revision`
  // HuggingFace only.
  std::string endpoint, repo, revision, file;
  std::string token;  // bearer token (HF_TOKEN), empty if none

  bool remote() const { return kind != Kind::Local; }
  // The resolve URL of `file_in_repo` at revision `rev` (HuggingFace).
  std::string hf_url(const std::string& rev, const std::string& file_in_repo) const;
};

// True for http://, https:// and hf:// locations.
bool is_remote_location(const std::string& s);

// Reads HF_TOKEN and HF_ENDPOINT for hf:// locations.
Result<ModelLocation> parse_model_location(const std::string& s);

}  // namespace deltafin
