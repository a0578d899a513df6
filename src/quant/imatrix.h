// llama.cpp importance matrices (llama-imatrix's output), read for quantize --imatrix.
// For every matrix the model multiplies, the file holds the mean of x_j^2 over the
// activations x that reached input column j while llama-imatrix ran text through
// the model: how much an error in column j of a weight row costs. Low-bit quantizers
// weigh each value's error by it (kernels/importance.h).
//
// Two formats, told apart by the first four bytes:
//  - GGUF (llama.cpp since mid 2025; general.type = "imatrix"): per matrix NAME an F32
//    tensor NAME.in_sum2 of ne = [n_per_row, n_mat] (sums of x^2, one row per expert of
//    a merged 3-D expert tensor, else one) and NAME.counts of ne = [1, n_mat] (the
//    activations summed); importance = in_sum2 / counts (a count of 0, an expert that
//    never ran: importance 1 for every column, as llama-quantize does). NAME.in_sum
//    (plain sums, for statistics) is ignored.
//  - the legacy .dat: int32 n_entries; per entry int32 name length, the name's bytes,
//    int32 ncall, int32 nval, float values[nval] (mean x^2 times ncall; a merged expert
//    tensor's experts one after another); then, optionally, int32 the number of chunks
//    and int32 length + bytes of the dataset's name. importance = values / ncall
//    (ncall 0: values as they are). All little-endian.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/byte_source.h"

namespace deltafin {

struct ImatrixEntry {
  // n_mat vectors of values.size() / n_mat, one per matrix (expert) of the tensor.
  std::vector<float> values;
  // The matrices the file states (GGUF); 0 when it does not (.dat: the tensor's shape
  // tells how its values split).
  int64_t n_mat = 0;
};

struct Imatrix {
  std::string path;  // for messages
  bool legacy = false;
  std::map<std::string, ImatrixEntry> entries;  // by the model tensor's name
  int64_t chunk_count = -1;                      // -1: not recorded
  std::vector<std::string> datasets;

  // The entry of a model tensor whose rows are n_per_row long, n_mat matrices of
  // them (ne[2] * ne[3]; 1 for a 2-D tensor): nullptr if the file has none (the
  // tensor then quantizes unweighted), an error naming the file and entry if its
  // size does not fit (an imatrix of another model). Row r of matrix m weighs by
  // values[m * n_per_row ...].
  Result<const ImatrixEntry*> for_tensor(const std::string& name, int64_t n_per_row, int64_t n_mat) const;
};

// Reads either format. Errors name the file and, where one is at fault, the entry:
// truncated data, sizes that disagree, NaN, infinite or negative values, a GGUF
// that is not an imatrix, and bytes that are neither format.
Result<Imatrix> parse_imatrix(ByteSource& src);
Result<Imatrix> load_imatrix(const std::string& path);

}  // namespace deltafin
