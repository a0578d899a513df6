// A Hugging Face folder seen as one GGUF file, without converting it: a ByteSource
// whose first bytes are a GGUF header synthesized in memory (metadata from
// config.json and the tokenizer files, the tensor directory with llama.cpp's names,
// types and shapes) and whose tensor data is produced on read_at() from recipes over
// the safetensors shards:
//   copy      a byte range as it is (a BF16 matrix stays BF16 byte for byte);
//   stack     the per-expert tensors of a layer into one [.., .., n_expert] tensor,
//             each expert one piece wherever it lies in whichever shard;
//   widen     BF16/F16 -> F32 for 1-D tensors and the router, as llama.cpp's
//             converter stores them (exact);
//   mxfp4     compressed-tensors MXFP4 codes and scales reshuffled into GGUF MXFP4
//             blocks, bit for bit (format/hf_mxfp4.h);
//   derived   a tensor computed from others (fused products, -exp(A_log), a split
//             kv_b_proj: format/hf_derive.h);
//   decode    FP8 E4M3 codes with their 128x128 block scales, or INT4 pack-quantized
//             codes with their group scales, -> BF16 as llama.cpp's converter widens
//             them (format/hf_recipes.h), a few rows at a time;
//   split     MLA's kv_b_proj into attn_k_b (each head's block transposed) and
//             attn_v_b (hf_arch.h HfPart), in whichever of the encodings above;
//   permute   Llama/Mixtral q_proj and k_proj rows, each head's from the rotate-half
//             RoPE layout to adjacent pairs (HfPart::RopeQ/RopeK), likewise.
// Any sub-range can be read (the expert store reads single expert slices), so
// ModelFile, ExpertIndex, the store, caches and speculation work on it unchanged,
// and `convert` is this source streamed to a file: the converted GGUF is byte for
// byte what `run DIR` reads.
//
// Thread-safe for concurrent read_at calls (the shards are).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/hf_arch.h"
#include "format/hf_derive.h"
#include "format/hf_folder.h"
#include "format/model_file.h"

namespace deltafin {

class HfGgufSource final : public ByteSource {
 public:
  // Builds the GGUF view of an inventory (errors name the folder and the tensor).
  static Result<std::unique_ptr<HfGgufSource>> build(std::shared_ptr<HfFolder> folder);

  uint64_t size() const override { return size_; }
  Status read_at(uint64_t offset, void* dst, size_t n) override;
  const std::string& name() const override { return name_; }

  const HfFolder& folder() const { return *folder_; }
  const HfArch& arch() const { return *arch_; }
  // The synthesized header (metadata and tensor directory, data offsets set).
  const GGUFFile& meta() const { return meta_; }
  uint64_t header_size() const { return header_.size(); }
  // Where [off, off + n) of this view (an expert's slice) lies in a shard when it is
  // the n bytes at (shard, offset): unchanged, or, for one whole compressed-tensors
  // MXFP4 tensor whose codes and scales lie side by side, the same bytes reshuffled
  // (mxfp4: codes at codes_at and scales at scales_at in the span; unpack() makes the
  // view's bytes). False otherwise: the slice has no such span (it must be read).
  struct ShardSpan {
    int shard = 0;
    uint64_t offset = 0;
    bool mxfp4 = false;
    uint64_t codes_at = 0, scales_at = 0;
  };
  bool locate(uint64_t off, uint64_t n, ShardSpan* at) const;
  // The view's n bytes (`dst`) from the span's n bytes (`src`) as fetched.
  static void unpack(const ShardSpan& at, const char* src, uint64_t n, char* dst);

  // Mxfp4Ct: compressed-tensors MXFP4 codes at (shard, in_off) and E8M0 scales at
  // (shard2, in_off2) reshuffled into GGUF MXFP4 blocks. Derived: computed by
  // derived_[aux] (format/hf_derive.h). Fp8 and Int4 read two inputs (the codes and
  // their scales) and widen them to BF16 as llama.cpp's converter does
  // (format/hf_recipes.h).
  enum class Op : uint8_t { Copy, WidenBF16, WidenF16, Mxfp4Ct, Derived, Fp8, Int4 };
  // One contiguous run of the virtual file's tensor data and where it comes from.
  struct Piece {
    uint64_t out_off = 0, out_len = 0;  // in the virtual file
    int shard = 0;
    uint64_t in_off = 0;                // in the shard
    Op op = Op::Copy;
    int shard2 = 0;
    uint64_t in_off2 = 0;
    size_t aux = 0;
    // Decoded pieces (Fp8, Int4, transposed or rope-permuted): rows [row0, row0 +
    // rows) of a matrix of `cols` columns whose data starts at in_off and whose scales
    // start at scale_off in shard scale_shard; `elem` output bytes per element;
    // transposed: the output is that block transposed (cols rows of `rows` elements);
    // rope_pairs: the block is one head, its row r the input's hf_rope_source_row(r, rows).
    int scale_shard = 0;
    uint64_t scale_off = 0;
    uint32_t row0 = 0, rows = 0, cols = 0;
    uint8_t elem = 2;
    bool transpose = false;
    // Transposed only: the decoded 16-bit elements written as F32 (1: BF16, 2: F16),
    // for a tensor stored F32 whatever the folder's dtype (HfNameRule::f32).
    uint8_t widen = 0;
    bool rope_pairs = false;
    bool decoded() const { return op == Op::Fp8 || op == Op::Int4 || transpose || rope_pairs; }
  };

 private:
  Status read_piece(const Piece& p, uint64_t off, char* dst, size_t n);
  std::shared_ptr<HfFolder> folder_;
  const HfArch* arch_ = nullptr;
  std::string name_;
  GGUFFile meta_;
  std::string header_;
  std::vector<Piece> pieces_;  // by out_off
  std::vector<std::unique_ptr<HfDerivedReader>> derived_;
  uint64_t size_ = 0;
};

// Opens the Hugging Face folder at `location`, reading its files through `files`
// (relative names), as a ModelFile.
Result<std::unique_ptr<ModelFile>> open_hf_model(const std::string& location, const SourceOpener& files);
// A local folder (hf_local_opener).
Result<std::unique_ptr<ModelFile>> open_local_hf_model(const std::string& dir);
// The HF view behind a ModelFile opened by open_hf_model (null for a GGUF).
const HfGgufSource* hf_source_of(ModelFile& file);

}  // namespace deltafin
