// One expert in the disk cache: a file holding a 128-byte header (key, where each
// part lives in the model file, an XXH3-64 checksum of the payload and one of the
// header) followed by the gate, up and down slices back to back. Files appear
// only by atomic rename, and a reader checks the checksum on every read: a corrupt
// entry is reported as such and never used.
#pragma once
#include <cstdint>
#include <string>

#include "core/result.h"
#include "store/expert_index.h"

namespace deltafin {

inline constexpr uint64_t kEntryHeaderBytes = 128;

// The header for `slices` of (layer, expert) whose payload hashes to `payload_hash`.
std::string encode_entry_header(int layer, int expert, const ExpertSlices& slices, uint64_t payload_hash);

enum class EntryState { Ok, Missing, Corrupt };
struct EntryRead {
  EntryState state = EntryState::Missing;
  std::string why;  // for Corrupt
};

// Reads the entry at `path` for (layer, expert), checking that it describes
// `slices` and that its checksum holds; part p lands in dst[p] (slices.part[p].bytes
// bytes; null dst: check only). On Corrupt the destinations hold garbage.
EntryRead read_entry(const std::string& path, int layer, int expert, const ExpertSlices& slices,
                     char* const dst[kExpertParts]);

// Checks an entry on its own (no model index): header, size, checksum. Fills the
// key it names.
EntryRead check_entry_file(const std::string& path, int* layer, int* expert, uint64_t* payload_bytes);

// XXH3-64 of parts in order.
uint64_t hash_parts(const char* const parts[kExpertParts], const uint64_t bytes[kExpertParts]);

}  // namespace deltafin
