// Hugging Face repositories: the file an `hf://owner/repo[:QUANT]` location means,
// chosen from the repository's listing (the hub's API, or a mirror's under
// HF_ENDPOINT), and what to say when the hub refuses access.
#pragma once
#include <string>
#include <vector>

#include "core/result.h"
#include "io/http_client.h"
#include "remote/location.h"

namespace deltafin {

// The files of the repository at loc.revision: GET {endpoint}/api/models/{repo}/tree/
// {revision}?recursive=true (following pagination), else the 'siblings' of
// {endpoint}/api/models/{repo}/revision/{revision}. `unreachable`: as for
// HttpClient::probe; `max_attempts` > 0 overrides the client's option.
Result<std::vector<std::string>> hf_list_files(const ModelLocation& loc, HttpClient& client,
                                               bool* unreachable = nullptr, int max_attempts = 0);

// Chooses the GGUF model among `files` (paths in the repository): with `quant` empty,
// the only one; else the one whose path holds the tag (case-insensitive, as a whole
// word: ':Q4_K' matches neither Q4_K_M nor Q4_K_S); a split set counts once, as its
// first part (-00001-of-0000N.gguf). mmproj files (vision projectors) are not models.
// Among several matches: those not only inside a longer 'UD-' tag (':IQ1_S' prefers
// IQ1_S over UD-IQ1_S), then those in a folder named after the tag; more than one
// left is an error listing them. `what` names the location in messages.
Result<std::string> choose_hf_file(const std::vector<std::string>& files, const std::string& quant,
                                   const std::string& what);

// Sets loc->file (and url) from the repository listing when loc names a repository
// (loc->file empty); no-op otherwise.
Status resolve_hf_file(ModelLocation* loc, HttpClient& client, bool* unreachable = nullptr, int max_attempts = 0);

// For an HTTP 401/403/404 from the hub: why it may have refused, and what to do
// (accept the licence of a gated repository, set HF_TOKEN); "" for other statuses.
std::string hf_access_hint(const ModelLocation& loc, long status);

// The HTTP status an error message of HttpClient names ("... HTTP 401"), or 0.
long http_status_in(const std::string& message);

}  // namespace deltafin
