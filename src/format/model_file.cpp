#include "format/model_file.h"

#include <fmt/format.h>

#include <regex>

#include "format/fragments.h"

namespace deltafin {

SourceOpener local_file_opener(FileSourceOptions opts) {
  return [opts](const std::string& location) -> Result<std::unique_ptr<ByteSource>> {
    DF_ASSIGN(std::vector<std::string> parts, fragment_list(location));
    auto open = [opts](const std::string& path) { return open_file_source(path, opts); };
    if (parts.size() == 1) return open(parts[0]);
    return open_fragments(parts, open);
  };
}

bool split_part_path(const std::string& path, int part, int count, std::string* out) {
  static const std::regex re(R"((.*)-(\d{5})-of-(\d{5})\.gguf$)");
  std::smatch m;
  if (!std::regex_match(path, m, re)) return false;
  *out = fmt::format("{}-{:05d}-of-{:05d}.gguf", m[1].str(), part, count);
  return true;
}

const TensorRef* ModelFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

uint64_t ModelFile::total_bytes() const {
  uint64_t n = 0;
  for (auto& s : sources_) n += s->size();
  return n;
}

Result<std::unique_ptr<ModelFile>> ModelFile::open(const std::string& path, const SourceOpener& opener) {
  auto mf = std::make_unique<ModelFile>();
  mf->path_ = location_display(path);
  DF_ASSIGN(auto first, opener(path));
  auto parsed = parse_gguf(*first);
  if (!parsed.ok() && !fragments_hint(*first).empty())
    return make_error("{}\n{}", parsed.error().message, fragments_hint(*first));
  DF_ASSIGN(GGUFFile meta, std::move(parsed));
  int64_t count = meta.int_or("split.count", 1);
  int64_t no = meta.int_or("split.no", 0);
  if (count < 1 || count > 9999) return make_error("{}: split.count {} is out of range (1..9999)", path, count);
  if (count > 1 && no != 0) {
    std::string first_part;
    if (no < 0 || no >= count || !split_part_path(path, 1, int(count), &first_part))
      first_part = fmt::format("NAME-00001-of-{:05d}.gguf", count);
    return make_error("{} is part {} of {} of a split model (split.no = {}); open the first part, {}", path,
                      no + 1, count, no, first_part);
  }
  mf->sources_.push_back(std::move(first));
  mf->shards_.push_back(std::move(meta));
  for (int k = 1; k < count; ++k) {
    std::string part;
    if (!split_part_path(path, k + 1, int(count), &part))
      return make_error("{}: split.count is {} but the name does not follow NAME-00001-of-{:05d}.gguf",
                        path, count, count);
    auto src = opener(part);
    if (!src.ok())
      return make_error("{}: part {} of {} of the split model is missing or unreadable: {}", path, k + 1,
                        count, src.error().message);
    DF_ASSIGN(GGUFFile m, parse_gguf(**src));
    if (m.int_or("split.no", -1) != k)
      return make_error("{}: expected split.no = {}, found {}", part, k, m.int_or("split.no", -1));
    if (m.int_or("split.count", -1) != count)
      return make_error("{}: split.count is {}, but the first part says {}", part, m.int_or("split.count", -1),
                        count);
    mf->sources_.push_back(std::move(*src));
    mf->shards_.push_back(std::move(m));
  }
  for (int s = 0; s < int(count); ++s) {
    for (const auto& t : mf->shards_[s].tensors) {
      TensorRef ref{&t, s, mf->shards_[s].data_offset + t.offset};
      if (!mf->tensors_.emplace(t.name, ref).second)
        return make_error("{}: tensor '{}' appears in more than one part", path, t.name);
    }
  }
  int64_t expect = mf->meta().int_or("split.tensors.count", -1);
  if (expect >= 0 && uint64_t(expect) != mf->tensors_.size())
    return make_error("{}: split.tensors.count says {} tensors, the parts hold {}", path, expect,
                      mf->tensors_.size());
  return mf;
}

Status ModelFile::overlay(const std::string& path, const SourceOpener& opener) {
  DF_ASSIGN(auto src, opener(path));
  DF_ASSIGN(GGUFFile g, parse_gguf(*src));
  for (const auto& t : g.tensors) {
    const TensorRef* own = tensor(t.name);
    if (!own) return make_error("{}: tensor '{}' is not in {}", path, t.name, path_);
    if (t.ne[0] != own->info->ne[0] || t.n_elements() != own->info->n_elements())
      return make_error("{}: tensor '{}' has another shape than in {}", path, t.name, path_);
  }
  sources_.push_back(std::move(src));
  shards_.push_back(std::move(g));
  // Every reference again: growing shards_ may have moved the directories.
  tensors_.clear();
  for (int s = 0; s < int(shards_.size()); ++s)
    for (const auto& t : shards_[s].tensors) tensors_[t.name] = TensorRef{&t, s, shards_[s].data_offset + t.offset};
  return {};
}

}  // namespace deltafin
