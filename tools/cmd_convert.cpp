// deltafin convert: a Hugging Face folder to the GGUF file it is read as. The bytes
// are the folder's GGUF view (format/hf_gguf_source.h) streamed through a bounded
// buffer, so the file is byte for byte what `deltafin run FOLDER` computes with,
// and a model of any size needs only the buffer's memory. Written under a temporary
// name and renamed into place.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "commands.h"
#include "format/hf_gguf_source.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {

constexpr size_t kBuffer = size_t(64) << 20;

Status stream_to_file(ByteSource& src, const std::string& path) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return make_error("cannot create '{}': {}", tmp, std::strerror(errno));
  std::vector<char> buf(kBuffer);
  Status st;
  for (uint64_t off = 0; off < src.size() && st.ok();) {
    const size_t n = size_t(std::min<uint64_t>(kBuffer, src.size() - off));
    st = src.read_at(off, buf.data(), n);
    for (size_t done = 0; st.ok() && done < n;) {
      const ssize_t w = ::write(fd, buf.data() + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) st = make_error("cannot write '{}': {}", tmp, std::strerror(errno));
      else done += size_t(w);
    }
    off += n;
  }
  if (st.ok() && ::fsync(fd) != 0) st = make_error("cannot sync '{}': {}", tmp, std::strerror(errno));
  ::close(fd);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = make_error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

}  // namespace

Command add_convert(CLI::App& app) {
  struct Opts {
    std::string in, out;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("convert", "Write a Hugging Face model folder as the GGUF file deltafin reads it as");
  sub->add_option("input", o->in, "Hugging Face model folder (config.json, *.safetensors, tokenizer files)")->required();
  sub->add_option("output", o->out, "Output .gguf (missing directories are created)")->required();
  sub->add_flag("--force", o->force, "Overwrite the output if it exists");
  return {sub, [o] {
            if (!is_local_hf_folder(o->in)) {
              fmt::print(stderr, "error: '{}' is not a Hugging Face model folder (a directory with config.json)\n",
                         o->in);
              return 2;
            }
            DF_CHECK_OR_EXIT(prepare_output(o->out, o->force, "output"));
            DF_ASSIGN_OR_EXIT(std::unique_ptr<ModelFile> mf, open_local_hf_model(o->in));
            ByteSource& src = mf->source(0);
            if (Status st = stream_to_file(src, o->out); !st.ok()) {
              fmt::print(stderr, "error: {}\n", st.error().message);
              return 1;
            }
            const HfGgufSource* hf = hf_source_of(*mf);
            fmt::print(stderr, "wrote {}: {:.2f} MiB, {} tensors ({} skipped) from {} shard(s)\n", o->out,
                       double(src.size()) / 1048576.0, mf->tensors().size(), hf ? hf->folder().skipped_tensors : 0,
                       hf ? hf->folder().shard_files.size() : 0);
            return 0;
          }};
}

}  // namespace deltafin::tools
