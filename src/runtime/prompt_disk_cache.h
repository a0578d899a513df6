// The prompt cache's disk tier: sequence states (SeqState::save) with the tokens
// they hold, one file per state in a directory of one model, so that a conversation
// or a long system prompt evaluated once is not evaluated again after the RAM tier
// dropped it, or after the server restarted.
//
// A file: magic and format version, the model's identity, the tokens, the state's
// bytes, and an XXH3-64 of all that. It is written to a temporary name and renamed,
// so the directory never holds a partial entry; one that fails its checksum or does
// not fit the model's states is removed when read. The files stay within a byte
// budget, the least recently used (file time, refreshed on every use) removed first.
// Files of another model (identity) are left alone and not counted.
//
// Not thread-safe: one owner (the scheduler's thread).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model.h"

namespace deltafin {

struct PromptDiskStats {
  int entries = 0;
  uint64_t bytes = 0;
  uint64_t writes = 0, hits = 0, evictions = 0, failures = 0;
};

class PromptDiskCache {
 public:
  // Opens `dir` (created if missing) for states of the model `model_id`, indexing the
  // entries already there (their tokens; stale temporary files are removed) and
  // trimming them to `budget_bytes`. An error when the directory cannot be used.
  static Result<std::unique_ptr<PromptDiskCache>> open(const std::string& dir, const std::string& model_id,
                                                       uint64_t budget_bytes);

  // Stores `state`, which holds `tokens`. Nothing is written when an entry holds the
  // same tokens (its time is refreshed). A failed write (a full disk) leaves no file
  // behind and is returned as an error; the other entries stay as they were.
  Status put(const std::vector<int32_t>& tokens, const SeqState& state);

  // The entry whose tokens share the longest prefix with `prompt`, counting at most
  // `most` tokens: its index and (in *len) that length; -1 when none shares any.
  int best(const std::vector<int32_t>& prompt, size_t most, size_t* len) const;

  // Loads entry i into `state` (a new state of the model) and its tokens into
  // *tokens. An entry that is damaged or does not fit is removed and reported.
  Status load(int i, SeqState& state, std::vector<int32_t>* tokens);

  PromptDiskStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    std::string path;
    std::vector<int32_t> tokens;
    uint64_t bytes = 0;
    int64_t used_ns = 0;  // the file's modification time
  };
  PromptDiskCache() = default;
  void remove(size_t i);
  void trim(uint64_t room);  // to budget_ - room, oldest first

  std::string dir_, model_id_;
  uint64_t budget_ = 0;
  std::vector<Entry> entries_;
  PromptDiskStats stats_;
};

}  // namespace deltafin
