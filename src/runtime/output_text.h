// Generated token ids -> the text to show: detokenizes incrementally (never splitting
// a UTF-8 sequence), cuts the text at the first stop string (which is not shown) and
// holds back the tail that could still become the start of a stop string. Owned by
// each sequence's Decoder (runtime/decoder.h), so run, chat and the server emit
// exactly the same text.
//
// Single-threaded state; the tokenizer must outlive it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deltafin {

class OutputText {
 public:
  // shown: control tokens whose text is shown (StreamDecoder).
  OutputText(const Tokenizer& tok, std::vector<std::string> stop, std::vector<int32_t> shown = {});
  // Adds a generated token; returns the text that can be shown now (maybe empty).
  // After a stop string appears, stopped() is true and the text before it has been
  // returned.
  std::string push(int32_t id);
  // The held-back rest at the end of generation ("" after a stop).
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& stop_found() const { return stop_found_; }  // the stop string that ended it
  // Bytes the detokenizer has produced so far (including any cut by a stop string)
  // and bytes returned by push/finish: the text shown is the first shown_bytes() of
  // what was produced.
  size_t decoded_bytes() const { return decoded_; }
  size_t shown_bytes() const { return shown_; }

 private:
  StreamDecoder dec_;
  std::vector<std::string> stop_;
  size_t max_stop_ = 0;
  std::string held_;
  bool stopped_ = false;
  std::string stop_found_;
  size_t decoded_ = 0, shown_ = 0;
};

}  // namespace deltafin
