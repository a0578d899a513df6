#include "format/gguf_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace deltafin {

GGUFWriter::~GGUFWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_path_.c_str());
  }
}

void GGUFWriter::add_tensor(const std::string& name, DType type, std::initializer_list<int64_t> shape) {
  GGUFTensorInfo t;
  t.name = name;
  t.type = type;
  t.n_dims = 0;
  for (int64_t n : shape) t.ne[t.n_dims++] = n;
  file_.tensors.push_back(t);
}

Status GGUFWriter::raw_write(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f_) != n)
    return make_error("{}: write failed after {} bytes: {}", tmp_path_, written_, std::strerror(errno));
  written_ += n;
  return {};
}

Status GGUFWriter::begin() {
  tmp_path_ = path_ + ".partial";
  f_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!f_) return make_error("cannot create '{}': {}", tmp_path_, std::strerror(errno));
  std::setvbuf(f_, nullptr, _IOFBF, 8 << 20);
  std::string header = serialize_gguf_header(file_);
  return raw_write(header.data(), header.size());
}

Status GGUFWriter::write_data(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    if (cur_ >= file_.tensors.size()) return make_error("{}: more tensor data than tensors", path_);
    const GGUFTensorInfo& t = file_.tensors[cur_];
    size_t take = size_t(std::min<uint64_t>(n, t.bytes - cur_done_));
    DF_TRY(raw_write(p, take));
    p += take;
    n -= take;
    cur_done_ += take;
    if (cur_done_ == t.bytes) {
      // Pad to the alignment before the next tensor.
      uint64_t pad = (file_.alignment - t.bytes % file_.alignment) % file_.alignment;
      static const char zeros[256] = {};
      if (cur_ + 1 < file_.tensors.size()) DF_TRY(raw_write(zeros, size_t(pad)));
      ++cur_;
      cur_done_ = 0;
    }
  }
  return {};
}

Status GGUFWriter::finish() {
  if (cur_ != file_.tensors.size())
    return make_error("{}: tensor '{}' was not fully written", path_, file_.tensors[cur_].name);
  if (std::fflush(f_) != 0 || ::fsync(fileno(f_)) != 0)
    return make_error("{}: flush failed: {}", tmp_path_, std::strerror(errno));
  std::fclose(f_);
  f_ = nullptr;
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    return make_error("cannot rename '{}' to '{}': {}", tmp_path_, path_, std::strerror(errno));
  return {};
}

}  // namespace deltafin
