#include "environment.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "core/platform.h"
#include "kernels/types.h"

namespace deltafin::tools {

namespace {
std::string var(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

Environment read_environment() {
  Environment e;
  const std::string xdg = var("XDG_CACHE_HOME"), home = var("HOME");
  // deltafin's own: the OS's cache directory (~/.cache, ~/Library/Caches).
  const std::string user_cache = platform::user_cache_dir(xdg, home);
  // Hugging Face's: XDG's on every OS, as huggingface_hub has it.
  const std::string xdg_cache = !xdg.empty() ? xdg : !home.empty() ? home + "/.cache" : "";
  if (std::string d = var("DELTAFIN_CACHE_DIR"); !d.empty()) e.cache_dir = d;
  else if (!user_cache.empty()) e.cache_dir = user_cache + "/deltafin";
  if (!user_cache.empty()) e.profile_base = user_cache;
  e.isa = var("DELTAFIN_ISA");
  if (std::string ep = var("HF_ENDPOINT"); !ep.empty()) {
    while (!ep.empty() && ep.back() == '/') ep.pop_back();
    e.hf_endpoint = ep;
  }
  e.hf_token = var("HF_TOKEN");
  e.hf_token_path = var("HF_TOKEN_PATH");
  if (e.hf_token_path.empty()) {
    std::string hf_home = var("HF_HOME");
    if (hf_home.empty() && !xdg_cache.empty()) hf_home = xdg_cache + "/huggingface";
    if (!hf_home.empty()) e.hf_token_path = hf_home + "/token";
  }
  e.ca_bundle = var("CURL_CA_BUNDLE");
  if (e.ca_bundle.empty()) e.ca_bundle = var("SSL_CERT_FILE");
  return e;
}
}  // namespace

const Environment& environment() {
  static const Environment e = read_environment();
  return e;
}

void select_isa_from_environment() {
  const std::string& want = environment().isa;
  if (want.empty()) return;
  Isa isa;
  if (!isa_from_name(want, &isa) || !select_isa(isa))
    std::fprintf(stderr, "warning: DELTAFIN_ISA=%s is not a kernel set this CPU runs; using %s\n", want.c_str(),
                 isa_name(selected_isa()));
}

}  // namespace deltafin::tools
