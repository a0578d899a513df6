// Where a model comes from: a local path, an http(s):// URL, or a Hugging Face
// repository: `hf://owner/repo[@revision]/path/in/repo.gguf` names a file;
// `hf://owner/repo[@revision]:QUANT` (e.g. :Q4_K_M, :UD-IQ1_S) the file or split set
// of that quantization, and `hf://owner/repo[@revision]` the repository's only GGUF
// model, both chosen from the repository's listing when the model is opened
// (remote/hf_repo.h). A Hugging Face location becomes the hub's resolve URL
// (HF_ENDPOINT overrides https://huggingface.co, e.g. for a mirror), with a bearer
// token from HF_TOKEN, else the file the Hugging Face login tools write
// (HF_TOKEN_PATH, else $HF_HOME/token, HF_HOME defaulting to
// $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface); the revision (default
// "main") is pinned to the commit the hub names (X-Repo-Commit) when the model is
// opened, so the bytes cannot change under a cache.
#pragma once
#include <string>
#include <vector>

#include "core/environment.h"
#include "core/result.h"

namespace deltafin {

struct ModelLocation {
  enum class Kind { Local, Url, HuggingFace };
  Kind kind = Kind::Local;
  std::string text;  // as given
  std::string path;  // Local
  std::string url;   // Url; HuggingFace: the resolve URL at `revision` (empty until `file` is known)
  // HuggingFace only.
  std::string endpoint, repo, revision, file;
  std::string quant;         // the QUANT of hf://owner/repo:QUANT ("" if none); `file` is empty until chosen
  std::string token;         // bearer token, empty if none; never printed
  std::string token_source;  // where the token came from ("HF_TOKEN", or the token file's path)
  // One GGUF published as byte fragments (format/fragments.h: repeated -m, or a name
  // NAME.part1ofN): every fragment's URL (Url) or file in the repository (HuggingFace),
  // in order; `url` and `file` are the first's. Empty: one file.
  std::vector<std::string> fragments;

  bool remote() const { return kind != Kind::Local; }
  // The resolve URL of `file_in_repo` at revision `rev` (HuggingFace).
  std::string hf_url(const std::string& rev, const std::string& file_in_repo) const;
  // Sets `file` (and `url`) once the file of a repository location is chosen.
  void set_hf_file(const std::string& file_in_repo);
};

// True for http://, https:// and hf:// locations (a fragment list: its first entry).
bool is_remote_location(const std::string& s);

// A fragment list (format/fragments.h) of URLs, or of files of one repository and
// revision, parses to its first entry with `fragments` set; so does a URL or file
// named NAME.part1ofN. hf:// locations take the endpoint and token from `env` (hf_endpoint; hf_token, else
// the token saved in the file hf_token_path names).
Result<ModelLocation> parse_model_location(const std::string& s, const Environment& env);

}  // namespace deltafin
