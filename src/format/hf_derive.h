// GGUF tensors computed from Hugging Face tensors (HfDerive in hf_arch.h), both ways:
//   import: the GGUF tensor's directory entry and a reader that computes any byte
//     range of it on demand from the shards (bounded memory: the whole of a 1-D
//     tensor at a time);
//   export (`synth --format hf`): the HF tensors that give the GGUF tensor back.
// Every derived tensor is F32 in the GGUF:
//   Mul     hf * hf2, each widened to F32, the product rounded once to F32 (exact for
//           two BF16 factors), as llama.cpp fuses Kimi K3's res_norm * res_proj;
//   NegExp  -exp(A_log) formed in double and rounded to F32 (within half an ulp).
// (MLA's kv_b_proj split is a view of the shards, not computed: HfPart in hf_arch.h.)
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/hf_arch.h"
#include "format/hf_folder.h"

namespace deltafin {

class ModelFile;

class HfDerivedReader {
 public:
  virtual ~HfDerivedReader() = default;
  // Bytes [off, off + n) of the GGUF tensor's data.
  virtual Status read(uint64_t off, char* dst, size_t n) = 0;
};

struct HfDerivedPlan {
  GGUFTensorInfo info;               // name, n_dims, ne, type (F32)
  std::vector<std::string> inputs;   // the HF tensors it reads
  std::unique_ptr<HfDerivedReader> reader;
};

// The GGUF tensor rule `r` gives at `layer` (-1: none). Missing inputs, wrong dtypes
// or shapes are errors naming the HF tensor; a missing input of an optional rule
// returns an empty plan (info.name empty).
Result<HfDerivedPlan> hf_plan_derived(const HfFolder& f, const HfNameRule& r, int layer);

// One HF tensor written by the exporter.
struct HfExportedTensor {
  std::string name;
  std::string dtype;            // "F32", "BF16", "F16"
  std::vector<int64_t> shape;   // outermost first
  std::string bytes;
};

// The HF tensors that give back GGUF tensor `gguf_name` (matched by rule `r` at
// `layer`) of `mf`, matrices in `matrix` (F32, F16 or BF16). NegExp needs a nonzero ssm_a: a
// checkpoint stores A_log, so the folder holds A = -|a| (a synthetic model may
// draw a positive a).
Result<std::vector<HfExportedTensor>> hf_export_derived(ModelFile& mf, const HfArch& arch, const HfNameRule& r,
                                                        int layer, const std::string& gguf_name, DType matrix);

}  // namespace deltafin
