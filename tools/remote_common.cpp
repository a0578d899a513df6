#include "remote_common.h"

#include <sys/statvfs.h>

#include "environment.h"
#include "format/hf_gguf_source.h"
#include "model/model.h"
#include "remote/location.h"

namespace deltafin::tools {

Result<OpenedRemote> open_remote(const std::string& location, const RemoteOptions& ro) {
  DF_ASSIGN(ModelLocation loc, parse_model_location(location, environment()));
  if (!loc.remote())
    return make_error("'{}' is a local path; pull and cache work on http://, https:// and hf:// locations", location);
  OpenedRemote r;
  DF_ASSIGN(r.remote, RemoteModel::open(loc, ro));
  DF_ASSIGN(r.file, r.remote->open_file());
  DF_TRY(r.remote->attach(*r.file, find_expert_layers(*r.file)));
  return r;
}

Result<std::unique_ptr<ModelFile>> open_headers(const std::string& location, const RemoteOptions& ro,
                                                OpenedRemote* remote) {
  if (is_local_hf_folder(location)) return open_local_hf_model(location);
  if (!is_remote_location(location)) return ModelFile::open(location, local_file_opener());
  DF_ASSIGN(*remote, open_remote(location, ro));
  return std::move(remote->file);
}

std::string human_bytes(uint64_t n) {
  if (n >= (uint64_t(1) << 30)) return fmt::format("{:.2f} GiB", double(n) / double(uint64_t(1) << 30));
  if (n >= (uint64_t(1) << 20)) return fmt::format("{:.1f} MiB", double(n) / double(uint64_t(1) << 20));
  return fmt::format("{:.1f} KiB", double(n) / 1024.0);
}

uint64_t free_bytes(const std::string& dir) {
  std::string d = dir;
  for (;;) {
    struct statvfs s;
    if (::statvfs(d.c_str(), &s) == 0) return uint64_t(s.f_bavail) * uint64_t(s.f_frsize);
    const size_t slash = d.rfind('/');
    if (slash == std::string::npos || slash == 0) return 0;
    d.resize(slash);
  }
}

}  // namespace deltafin::tools
