// A model as one or more GGUF shards (split models: NAME-00001-of-0000N.gguf), with
// one merged tensor directory. Metadata comes from the first shard. Bytes are read
// through ByteSources made by a caller-supplied opener (local file now, HTTP later).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/progress.h"
#include "format/gguf.h"
#include "io/byte_source.h"

namespace deltafin {

struct TensorRef {
  const GGUFTensorInfo* info = nullptr;
  int shard = 0;
  uint64_t file_offset = 0;  // absolute offset in the shard's file
};

// Lets the weight loader map some tensors from the file instead of reading them
// into owned memory (model/core_pager.h). Not owned by the ModelFile.
class TensorMapper {
 public:
  virtual ~TensorMapper() = default;
  // The tensor's bytes, mapped and valid for the mapper's life; nullptr: read it.
  virtual Result<const void*> map(const std::string& name, const TensorRef& t) = 0;
};

using SourceOpener = std::function<Result<std::unique_ptr<ByteSource>>(const std::string& path)>;
// Local files; a location that names byte fragments (format/fragments.h) opens as
// their concatenation.
SourceOpener local_file_opener(FileSourceOptions opts = {});

class ModelFile {
 public:
  // Opens `path`; if it is the first part of a split model, opens every part. A
  // location naming byte fragments (format/fragments.h) is read as the one file
  // they make when the opener concatenates them (local_file_opener does).
  static Result<std::unique_ptr<ModelFile>> open(const std::string& path, const SourceOpener& opener);

  // Lays the tensors of another GGUF at `path` over this model's: each of its
  // tensors replaces the one of the same name (which must exist); the rest keep
  // coming from the model's own parts. For a core re-encoded once (quant/core_cache.h).
  Status overlay(const std::string& path, const SourceOpener& opener);

  const GGUFFile& meta() const { return shards_[0]; }
  // The parsed header of part k (0-based); tensors in file order.
  const GGUFFile& shard(int k) const { return shards_[k]; }
  const TensorRef* tensor(const std::string& name) const;
  const std::map<std::string, TensorRef>& tensors() const { return tensors_; }
  ByteSource& source(int shard) { return *sources_[shard]; }
  int shard_count() const { return int(sources_.size()); }
  // The location as messages show it (a fragment set: its first part and a count).
  const std::string& path() const { return path_; }
  uint64_t total_bytes() const;
  // Where the loader gets tensors mapped instead of read (null: read everything).
  void set_tensor_mapper(TensorMapper* m) { mapper_ = m; }
  TensorMapper* tensor_mapper() const { return mapper_; }
  // While set, read_tensor() reports the bytes it reads (the loader's progress
  // line). Not owned.
  void set_read_progress(Progress* p) { progress_ = p; }
  // Reads a whole tensor's bytes.
  Status read_tensor(const TensorRef& t, void* dst) {
    Status s = sources_[t.shard]->read_at(t.file_offset, dst, t.info->bytes);
    if (progress_) progress_->add(t.info->bytes);
    return s;
  }

 private:
  std::string path_;
  std::vector<std::unique_ptr<ByteSource>> sources_;
  std::vector<GGUFFile> shards_;
  std::map<std::string, TensorRef> tensors_;
  TensorMapper* mapper_ = nullptr;
  Progress* progress_ = nullptr;
};

// "dir/name-00002-of-00005.gguf" for part 2 of 5 given any part's path; returns
// false if the path does not follow the split naming.
bool split_part_path(const std::string& path, int part, int count, std::string* out);

}  // namespace deltafin
