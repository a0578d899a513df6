// Byte fragments of one GGUF (format/fragments.h, io/concat_source.h): the names
// that make a set, reads across fragment boundaries, the checks on a set (missing,
// empty, short parts named), and cutting a file into fragments that concatenate back
// to it. The end-to-end check (logits, streaming, HTTP) is tests/e2e/fragments.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "format/fragments.h"
#include "format/model_file.h"
#include "io/concat_source.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

std::string bytes(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(g());
  return s;
}

}  // namespace

TEST(Fragments, NamesMakeASet) {
  std::string out;
  int k = 0, n = 0;
  ASSERT_TRUE(fragment_name("d/m.gguf.part01of12", 7, &out, &k, &n));
  EXPECT_EQ(out, "d/m.gguf.part07of12");
  EXPECT_EQ(k, 1);
  EXPECT_EQ(n, 12);
  EXPECT_FALSE(fragment_name("d/m.gguf", 2, &out));
  EXPECT_FALSE(fragment_name("d/m-00001-of-00003.gguf", 2, &out));
  EXPECT_EQ(fragment_path("x.gguf", 3, 12), "x.gguf.part03of12");
  EXPECT_EQ(fragment_path("x.gguf", 3, 4), "x.gguf.part3of4");

  auto one = fragment_list("m.gguf");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"m.gguf"});
  auto set = fragment_list("http://h/m.gguf.part1of3");
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(*set, (std::vector<std::string>{"http://h/m.gguf.part1of3", "http://h/m.gguf.part2of3",
                                            "http://h/m.gguf.part3of3"}));
  auto list = fragment_list("a\nb\nc");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(fragments_display(*list), "a (+2 more fragments)");
  EXPECT_EQ(first_fragment("a\nb"), "a");

  auto second = fragment_list("m.gguf.part2of3");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("give the first part, m.gguf.part1of3"), std::string::npos)
      << second.error().message;
  auto swapped = fragment_list("m.gguf.part1of3\nm.gguf.part3of3\nm.gguf.part2of3");
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.error().message.find("fragment 2 of 3 is given as m.gguf.part3of3"), std::string::npos);
  EXPECT_FALSE(fragment_list("m.gguf.part1of3\nm.gguf.part2of3").ok());
  EXPECT_FALSE(fragment_list("a\n\nc").ok());
}

TEST(Fragments, ConcatSourceReadsAcrossBoundaries) {
  const std::string whole = bytes(1000, 1);
  // Fragments of 300, 0 (an empty one is passed over), 450, 250 bytes.
  const size_t cuts[] = {0, 300, 300, 750, 1000};
  std::vector<std::unique_ptr<ByteSource>> parts;
  for (int k = 0; k < 4; ++k)
    parts.push_back(memory_source(whole.substr(cuts[k], cuts[k + 1] - cuts[k]), "f" + std::to_string(k)));
  ConcatSource c(std::move(parts), "whole");
  EXPECT_EQ(c.size(), 1000u);
  EXPECT_EQ(c.part_at(0), 0);
  EXPECT_EQ(c.part_at(299), 0);
  EXPECT_EQ(c.part_at(300), 2);
  EXPECT_EQ(c.part_at(999), 3);
  std::mt19937 g(2);
  for (int t = 0; t < 500; ++t) {
    const size_t off = g() % 1000, n = g() % (1000 - off + 1);
    std::string got(n, '\0');
    ASSERT_TRUE(c.read_at(off, got.data(), n).ok());
    EXPECT_EQ(got, whole.substr(off, n)) << off << " " << n;
  }
  char b[2];
  EXPECT_FALSE(c.read_at(999, b, 2).ok());
}

TEST(Fragments, SetChecksNameThePart) {
  auto opener = [](const std::string& name) -> Result<std::unique_ptr<ByteSource>> {
    if (name == "gone") return make_error("cannot open '{}': No such file", name);
    if (name == "empty") return memory_source("", name);
    if (name == "short") return memory_source(std::string(50, 'x'), name);
    return memory_source(std::string(100, 'y'), name);
  };
  auto ok = open_fragments({"a", "b", "short"}, opener);  // only the last may be shorter
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->size(), 250u);
  auto missing = open_fragments({"a", "gone", "c"}, opener);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("part 2 of 3 of the model's fragments (gone) is missing"), std::string::npos);
  auto empty = open_fragments({"a", "b", "empty"}, opener);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("part 3 of 3 of the model's fragments (empty) is empty"), std::string::npos);
  auto shrt = open_fragments({"a", "short", "c"}, opener);
  ASSERT_FALSE(shrt.ok());
  EXPECT_NE(shrt.error().message.find("part 2 of 3 of the model's fragments (short) is short: 50 bytes"),
            std::string::npos);
}

TEST(Fragments, CutConcatenatesBack) {
  const fs::path d = fs::path(::testing::TempDir()) / ("deltafin_fragments_" + std::to_string(::getpid()));
  fs::create_directories(d);
  const std::string whole = bytes(10 * 4096 + 123, 3);
  for (uint64_t align : {uint64_t(4096), uint64_t(1)}) {
    const std::string path = (d / "w.bin").string();
    std::ofstream(path, std::ios::binary) << whole;
    std::vector<std::string> names;
    ASSERT_TRUE(cut_into_fragments(path, 3, align, &names).ok());
    EXPECT_FALSE(fs::exists(path));
    ASSERT_EQ(names.size(), 3u);
    EXPECT_EQ(names[0], path + ".part1of3");
    if (align == 4096) EXPECT_EQ(fs::file_size(names[0]), 16384u);  // ceil(41083 / 3) rounded up
    auto src = local_file_opener()(names[0]);  // the first part's name names the set
    ASSERT_TRUE(src.ok()) << src.error().message;
    std::string got(whole.size(), '\0');
    ASSERT_EQ((*src)->size(), whole.size());
    ASSERT_TRUE((*src)->read_at(0, got.data(), got.size()).ok());
    EXPECT_EQ(got, whole);
    for (const std::string& n : names) fs::remove(n);
  }
  // Five parts of a multiple of 4096 bytes (12288 each) leave the last empty.
  const std::string path = (d / "w.bin").string();
  std::ofstream(path, std::ios::binary) << whole;
  EXPECT_FALSE(cut_into_fragments(path, 5, 4096, nullptr).ok());
  fs::remove_all(d);
}
