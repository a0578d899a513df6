// A GGUF published as raw byte fragments: one file cut into parts meant to be
// concatenated (`split -b`; names like model.gguf.part1of3), as opposed to
// llama.cpp's split models (model_file.h), whose parts are GGUF files each. The parts
// are read in place as one source (io/concat_source.h), locally and over HTTP.
//
// A model location names fragments in two ways: a list (the command line's repeated
// -m, joined with kFragmentSeparator), or the name of the first of a set that follows
// NAME.partKofN (K from 1, any zero padding: part01of12), which names the others.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/byte_source.h"

namespace deltafin {

// Joins the locations of repeated -m options (CLI11's MultiOptionPolicy::Join).
inline constexpr char kFragmentSeparator = '\n';

// "dir/NAME.part02of12" for part 2 of the set `path` belongs to (same zero padding);
// false if the name does not follow NAME.partKofN. `part`/`count` (may be null):
// the K and N of `path` itself.
bool fragment_name(const std::string& path, int part, std::string* out, int* path_part = nullptr,
                   int* count = nullptr);

// The fragments a location names, in order: the entries of a list, or every part of
// a NAME.part1ofN set; any other location alone. Errors: an empty entry, NAME.partKofN
// alone with K > 1 (the first part must be named), a list whose NAME.partKofN names
// are not 1..N of one set in order.
Result<std::vector<std::string>> fragment_list(const std::string& location);

// The first entry of a location ("" if empty), what says whether it is remote.
std::string first_fragment(const std::string& location);

// What messages call a set: "FIRST (+N more fragments)", the location itself if one.
std::string fragments_display(const std::vector<std::string>& parts);
std::string location_display(const std::string& location);

using FragmentOpener = std::function<Result<std::unique_ptr<ByteSource>>(const std::string&)>;

// Opens each fragment and concatenates them (a ConcatSource). A part that cannot be
// opened is an error naming it ("part 2 of 3 (PATH) is missing or unreadable"); so
// is an empty part, or one before the last that is shorter than the first (parts
// are cut to one size, only the last may be shorter).
Result<std::unique_ptr<ByteSource>> open_fragments(const std::vector<std::string>& parts, const FragmentOpener& open);

// A sentence for a model read from fragments that turns out too short or malformed:
// each part with its size and where it starts ("" if `src` is not a ConcatSource).
std::string fragments_hint(ByteSource& src);

}  // namespace deltafin

namespace deltafin {

// "PATH.partKofN" (K padded to N's digits): fragment k of the n that cut_into_fragments
// makes of `whole`.
std::string fragment_path(const std::string& whole, int k, int n);

// Cuts the file at `path` into `n` byte fragments PATH.part1ofN ... (K padded to N's
// digits), each but the last of the same size, a multiple of `align` bytes (as
// `split -n`; align 4096 keeps the cuts on block boundaries), then removes `path`.
// `out` (may be null): the fragments' paths.
Status cut_into_fragments(const std::string& path, int n, uint64_t align, std::vector<std::string>* out);

}  // namespace deltafin
