// What the process environment says to the library, read once at startup by the
// program (tools/environment.cpp, read_environment()) and passed down: no code under
// src/ calls getenv. A default-constructed Environment is an empty environment (what
// tests get unless they set a field).
#pragma once
#include <string>

namespace deltafin {

struct Environment {
  // The disk cache of remote models: $DELTAFIN_CACHE_DIR, else $XDG_CACHE_HOME/deltafin,
  // else $HOME/.cache/deltafin.
  std::string cache_dir = "/tmp/deltafin-cache";
  // The base of expert usage profiles (<profile_base>/deltafin/profiles/...):
  // $XDG_CACHE_HOME, else $HOME/.cache.
  std::string profile_base = "/tmp";
  // $DELTAFIN_ISA: the kernel set to run instead of the best the CPU has ("": the best).
  std::string isa;
  // Hugging Face: $HF_ENDPOINT (no trailing '/'), $HF_TOKEN, and the file the login
  // tools save a token in ($HF_TOKEN_PATH, else $HF_HOME/token, else
  // $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token; "" if none).
  std::string hf_endpoint = "https://huggingface.co";
  std::string hf_token;
  std::string hf_token_path;
  // CA certificates for https:// origins: $CURL_CA_BUNDLE, else $SSL_CERT_FILE ("": the system's).
  std::string ca_bundle;
};

}  // namespace deltafin
