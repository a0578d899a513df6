#include "format/fragments.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "io/concat_source.h"

namespace deltafin {

namespace {

const std::regex& fragment_re() {
  static const std::regex re(R"((.*\.part)(\d+)of(\d+))");
  return re;
}

}  // namespace

bool fragment_name(const std::string& path, int part, std::string* out, int* path_part, int* count) {
  std::smatch m;
  if (!std::regex_match(path, m, fragment_re())) return false;
  const std::string k = m[2].str(), n = m[3].str();
  if (k.size() > 6 || n.size() > 6) return false;
  if (path_part) *path_part = std::stoi(k);
  if (count) *count = std::stoi(n);
  std::string num = std::to_string(part);
  if (num.size() < k.size()) num.insert(0, k.size() - num.size(), '0');
  if (out) *out = m[1].str() + num + "of" + n;
  return true;
}

Result<std::vector<std::string>> fragment_list(const std::string& location) {
  std::vector<std::string> list;
  size_t at = 0;
  for (;;) {
    const size_t end = location.find(kFragmentSeparator, at);
    list.push_back(location.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].empty()) return make_error("model fragment {} of {} is given as an empty path", i + 1, list.size());
  int k = 0, n = 0;
  if (list.size() == 1) {
    if (!fragment_name(list[0], 1, nullptr, &k, &n) || n < 2) return list;
    if (k != 1) {
      std::string first;
      fragment_name(list[0], 1, &first);
      return make_error("{} is part {} of {} of a model cut into fragments; give the first part, {} (the others are "
                        "found by their names), or every part in order with -m PART1 -m PART2 ...",
                        list[0], k, n, first);
    }
    for (int p = 2; p <= n; ++p) {
      list.emplace_back();
      fragment_name(list[0], p, &list.back());
    }
    return list;
  }
  // A list of NAME.partKofN names: the whole set, in order.
  if (fragment_name(list[0], 1, nullptr, &k, &n)) {
    if (int(list.size()) != n)
      return make_error("{} fragments given, but their names say {} parts ({} ... {})", list.size(), n, list[0],
                        list.back());
    for (int p = 1; p <= n; ++p) {
      std::string want;
      fragment_name(list[0], p, &want);
      if (list[size_t(p) - 1] != want)
        return make_error("fragment {} of {} is given as {}, but the set's name says it is {} (give the parts in "
                          "order: -m PART1 -m PART2 ...)", p, n, list[size_t(p) - 1], want);
    }
  }
  return list;
}

std::string first_fragment(const std::string& location) { return location.substr(0, location.find(kFragmentSeparator)); }

std::string fragments_display(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  return fmt::format("{} (+{} more fragments)", parts.empty() ? "" : parts[0], parts.size() - 1);
}

std::string location_display(const std::string& location) {
  auto list = fragment_list(location);
  if (!list.ok() || list->size() == 1) return location;
  return fragments_display(*list);
}

Result<std::unique_ptr<ByteSource>> open_fragments(const std::vector<std::string>& parts, const FragmentOpener& open) {
  std::vector<std::unique_ptr<ByteSource>> srcs;
  const size_t n = parts.size();
  for (size_t i = 0; i < n; ++i) {
    auto s = open(parts[i]);
    if (!s.ok())
      return make_error("part {} of {} of the model's fragments ({}) is missing or unreadable: {}", i + 1, n,
                        parts[i], s.error().message);
    if ((*s)->size() == 0) return make_error("part {} of {} of the model's fragments ({}) is empty", i + 1, n, parts[i]);
    if (i > 0 && i + 1 < n && (*s)->size() < srcs[0]->size())
      return make_error("part {} of {} of the model's fragments ({}) is short: {} bytes where part 1 ({}) has {} (only "
                        "the last part may be shorter; a truncated download?)",
                        i + 1, n, parts[i], (*s)->size(), parts[0], srcs[0]->size());
    srcs.push_back(std::move(*s));
  }
  return std::unique_ptr<ByteSource>(new ConcatSource(std::move(srcs), fragments_display(parts)));
}

std::string fragments_hint(ByteSource& src) {
  auto* c = dynamic_cast<ConcatSource*>(&src);
  if (c == nullptr) return "";
  std::string s = fmt::format("the model is read from {} fragments together {} bytes:", c->count(), c->size());
  for (int k = 0; k < c->count(); ++k)
    s += fmt::format(" part {} {} ({} bytes at {}){}", k + 1, c->part(k).name(), c->part(k).size(), c->start(k),
                     k + 1 < c->count() ? ";" : "");
  return s + ". Is the last part short or a part missing or out of order?";
}

}  // namespace deltafin

namespace deltafin {

std::string fragment_path(const std::string& whole, int k, int n) {
  const std::string w = std::to_string(n), num = std::to_string(k);
  return fmt::format("{}.part{}{}of{}", whole, std::string(w.size() > num.size() ? w.size() - num.size() : 0, '0'), num, w);
}

Status cut_into_fragments(const std::string& path, int n, uint64_t align, std::vector<std::string>* out) {
  if (n < 2 || n > 9999) return make_error("{}: {} fragments asked for (2..9999)", path, n);
  if (align == 0) align = 1;
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open '{}' to cut it into fragments", path);
  in.seekg(0, std::ios::end);
  const uint64_t total = uint64_t(in.tellg());
  in.seekg(0);
  const uint64_t per = ((total + uint64_t(n) - 1) / uint64_t(n) + align - 1) / align * align;
  if (per * uint64_t(n - 1) >= total)
    return make_error("{}: {} bytes cannot be cut into {} fragments of a multiple of {} bytes", path, total, n, align);
  std::vector<std::string> names;
  std::vector<char> buf(size_t(1) << 20);
  for (int k = 1; k <= n; ++k) {
    names.push_back(fragment_path(path, k, n));
    std::ofstream o(names.back(), std::ios::binary | std::ios::trunc);
    if (!o) return make_error("cannot create '{}'", names.back());
    uint64_t left = k < n ? per : total - per * uint64_t(n - 1);
    while (left > 0) {
      const size_t take = size_t(std::min<uint64_t>(left, buf.size()));
      if (!in.read(buf.data(), std::streamsize(take))) return make_error("{}: read failed while cutting it", path);
      if (!o.write(buf.data(), std::streamsize(take))) return make_error("{}: write failed", names.back());
      left -= take;
    }
    o.close();
    if (!o) return make_error("{}: write failed", names.back());
  }
  in.close();
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) return make_error("cannot remove '{}' after cutting it: {}", path, ec.message());
  if (out) *out = std::move(names);
  return {};
}

}  // namespace deltafin
