// GGUF -> Hugging Face folder (hf_export.h).
#include "format/hf_export.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "format/hf_arch.h"
#include "format/hf_export_encode.h"
#include "format/hf_folder.h"
#include "format/hf_tokenizer.h"
#include "format/model_file.h"
#include "format/hf_derive.h"
#include "kernels/blocks.h"
#include "quant/hf_codecs.h"
#include "tokenizer/vocab.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;

const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    default: return nullptr;
  }
}

// One safetensors tensor to write: bytes [src_off, src_off + src_bytes) of the GGUF,
// narrowed from F32 to `dtype` when it differs, or (from MXFP4) the compressed-tensors
// codes or scales of those MXFP4 blocks.
struct Item {
  std::string name;
  DType dtype = DType::F32;
  DType from = DType::F32;
  std::vector<int64_t> shape;  // outermost first
  uint64_t src_off = 0, src_bytes = 0;
  std::string literal;       // bytes given (the vision tower, a derived tensor), instead of a source range
  std::string literal_dtype;  // its safetensors dtype
  HfMadeTensor made;          // bytes made on demand (made.make set: an FP8/INT4 encoding), instead of a source range
  enum class Part : uint8_t { All, Mxfp4Codes, Mxfp4Scales } part = Part::All;
  size_t group = 0;  // items of one group (an expert's) stay together in one shard
  uint64_t bytes() const {
    if (made.make) return made.bytes;
    if (!literal_dtype.empty()) return literal.size();
    if (part == Part::Mxfp4Codes) return src_bytes / 17 * 16;
    if (part == Part::Mxfp4Scales) return src_bytes / 17;
    return from == dtype ? src_bytes : src_bytes / 4 * (dtype == DType::F32 ? 4 : 2);
  }
  std::string st_type() const {
    if (made.make) return made.dtype;
    if (!literal_dtype.empty()) return literal_dtype;
    return part == Part::All ? st_dtype(dtype) : "U8";
  }
};

Status write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << j.dump(2) << "\n";
  f.close();
  if (!f) return make_error("cannot write '{}'", path);
  return {};
}

Status write_item(ByteSource& src, const Item& it, std::ofstream& out) {
  if (it.made.make) {
    std::string b;
    DF_TRY(it.made.make(src, &b));
    if (b.size() != it.made.bytes)
      return make_error("internal: {} made {} bytes, {} announced", it.name, b.size(), it.made.bytes);
    out.write(b.data(), std::streamsize(b.size()));
    return {};
  }
  if (!it.literal_dtype.empty()) {
    out.write(it.literal.data(), std::streamsize(it.literal.size()));
    return {};
  }
  if (it.part != Item::Part::All) {  // one expert's MXFP4 blocks, split into codes and scales
    std::vector<uint8_t> blocks(size_t(it.src_bytes)), codes(size_t(it.src_bytes / 17 * 16)),
        scales(size_t(it.src_bytes / 17));
    DF_TRY(src.read_at(it.src_off, blocks.data(), blocks.size()));
    mxfp4_gguf_to_ct(blocks.data(), 1, int64_t(scales.size() * 32), codes.data(), scales.data());
    const auto& v = it.part == Item::Part::Mxfp4Codes ? codes : scales;
    out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size()));
    return {};
  }
  constexpr uint64_t kChunk = uint64_t(32) << 20;
  std::vector<char> buf(size_t(std::min(kChunk, it.src_bytes)));
  for (uint64_t done = 0; done < it.src_bytes;) {
    const uint64_t n = std::min<uint64_t>(kChunk, it.src_bytes - done);
    DF_TRY(src.read_at(it.src_off + done, buf.data(), size_t(n)));
    if (it.from == it.dtype) {
      out.write(buf.data(), std::streamsize(n));
    } else {
      std::vector<uint16_t> half(size_t(n / 4));
      for (size_t i = 0; i < half.size(); ++i) {
        float x;
        std::memcpy(&x, buf.data() + 4 * i, 4);
        half[i] = it.dtype == DType::BF16 ? kern::f32_to_bf16(x) : kern::f32_to_fp16(x);
      }
      out.write(reinterpret_cast<const char*>(half.data()), std::streamsize(half.size() * 2));
    }
    done += n;
  }
  return {};
}

}  // namespace

Status export_gguf_as_hf(const std::string& gguf_path, const std::string& dir, const HfExportOptions& opts,
                         HfExportReport* report) {
  DF_ASSIGN(auto mf, ModelFile::open(gguf_path, local_file_opener()));
  const GGUFFile& m = mf->meta();
  const std::string arch_name = m.string_or("general.architecture", "");
  const HfArch* arch = find_hf_arch_by_gguf(arch_name);
  if (!arch) return make_error("{}: no Hugging Face layout for architecture '{}'", gguf_path, arch_name);
  if (mf->shard_count() != 1) return make_error("{}: a split GGUF; merge it first", gguf_path);

  // The matrices' type: what the 1-D tensors and the router are published in.
  DType matrix = DType::F32;
  if (const TensorRef* e = mf->tensor("token_embd.weight")) matrix = e->info->type;
  if (!st_dtype(matrix)) return make_error("{}: token_embd.weight is {}; only F32, F16 and BF16 export", gguf_path,
                                           dtype_name(matrix));
  std::vector<Item> items;
  std::map<std::pair<int, int>, size_t> expert_group;  // (layer, expert) -> group
  size_t groups = 0;
  bool mxfp4 = false;
  std::set<std::string> quantized_names;
  for (const GGUFTensorInfo& t : mf->shard(0).tensors) {
    const HfNameRule* rule = nullptr;
    int L = -1, E = -1;
    for (const HfNameRule& r : arch->rules)
      if (hf_name_match(r.gguf, t.name, &L, &E)) {
        rule = &r;
        break;
      }
    if (!rule) return make_error("{}: tensor '{}' has no Hugging Face name in the {} table", gguf_path, t.name,
                                 arch->model_type);
    bool made = false;
    std::vector<HfMadeTensor> parts;
    DF_TRY(hf_export_made(*mf, *arch, *rule, t, L, opts.encoding, matrix, &parts, &made));
    if (made) {
      for (HfMadeTensor& h : parts) {
        Item it;
        it.name = h.name;
        it.shape = h.shape;
        if (h.dtype == "F8_E4M3" || h.dtype == "I32") quantized_names.insert(h.name);
        it.made = std::move(h);
        it.group = groups++;
        items.push_back(std::move(it));
      }
      continue;
    }
    const bool stacked = hf_rule_has_expert(*rule);
    if (rule->derive != HfDerive::None) {
      DF_ASSIGN(std::vector<HfExportedTensor> parts, hf_export_derived(*mf, *arch, *rule, L, t.name, matrix));
      for (HfExportedTensor& x : parts) {
        Item it;
        it.name = std::move(x.name);
        it.shape = std::move(x.shape);
        it.literal = std::move(x.bytes);
        it.literal_dtype = std::move(x.dtype);
        it.group = groups++;
        items.push_back(std::move(it));
      }
      continue;
    }
    const bool ct = stacked && t.type == DType::MXFP4;  // compressed-tensors MXFP4 experts
    if (!st_dtype(t.type) && !ct)
      return make_error("{}: tensor '{}' is {}; only F32, F16 and BF16 export (MXFP4 for experts)", gguf_path, t.name,
                        dtype_name(t.type));
    mxfp4 = mxfp4 || ct;
    const int n = stacked ? int(t.ne[t.n_dims - 1]) : 1;
    const uint32_t dims = stacked ? t.n_dims - 1 : t.n_dims;
    Item base;
    base.from = t.type;
    base.dtype = (t.type == DType::F32 && (dims == 1 || rule->f32)) ? matrix : t.type;
    for (int d = int(dims) - 1; d >= 0; --d) base.shape.push_back(t.ne[d]);
    const uint64_t per = t.bytes / uint64_t(n);
    const uint64_t off = mf->tensor(t.name)->file_offset;
    if (ct) base.shape.back() /= 2;  // the codes: two per byte
    for (int e = 0; e < n; ++e) {
      Item it = base;
      it.name = hf_name_expand(rule->hf, L, stacked ? e : -1);
      it.src_off = off + uint64_t(e) * per;
      it.src_bytes = per;
      if (!stacked) {
        it.group = groups++;
      } else {
        auto [g, fresh] = expert_group.try_emplace({L, e}, groups);
        if (fresh) ++groups;
        it.group = g->second;
      }
      if (!ct) {
        items.push_back(std::move(it));
        continue;
      }
      it.part = Item::Part::Mxfp4Codes;
      it.name += "_packed";
      Item sc = it;
      sc.part = Item::Part::Mxfp4Scales;
      sc.name = hf_name_expand(rule->hf, L, e) + "_scale";
      sc.shape.back() = base.shape.back() * 2 / 32;
      items.push_back(std::move(it));
      items.push_back(std::move(sc));
    }
  }
  // Published checkpoints keep no order the importer may rely on: scatter the tensors
  // over the shards in a seeded order, each expert's tensors together (as published:
  // one range request fetches an expert) but the experts out of id order.
  std::vector<size_t> order(groups);
  for (size_t g = 0; g < groups; ++g) order[g] = g;
  uint64_t st = opts.seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = order.size(); i > 1; --i) {
    st ^= st >> 12, st ^= st << 25, st ^= st >> 27;
    std::swap(order[i - 1], order[size_t((st * 0x2545F4914F6CDD1Dull) % i)]);
  }
  std::vector<size_t> rank(groups);
  for (size_t i = 0; i < groups; ++i) rank[order[i]] = i;
  std::stable_sort(items.begin(), items.end(), [&](const Item& a, const Item& b) { return rank[a.group] < rank[b.group]; });
  if (opts.vision_tower) {
    // A tower (and, nested in a container, its projector) to list and skip.
    std::vector<std::string> names = {"vision_tower.blocks.0.attn.qkv.weight"};
    if (!arch->container_type.empty()) names.push_back("mm_projector.proj.0.weight");
    for (const std::string& name : names) {
      Item v;
      v.name = name;
      v.literal_dtype = "F32";
      v.shape = {8, 16};
      v.literal.assign(8 * 16 * 4, '\x3c');
      v.group = groups++;
      items.insert(items.begin(), std::move(v));
    }
  }

  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    return make_error("'{}' exists and is not empty; give an empty or new directory", dir);
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create the directory '{}': {}", dir, ec.message());

  uint64_t total = 0;
  for (const Item& it : items) total += it.bytes();
  const int n_shards = std::max(1, std::min<int>(opts.shards, int(items.size())));
  nlohmann::json weight_map = nlohmann::json::object();
  size_t next = 0;
  uint64_t written = 0;
  for (int s = 0; s < n_shards; ++s) {
    // Contiguous runs of about equal bytes, at least one tensor each.
    const uint64_t goal = total * uint64_t(s + 1) / uint64_t(n_shards);
    size_t end = next + 1;
    uint64_t acc = written + items[next].bytes();
    while (end < items.size() && items.size() - end > size_t(n_shards - 1 - s) &&
           (acc < goal || items[end].group == items[end - 1].group))
      acc += items[end++].bytes();
    if (s == n_shards - 1) end = items.size();
    const std::string file = n_shards == 1 ? "model.safetensors"
                                           : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n_shards);
    nlohmann::ordered_json hdr;
    hdr["__metadata__"] = {{"format", "pt"}};
    uint64_t pos = 0;
    for (size_t i = next; i < end; ++i) {
      const Item& it = items[i];
      hdr[it.name] = {{"dtype", it.st_type()}, {"shape", it.shape}, {"data_offsets", {pos, pos + it.bytes()}}};
      pos += it.bytes();
      weight_map[it.name] = file;
    }
    std::string h = hdr.dump();
    h.append((8 - h.size() % 8) % 8, ' ');  // the data starts 8-aligned, as the reference writer pads
    std::ofstream out(dir + "/" + file, std::ios::binary | std::ios::trunc);
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
    out.write(len, 8);
    out.write(h.data(), std::streamsize(h.size()));
    for (size_t i = next; i < end; ++i) DF_TRY(write_item(mf->source(0), items[i], out));
    out.close();
    if (!out) return make_error("cannot write '{}/{}'", dir, file);
    written = acc;
    next = end;
  }
  if (n_shards > 1)
    DF_TRY(write_json(dir + "/model.safetensors.index.json",
                      {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}));

  nlohmann::json text;
  DF_TRY(arch->gguf_to_config(m, &text));
  text["model_type"] = arch->model_type;
  text["architectures"] = {arch->hf_class};
  text["torch_dtype"] = matrix == DType::BF16 ? "bfloat16" : matrix == DType::F16 ? "float16" : "float32";
  text["tie_word_embeddings"] = mf->tensor("output.weight") == nullptr;
  if (const GGUFValue* tok = m.find("tokenizer.ggml.tokens")) text["vocab_size"] = tok->strings.size();
  const int64_t bos = m.int_or("tokenizer.ggml.bos_token_id", -1), eos = m.int_or("tokenizer.ggml.eos_token_id", -1);
  if (bos >= 0) text["bos_token_id"] = bos;
  if (eos >= 0) text["eos_token_id"] = eos;
  if (opts.encoding != HfEncoding::Plain) {
    if (quantized_names.empty())
      return make_error("{}: the {} table has no weight this encoding quantizes", gguf_path, arch->model_type);
    // compressed-tensors lists the linear layers it left alone.
    std::vector<std::string> plain;
    for (const Item& it : items) {
      const std::string& n = it.name;
      if (it.shape.size() == 2 && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0 &&
          !quantized_names.count(n) && n != "model.embed_tokens.weight" && !hf_tensor_skipped(n))
        plain.push_back(n.substr(0, n.size() - 7));
    }
    std::sort(plain.begin(), plain.end());
    text["quantization_config"] = hf_quantization_config(opts.encoding, plain);
  }
  if (mxfp4 && opts.encoding == HfEncoding::Plain)  // compressed-tensors, as Kimi K3 publishes its routed experts
    text["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "mxfp4-pack-quantized"},
        {"quantization_status", "compressed"},
        {"config_groups",
         {{"group_0",
           {{"format", "mxfp4-pack-quantized"},
            {"targets", {"Linear"}},
            {"weights",
             {{"num_bits", 4}, {"type", "float"}, {"strategy", "group"}, {"group_size", 32}, {"symmetric", true},
              {"scale_dtype", "torch.uint8"}}}}}}},
        {"ignore", {"re:.*(?<!w1|w2|w3)$"}}};
  nlohmann::json config = text;
  if (!arch->container_type.empty() || opts.vision_tower)
    config = {{"model_type", arch->container_type.empty() ? "deltafin_synth_vl" : arch->container_type},
              {"architectures", {arch->container_type.empty() ? "DeltafinSynthForConditionalGeneration"
                                                              : arch->container_class}},
              {"text_config", text},
              {"vision_config", {{"hidden_size", 16}}}};
  // A multimodal checkpoint's is at the top (the synthetic wrapper's); Kimi K3's text
  // config keeps its own, as hf_kimi_k3.sh expects.
  if (opts.vision_tower && arch->container_type.empty() && text.contains("quantization_config")) {
    config["quantization_config"] = text["quantization_config"];
    config["text_config"].erase("quantization_config");
  }
  DF_TRY(write_json(dir + "/config.json", config));
  nlohmann::json gen = {{"do_sample", false}};
  if (bos >= 0) gen["bos_token_id"] = bos;
  if (const GGUFValue* ids = m.find(Vocab::kEogIdsKey); ids != nullptr && ids->is_array() && !ids->ints.empty())
    gen["eos_token_id"] = ids->ints;  // the folder's list, the eos first
  else if (eos >= 0)
    gen["eos_token_id"] = {eos};
  DF_TRY(write_json(dir + "/generation_config.json", gen));
  DF_TRY(write_hf_tokenizer(m, dir, /*tiktoken=*/false));
  if (report) {
    report->shards = n_shards;
    report->tensors = int(items.size());
    report->bytes = total;
  }
  return {};
}

}  // namespace deltafin
