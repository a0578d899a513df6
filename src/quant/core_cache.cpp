#include "quant/core_cache.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/log.h"
#include "quant/quantize_model.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;

// XXH3-64 of a whole file, streamed.
Result<uint64_t> file_xxh3(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot read {}", path);
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(8 << 20);
  while (f) {
    f.read(buf.data(), std::streamsize(buf.size()));
    if (f.gcount() > 0) XXH3_64bits_update(st, buf.data(), size_t(f.gcount()));
  }
  const bool bad = f.bad();
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  if (bad) return make_error("read error in {}", path);
  return h;
}

// The model's identity: its size, every part's header bytes, the type and this format.
Result<uint64_t> model_identity(ModelFile& file, const std::string& type) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  const std::string tag = "deltafin-core-v1 " + type;
  XXH3_64bits_update(st, tag.data(), tag.size());
  const uint64_t total = file.total_bytes();
  XXH3_64bits_update(st, &total, sizeof total);
  std::vector<char> head;
  Status s;
  for (int k = 0; k < file.shard_count() && s.ok(); ++k) {
    head.resize(size_t(file.shard(k).data_offset));
    s = file.source(k).read_at(0, head.data(), head.size());
    XXH3_64bits_update(st, head.data(), head.size());
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  if (!s.ok()) return s.error();
  return h;
}

}  // namespace

Result<CoreCacheInfo> cached_core(ModelFile& file, const std::string& type_name, const std::string& cache_dir,
                                  bool verify) {
  QuantizeOptions qo;
  DF_TRY(parse_quantize_target(type_name, &qo));
  if (!qo.mix.empty())
    return make_error("--core-type {}: a mix is not a core type; give one type (e.g. Q8_0 or Q4_K)", type_name);
  qo.fallback = DType::Q8_0;
  qo.core_only = true;
  if (cache_dir.empty()) return make_error("--core-type needs a cache directory (--cache-dir)");
  CoreCacheInfo info;
  info.type = dtype_name(qo.type);
  DF_ASSIGN(const uint64_t id, model_identity(file, info.type));
  // A folder's name (a Hugging Face model folder is read as the GGUF it converts to).
  std::string stem = fs::path(file.path()).lexically_normal().filename().string();
  if (stem.empty()) stem = fs::path(file.path()).lexically_normal().parent_path().filename().string();
  if (stem.size() > 5 && stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
  if (stem.empty()) stem = "model";
  const fs::path dir = fs::path(cache_dir) / "cores";
  const std::string base = (dir / fmt::format("{}-{}-{:016x}", stem, info.type, id)).string();
  info.path = base + ".gguf";
  const std::string record = base + ".json";

  std::error_code ec;
  if (fs::exists(info.path, ec) && fs::exists(record, ec)) {
    nlohmann::json j;
    try {
      std::ifstream f(record);
      j = nlohmann::json::parse(f);
      const uint64_t size = fs::file_size(info.path, ec);
      if (ec || size != j.at("bytes").get<uint64_t>()) {
        info.note = fmt::format("its size is {} bytes, its record says {}", ec ? 0 : size, j.at("bytes").get<uint64_t>());
      } else if (verify) {
        DF_ASSIGN(const uint64_t h, file_xxh3(info.path));
        if (fmt::format("{:016x}", h) != j.at("xxh3").get<std::string>())
          info.note = fmt::format("its checksum {:016x} differs from the recorded {}", h, j.at("xxh3").get<std::string>());
      }
      if (info.note.empty()) {
        info.bytes = size;
        return info;
      }
    } catch (const std::exception& e) {
      info.note = fmt::format("its record {} is unreadable ({})", record, e.what());
    }
  } else if (fs::exists(info.path, ec)) {
    info.note = "it has no record (an interrupted run)";
  }
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create {}: {}", dir.string(), ec.message());
  fs::remove(record, ec);  // a core without a record is never used
  // Warned, not logged: it can take minutes (a 114 GB core) and writes to the disk.
  DF_LOG_WARN("core: re-encoding the core of {} to {} once into {}{}; later runs reuse it", file.path(), info.type,
              dir.string(), info.note.empty() ? "" : " (the cached one is made again: " + info.note + ")");
  DF_TRY(quantize_model(file, info.path, qo));
  DF_ASSIGN(const uint64_t h, file_xxh3(info.path));
  info.bytes = fs::file_size(info.path, ec);
  const bool remote = file.path().find("://") != std::string::npos;
  nlohmann::json j = {{"source", remote ? file.path() : fs::absolute(file.path(), ec).string()},
                      {"source_bytes", file.total_bytes()},
                      {"type", info.type},
                      {"bytes", info.bytes},
                      {"xxh3", fmt::format("{:016x}", h)}};
  const std::string tmp = record + ".partial";
  {
    std::ofstream f(tmp);
    f << j.dump(2) << "\n";
    if (!f.flush()) return make_error("cannot write {}", tmp);
  }
  fs::rename(tmp, record, ec);
  if (ec) return make_error("cannot rename {} to {}: {}", tmp, record, ec.message());
  info.made = true;
  return info;
}

}  // namespace deltafin
