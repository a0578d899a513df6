#include "format/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <vector>

#include "format/model_file.h"

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
  assert(shape.size() <= size_t(kMaxDims));
  for (int64_t n : shape) t.ne[t.n_dims++] = n;
  file_.tensors.push_back(t);
}

Status GGUFWriter::raw_write(const void* p, size_t n) {
  if (!p) {  // a hole: seek past it; finish() sets the file's length
    if (n && ::fseeko(f_, off_t(n), SEEK_CUR) != 0)
      return make_error("{}: seek failed after {} bytes: {}", tmp_path_, written_, std::strerror(errno));
    written_ += n;
    return {};
  }
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
    if (p) p += take;
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
  if (std::fflush(f_) != 0 || ::ftruncate(fileno(f_), off_t(written_)) != 0 || ::fsync(fileno(f_)) != 0)
    return make_error("{}: flush failed: {}", tmp_path_, std::strerror(errno));
  std::fclose(f_);
  f_ = nullptr;
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    return make_error("cannot rename '{}' to '{}': {}", tmp_path_, path_, std::strerror(errno));
  return {};
}

namespace {

constexpr const char* kSplitNo = "split.no";
constexpr const char* kSplitCount = "split.count";
constexpr const char* kSplitTensors = "split.tensors.count";

std::string default_prefix(const std::string& path) {
  // Strip "-00001-of-00003.gguf" (20 characters) or ".gguf".
  auto digits = [&](size_t at) {
    for (size_t k = at; k < at + 5; ++k)
      if (path[k] < '0' || path[k] > '9') return false;
    return true;
  };
  size_t n = path.size();
  if (n > 20 && path[n - 20] == '-' && digits(n - 19) && path.compare(n - 14, 4, "-of-") == 0 && digits(n - 10) &&
      path.compare(n - 5, 5, ".gguf") == 0)
    return path.substr(0, n - 20);
  if (n > 5 && path.compare(n - 5, 5, ".gguf") == 0) return path.substr(0, n - 5);
  return path;
}

// First tensor index of each part: contiguous runs of about total/n bytes, each
// part non-empty. first[n] == tensors.size().
std::vector<size_t> plan_parts(const std::vector<const GGUFTensorInfo*>& tensors, int n) {
  uint64_t total = 0;
  for (auto* t : tensors) total += t->bytes;
  std::vector<size_t> first(size_t(n) + 1, tensors.size());
  size_t i = 0;
  uint64_t cum = 0;
  for (int p = 0; p < n; ++p) {
    first[p] = i;
    if (p == n - 1) break;
    uint64_t goal = total / uint64_t(n) * uint64_t(p + 1);
    size_t keep_for_rest = size_t(n - 1 - p);
    do {
      cum += tensors[i]->bytes;
      ++i;
    } while (i + keep_for_rest < tensors.size() && cum + tensors[i]->bytes / 2 <= goal);
  }
  return first;
}

}  // namespace

Status split_gguf(const std::string& path, int n_parts, const GGUFSplitOptions& opts,
                  std::vector<std::string>* parts_out) {
  DF_ASSIGN(auto model, ModelFile::open(path, local_file_opener()));
  std::vector<const GGUFTensorInfo*> tensors;
  std::vector<const TensorRef*> refs;
  for (int s = 0; s < model->shard_count(); ++s) {
    for (const auto& t : model->shard(s).tensors) {
      tensors.push_back(&t);
      refs.push_back(model->tensor(t.name));
    }
  }
  if (n_parts < 1 || n_parts > 9999)
    return make_error("{}: cannot split into {} parts (1..9999)", path, n_parts);
  if (size_t(n_parts) > tensors.size())
    return make_error("{}: cannot split {} tensors into {} non-empty parts", path, tensors.size(), n_parts);
  if (tensors.size() > uint64_t(INT32_MAX)) return make_error("{}: too many tensors to split", path);

  std::string prefix = opts.out_prefix.empty() ? default_prefix(path) : opts.out_prefix;
  auto out_path = [&](int p) {
    return n_parts == 1 ? prefix + ".gguf" : fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, p + 1, n_parts);
  };
  // The input's files: never overwritten (a failure half way would lose them).
  std::vector<std::string> inputs{path};
  for (int s = 1; s < model->shard_count(); ++s) {
    std::string part;
    if (split_part_path(path, s + 1, model->shard_count(), &part)) inputs.push_back(part);
  }
  for (int p = 0; p < n_parts; ++p)
    if (std::find(inputs.begin(), inputs.end(), out_path(p)) != inputs.end())
      return make_error("{}: splitting would overwrite the input file {}; choose another output prefix", path,
                        out_path(p));
  std::vector<size_t> first = plan_parts(tensors, n_parts);
  const GGUFFile& meta = model->meta();
  std::vector<std::string> written;
  auto cleanup = [&] {
    for (auto& w : written) std::remove(w.c_str());
  };
  std::vector<char> buf(size_t(16) << 20);
  for (int p = 0; p < n_parts; ++p) {
    std::string out = out_path(p);
    GGUFWriter w(out);
    GGUFFile& f = w.file();
    f.version = 3;
    if (p == 0) {
      for (const auto& k : meta.keys)
        if (k != kSplitNo && k != kSplitCount && k != kSplitTensors) f.set(k, meta.kv.at(k));
    } else if (const GGUFValue* a = meta.find("general.alignment")) {
      f.set("general.alignment", *a);
    }
    if (n_parts > 1) {
      GGUFValue no, count;
      no.type = count.type = GGUFType::U16;
      no.i = p;
      count.i = n_parts;
      f.set(kSplitNo, no);
      f.set(kSplitCount, count);
      f.set(kSplitTensors, GGUFValue::i32(int32_t(tensors.size())));
    }
    for (size_t k = first[p]; k < first[p + 1]; ++k) f.tensors.push_back(*tensors[k]);
    Status st = w.begin();
    for (size_t k = first[p]; st.ok() && k < first[p + 1]; ++k) {
      const TensorRef& r = *refs[k];
      for (uint64_t done = 0; st.ok() && done < r.info->bytes;) {
        size_t n = size_t(std::min<uint64_t>(buf.size(), r.info->bytes - done));
        st = model->source(r.shard).read_at(r.file_offset + done, buf.data(), n);
        if (st.ok()) st = w.write_data(buf.data(), n);
        done += n;
      }
    }
    if (st.ok()) st = w.finish();
    if (!st.ok()) {
      cleanup();
      return st;
    }
    written.push_back(out);
  }
  if (opts.remove_input) {
    model.reset();
    for (auto& in : inputs) std::remove(in.c_str());
  }
  if (parts_out) *parts_out = std::move(written);
  return {};
}

}  // namespace deltafin
