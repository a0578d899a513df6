// Where an expert's bytes lie in its RAM cache slot. Each part (gate/up/down) is
// read as the aligned superset of its slice (so that O_DIRECT can read it straight
// into the slot) and starts on a kDirectAlign boundary; the part's view begins
// where the slice's first byte lands. The RAM cache, which hands out the views,
// and the tiers, which fill the slots, agree through this one function.
#pragma once
#include <cstdint>

#include "io/direct_file.h"
#include "store/expert_index.h"

namespace deltafin {

struct PartLayout {
  uint64_t file_off = 0, len = 0;  // the aligned request
  uint64_t slot_pos = 0;           // where the request lands in the slot
  uint64_t view_pos = 0;           // where the slice's first byte lands
};

// Fills out[p] for every part (absent parts: all zero); returns the bytes the
// expert takes in a slot (the sum of the aligned requests).
inline uint64_t slot_layout(const ExpertSlices& s, PartLayout out[kExpertParts]) {
  uint64_t pos = 0;
  for (int p = 0; p < kExpertParts; ++p) {
    const ExpertSlice& sl = s.part[p];
    out[p] = {};
    if (sl.bytes == 0) continue;
    out[p].file_off = align_down(sl.offset, kDirectAlign);
    out[p].len = align_up(sl.offset + sl.bytes, kDirectAlign) - out[p].file_off;
    out[p].slot_pos = pos;
    out[p].view_pos = pos + (sl.offset - out[p].file_off);
    pos += out[p].len;
  }
  return pos;
}

}  // namespace deltafin
