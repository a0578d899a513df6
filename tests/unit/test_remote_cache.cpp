// Disk cache pieces on real files: model locations, expert entries (checksum,
// corruption, wrong key, truncation), the core file's journal (resume after a torn
// line, completion, verification), cross-process key locks (fork), atomic writes,
// eviction to a budget by usage counts.
// The network and whole-model paths are tested end to end against nginx
// (tests/e2e/remote_*.sh).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "cache/cache_admin.h"
#include "cache/core_file.h"
#include "cache/expert_entry.h"
#include "cache/fs.h"
#include "io/http_client.h"
#include "io/http_source.h"
#include "remote/location.h"

using namespace deltafin;

namespace {

std::string fresh_dir(const char* name) {
  std::string d = ::testing::TempDir() + "deltafin_remote_" + name + "_" + std::to_string(::getpid());
  (void)std::system(("rm -rf '" + d + "'").c_str());
  EXPECT_TRUE(make_dirs(d).ok());
  return d;
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng());
  return s;
}

void flip_byte(const std::string& path, long at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(at);
  f.write(&c, 1);
}

}  // namespace

TEST(Location, ParsesEveryForm) {
  auto l = parse_model_location("models/x.gguf", {});
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->remote());
  l = parse_model_location("https://example.org/a/b-00001-of-00002.gguf", {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->kind, ModelLocation::Kind::Url);
  Environment env;
  env.hf_endpoint = "http://127.0.0.1:9/";
  l = parse_model_location("hf://owner/repo@v1.0/sub/dir/m.gguf", env);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->repo, "owner/repo");
  EXPECT_EQ(l->revision, "v1.0");
  EXPECT_EQ(l->file, "sub/dir/m.gguf");
  EXPECT_EQ(l->url, "http://127.0.0.1:9/owner/repo/resolve/v1.0/sub/dir/m.gguf");
  l = parse_model_location("hf://owner/repo/m.gguf", {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->revision, "main");
  EXPECT_EQ(l->url, "https://huggingface.co/owner/repo/resolve/main/m.gguf");
  // A repository alone (its only GGUF) or with :QUANT is chosen later from its listing.
  l = parse_model_location("hf://owner/repo", {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->repo, "owner/repo");
  EXPECT_TRUE(l->file.empty());
  EXPECT_TRUE(l->quant.empty());
  for (const char* bad : {"hf://owner", "hf://owner/repo@/m.gguf", "hf://o/r/../m.gguf", "https://", "http://host"}) {
    auto r = parse_model_location(bad, {});
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
    }
  }
  EXPECT_EQ(redact_url("https://u:p@h.org/x.gguf?sig=secret"), "https://h.org/x.gguf");
}

TEST(ExpertEntry, RoundTripAndEveryCorruptionIsCaught) {
  const std::string dir = fresh_dir("entry");
  ExpertSlices sl;
  const std::string parts[3] = {random_bytes(5000, 1), random_bytes(7000, 2), random_bytes(6000, 3)};
  for (int p = 0; p < 3; ++p) sl.part[p] = {0, uint64_t(100000 * (p + 1)), parts[p].size(), {}};
  const char* ptr[3] = {parts[0].data(), parts[1].data(), parts[2].data()};
  const uint64_t bytes[3] = {parts[0].size(), parts[1].size(), parts[2].size()};
  const std::string header = encode_entry_header(4, 9, sl, hash_parts(ptr, bytes));
  const std::string path = dir + "/4-9";
  auto write = [&] { ASSERT_TRUE(write_file_atomic(path, dir, {header, parts[0], parts[1], parts[2]}).ok()); };
  write();
  std::string out[3] = {std::string(5000, 0), std::string(7000, 0), std::string(6000, 0)};
  char* dst[3] = {out[0].data(), out[1].data(), out[2].data()};
  EntryRead r = read_entry(path, 4, 9, sl, dst);
  ASSERT_EQ(r.state, EntryState::Ok) << r.why;
  for (int p = 0; p < 3; ++p) EXPECT_EQ(out[p], parts[p]);
  EXPECT_EQ(read_entry(path, 4, 8, sl, dst).state, EntryState::Corrupt);  // another expert's file
  ExpertSlices moved = sl;
  moved.part[1].offset += 1;
  EXPECT_EQ(read_entry(path, 4, 9, moved, dst).state, EntryState::Corrupt);  // another revision's layout
  flip_byte(path, long(kEntryHeaderBytes + 6000));
  r = read_entry(path, 4, 9, sl, dst);
  EXPECT_EQ(r.state, EntryState::Corrupt);
  EXPECT_NE(r.why.find("checksum"), std::string::npos);
  write();
  flip_byte(path, 20);  // the header
  EXPECT_EQ(read_entry(path, 4, 9, sl, dst).state, EntryState::Corrupt);
  write();
  ASSERT_EQ(::truncate(path.c_str(), off_t(kEntryHeaderBytes + 100)), 0);
  EXPECT_EQ(read_entry(path, 4, 9, sl, dst).state, EntryState::Corrupt);
  EXPECT_EQ(read_entry(dir + "/nope", 4, 9, sl, dst).state, EntryState::Missing);
  int l = 0, e = 0;
  uint64_t n = 0;
  write();
  EXPECT_EQ(check_entry_file(path, &l, &e, &n).state, EntryState::Ok);
  EXPECT_EQ(l, 4);
  EXPECT_EQ(e, 9);
  EXPECT_EQ(n, 18000u);
  EXPECT_TRUE(std::system(("test -z \"$(ls " + dir + " | grep tmp)\"").c_str()) == 0) << "temp files left";
}

TEST(CoreFile, JournalResumesCompletesAndVerifies) {
  const std::string dir = fresh_dir("core");
  const uint64_t size = 1 << 20;
  const std::string data = random_bytes(size, 7);
  const std::vector<CoreChunk> plan = {{0, 4096, 0}, {4096, 8192, 0}, {500000, 1000, 0}, {600000, 400000, 0}};
  {
    auto c = CoreFile::open(dir + "/core-1", dir, size);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ((*c)->missing(plan).size(), 4u);
    ASSERT_TRUE((*c)->store(plan[0], data.data()).ok());
    ASSERT_TRUE((*c)->store(plan[2], data.data() + 500000).ok());
    EXPECT_FALSE((*c)->covers(0, 10));  // not complete yet
  }
  {  // A writer killed mid-line leaves a torn last line: ignored.
    std::ofstream j(dir + "/core-1.journal", std::ios::app);
    j << "4096 8192 dead";
  }
  auto c = CoreFile::open(dir + "/core-1", dir, size);
  ASSERT_TRUE(c.ok());
  auto missing = (*c)->missing(plan);
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0].offset, 4096u);
  EXPECT_FALSE((*c)->finish(plan).ok());
  for (const CoreChunk& m : missing) ASSERT_TRUE((*c)->store(m, data.data() + m.offset).ok());
  ASSERT_TRUE((*c)->finish(plan).ok());
  EXPECT_TRUE((*c)->covers(0, 12288));
  EXPECT_FALSE((*c)->covers(12000, 1000));  // runs past the chunks
  EXPECT_TRUE((*c)->covers(600000, 400000));
  std::string got(12288, 0);
  ASSERT_TRUE((*c)->read(0, got.data(), got.size()).ok());
  EXPECT_EQ(got, data.substr(0, 12288));
  c = CoreFile::open(dir + "/core-1", dir, size);
  ASSERT_TRUE((*c)->complete());
  EXPECT_EQ((*c)->verify().value(), 0);
  flip_byte((*c)->data_path(), 700000);
  EXPECT_EQ((*c)->verify().value(), 1);
  EXPECT_FALSE((*c)->complete());
  c = CoreFile::open(dir + "/core-1", dir, size);
  EXPECT_FALSE((*c)->complete());
  ASSERT_EQ((*c)->missing(plan).size(), 1u);
  EXPECT_EQ((*c)->missing(plan)[0].offset, 600000u);
  // Another size (the origin's file changed): nothing is reused.
  c = CoreFile::open(dir + "/core-1", dir, size + 1);
  EXPECT_EQ((*c)->missing(plan).size(), 4u);
}

TEST(CoreFile, CleanVerificationIsRememberedUntilTheFileChanges) {
  const std::string dir = fresh_dir("core_stamp");
  const uint64_t size = 256 << 10;
  const std::string data = random_bytes(size, 11);
  const std::vector<CoreChunk> plan = {{0, 65536, 0}, {65536, 65536, 0}, {200000, 50000, 0}};
  auto c = CoreFile::open(dir + "/core-1", dir, size);
  ASSERT_TRUE(c.ok());
  for (const CoreChunk& k : plan) ASSERT_TRUE((*c)->store(k, data.data() + k.offset).ok());
  ASSERT_TRUE((*c)->finish(plan).ok());  // all stored by this process: stamped
  bool skipped = false;
  c = CoreFile::open(dir + "/core-1", dir, size);
  EXPECT_EQ((*c)->verify_if_changed(&skipped).value(), 0);
  EXPECT_TRUE(skipped);
  // A byte changed on disk: the stamp no longer matches, the chunk is caught.
  flip_byte((*c)->data_path(), 70000);
  c = CoreFile::open(dir + "/core-1", dir, size);
  EXPECT_EQ((*c)->verify_if_changed(&skipped).value(), 1);
  EXPECT_FALSE(skipped);
  EXPECT_FALSE((*c)->complete());
  ASSERT_TRUE((*c)->store(plan[1], data.data() + plan[1].offset).ok());
  ASSERT_TRUE((*c)->finish(plan).ok());
  c = CoreFile::open(dir + "/core-1", dir, size);
  EXPECT_EQ((*c)->verify_if_changed(&skipped).value(), 0);
  EXPECT_TRUE(skipped);
  // The full check still reads everything (cache verify), and refreshes the stamp.
  EXPECT_EQ((*c)->verify().value(), 0);
  // A core finished from a journal an earlier process left is rehashed once.
  const std::string dir2 = fresh_dir("core_stamp2");
  {
    auto d = CoreFile::open(dir2 + "/core-1", dir2, size);
    ASSERT_TRUE((*d)->store(plan[0], data.data()).ok());
  }
  auto d = CoreFile::open(dir2 + "/core-1", dir2, size);
  for (const CoreChunk& k : (*d)->missing(plan)) ASSERT_TRUE((*d)->store(k, data.data() + k.offset).ok());
  ASSERT_TRUE((*d)->finish(plan).ok());
  EXPECT_EQ((*d)->verify_if_changed(&skipped).value(), 0);
  EXPECT_FALSE(skipped);
  EXPECT_EQ((*d)->verify_if_changed(&skipped).value(), 0);
  EXPECT_TRUE(skipped);
}

TEST(CacheAdmin, PruneEvictsTheLeastUsedExpertsAcrossModelsNeverACore) {
  const std::string root = fresh_dir("prune");
  auto write = [](const std::string& path, size_t n) {
    std::ofstream(path, std::ios::binary) << random_bytes(n, uint32_t(n));
  };
  uint64_t cores = 0;
  ASSERT_TRUE(make_dirs(tmp_dir(root)).ok());
  for (const char* m : {"a", "b"}) {
    const std::string d = models_dir(root) + "/" + m;
    ASSERT_TRUE(make_dirs(d + "/experts").ok());
    write(d + "/core-1.bin", 64 << 10);
    write(d + "/core-1.ok", 10);
    cores += disk_usage(d + "/core-1.bin");
    for (const char* e : {"0-0", "0-1", "0-2", "1-3"}) write(d + "/experts/" + e, 1000);
  }
  // Model a: 0-0 used 10 times, 0-2 5 times, 0-1 once, 1-3 never; model b: 1-3 three times.
  ASSERT_TRUE(merge_usage(models_dir(root) + "/a", tmp_dir(root), {{{0, 0}, 10}, {{0, 2}, 5}, {{0, 1}, 1}}).ok());
  ASSERT_TRUE(merge_usage(models_dir(root) + "/b", tmp_dir(root), {{{1, 3}, 3}}).ok());
  ASSERT_TRUE(merge_usage(models_dir(root) + "/a", tmp_dir(root), {{{0, 2}, 1}}).ok());  // counts add up: 6
  EXPECT_EQ(read_usage(models_dir(root) + "/a").at({0, 2}), 6.0);
  auto present = [&](const char* m, const char* e) {
    return ::access((models_dir(root) + "/" + m + "/experts/" + e).c_str(), F_OK) == 0;
  };
  // Room for three entries: the three most used stay (a/0-0, a/0-2, b/1-3).
  auto r = prune_cache(root, cores + 3000);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->removed, 5);
  EXPECT_LE(r->after, cores + 3000);
  EXPECT_TRUE(present("a", "0-0") && present("a", "0-2") && present("b", "1-3"));
  EXPECT_FALSE(present("a", "0-1") || present("a", "1-3") || present("b", "0-0") || present("b", "0-1") ||
               present("b", "0-2"));
  // A budget below the cores: every expert goes, the cores stay.
  r = prune_cache(root, 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->removed, 3);
  EXPECT_EQ(r->after, cores);
  for (const char* m : {"a", "b"}) EXPECT_EQ(::access((models_dir(root) + "/" + m + "/core-1.bin").c_str(), F_OK), 0);
}

TEST(KeyLocks, ExcludeOtherProcesses) {
  const std::string dir = fresh_dir("locks");
  auto locks = KeyLocks::open(dir + "/keys.lock");
  ASSERT_TRUE(locks.ok());
  ASSERT_TRUE(locks->try_lock(5));
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    auto l = KeyLocks::open(dir + "/keys.lock");
    char r[2] = {char(l->try_lock(5) ? 1 : 0), char(l->try_lock(6) ? 1 : 0)};
    (void)!::write(to_parent[1], r, 2);
    char go;
    (void)!::read(to_child[0], &go, 1);  // the parent released 5
    r[0] = char(l->lock(5).ok() ? 1 : 0);
    (void)!::write(to_parent[1], r, 1);
    ::_exit(0);
  }
  char r[2] = {9, 9};
  ASSERT_EQ(::read(to_parent[0], r, 2), 2);
  EXPECT_EQ(r[0], 0) << "key 5 is held by the parent";
  EXPECT_EQ(r[1], 1) << "key 6 is free";
  locks->unlock(5);
  (void)!::write(to_child[1], "g", 1);
  ASSERT_EQ(::read(to_parent[0], r, 1), 1);
  EXPECT_EQ(r[0], 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(locks->try_lock(6)) << "the child died holding key 6: the lock must be released";
}

// Issue 22: a FIFO in a cache entry's place, the data file's or a manifest's, must
// not block (open would wait for a writer forever): it is rejected as not a
// regular file, and the core starts over.
TEST(ExpertEntry, AFifoIsRejectedWithoutBlocking) {
  const std::string dir = fresh_dir("fifo");
  ExpertSlices sl;
  sl.part[0] = {0, 0, 100, {}};
  char* dst[3] = {};
  ASSERT_EQ(::mkfifo((dir + "/0-0").c_str(), 0644), 0);
  EntryRead r = read_entry(dir + "/0-0", 0, 0, sl, dst);
  EXPECT_EQ(r.state, EntryState::Corrupt);
  EXPECT_NE(r.why.find("not a regular file"), std::string::npos) << r.why;
  int l = 0, e = 0;
  uint64_t n = 0;
  EXPECT_EQ(check_entry_file(dir + "/0-0", &l, &e, &n).state, EntryState::Corrupt);
  ASSERT_EQ(::mkfifo((dir + "/meta.json").c_str(), 0644), 0);
  EXPECT_FALSE(read_small_file(dir + "/meta.json").ok());
  ASSERT_EQ(::mkfifo((dir + "/core-1.bin").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((dir + "/core-1.ok").c_str(), 0644), 0);
  auto c = CoreFile::open(dir + "/core-1", dir, 4096);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE((*c)->complete());
  struct stat st;
  ASSERT_EQ(::stat((dir + "/core-1.bin").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

// Issue 22: a damaged or tampered manifest (a chunk of 2^64-1 bytes, one past the
// end, overlapping chunks, a line that is not a chunk) never sizes a buffer: the
// manifest is dropped and the whole core is fetched again; bad journal lines are
// left out (those chunks are fetched again).
TEST(CoreFile, AGarbageManifestIsDroppedNotTrusted) {
  const std::string dir = fresh_dir("core_garbage");
  const uint64_t size = 1 << 20;
  const std::string data = random_bytes(size, 5);
  const std::vector<CoreChunk> plan = {{0, 4096, 0}, {8192, 8192, 0}};
  auto complete = [&] {
    auto c = CoreFile::open(dir + "/core-1", dir, size);
    ASSERT_TRUE(c.ok());
    for (const CoreChunk& m : (*c)->missing(plan)) ASSERT_TRUE((*c)->store(m, data.data() + m.offset).ok());
    ASSERT_TRUE((*c)->finish(plan).ok());
  };
  for (const char* garbage : {"0 18446744073709551615 0\n", "1048000 4096 1f\n", "100 200 3\n", "not a chunk\n",
                              "-5 10 0\n", "16384 0 0\n"}) {
    complete();
    {
      std::ofstream ok(dir + "/core-1.ok", std::ios::app);
      ok << garbage;
    }
    auto c = CoreFile::open(dir + "/core-1", dir, size);
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE((*c)->complete()) << garbage;
    EXPECT_EQ((*c)->missing(plan).size(), 2u) << garbage;
    EXPECT_EQ((*c)->verify().value(), 0);
    EXPECT_NE(::access((dir + "/core-1.ok").c_str(), F_OK), 0) << "the manifest was not dropped: " << garbage;
  }
  // A journal: the good lines count, the bad ones do not.
  {
    auto c = CoreFile::open(dir + "/core-1", dir, size);
    ASSERT_TRUE((*c)->store(plan[0], data.data()).ok());
  }
  {
    std::ofstream j(dir + "/core-1.journal", std::ios::app);
    j << "8192 99999999999 0\n";
  }
  auto c = CoreFile::open(dir + "/core-1", dir, size);
  ASSERT_EQ((*c)->missing(plan).size(), 1u);
  EXPECT_EQ((*c)->missing(plan)[0].offset, 8192u);
}

// Issue 22: a response that loses the validator the cache was filled under is a
// change; without validators the fingerprints decide.
TEST(HttpIdentity, ALostValidatorIsAChange) {
  const HttpIdentity etag{100, "\"a\"", "Mon, 01 Jan 2024 00:00:00 GMT", 0};
  EXPECT_EQ(identity_change(etag, etag), "");
  EXPECT_NE(identity_change(etag, {100, "", "Mon, 01 Jan 2024 00:00:00 GMT", 0}), "");
  EXPECT_NE(identity_change(etag, {100, "", "", 0}), "");
  EXPECT_NE(identity_change(etag, {100, "\"b\"", "", 0}), "");
  const HttpIdentity date{100, "", "Mon, 01 Jan 2024 00:00:00 GMT", 0};
  EXPECT_NE(identity_change(date, {100, "", "", 0}), "");
  EXPECT_NE(identity_change(date, {100, "", "Tue, 02 Jan 2024 00:00:00 GMT", 0}), "");
  EXPECT_EQ(identity_change(date, {100, "\"new\"", "Mon, 01 Jan 2024 00:00:00 GMT", 0}), "");
  const HttpIdentity bare{100, "", "", 42};
  EXPECT_EQ(identity_change(bare, {100, "", "", 42}), "");
  EXPECT_NE(identity_change(bare, {100, "", "", 43}), "");
  EXPECT_NE(identity_change(bare, {101, "", "", 42}), "");
}
