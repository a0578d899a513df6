// The core download shared by two users of one disk cache, against a real HTTP
// server on loopback (cpp-httplib): a second user that read the core's journal while
// the first was still downloading, and takes the core lock only after the first let
// it go, fetches nothing again. (The end-to-end form, two processes: remote_identical.sh.)
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "model/model.h"
#include "store/remote_model.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

// Serves one file at /m.gguf, ranges answered by httplib, counting requests.
class FileServer {
 public:
  explicit FileServer(std::string blob) : blob_(std::move(blob)) {
    srv_.Get("/m.gguf", [this](const httplib::Request&, httplib::Response& res) {
      ++requests;
      res.set_header("ETag", "\"m1\"");
      res.set_content(blob_, "application/octet-stream");
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FileServer() {
    srv_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/m.gguf"; }
  std::atomic<int> requests{0};

 private:
  std::string blob_;
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
};

struct Opened {
  std::unique_ptr<RemoteModel> model;
  std::unique_ptr<ModelFile> file;
};

Opened open_remote(const std::string& url, const std::string& cache) {
  Opened o;
  auto loc = parse_model_location(url, {});
  EXPECT_TRUE(loc.ok());
  RemoteOptions ro;
  ro.cache_dir = cache;
  auto m = RemoteModel::open(*loc, ro);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  if (!m.ok()) return o;
  o.model = std::move(*m);
  auto f = o.model->open_file();
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
  if (!f.ok()) return o;
  o.file = std::move(*f);
  Status s = o.model->attach(*o.file, find_expert_layers(*o.file));
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return o;
}

}  // namespace

TEST(RemoteCore, AUserThatReadTheJournalEarlyFetchesNothingTheOtherStored) {
  SynthSpec spec;
  ASSERT_TRUE(synth_preset("tiny", "qwen3moe", &spec));
  std::string why;
  const std::string path = synth_once("remote_core", "tiny", spec, &why);
  ASSERT_FALSE(path.empty()) << why;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  FileServer srv(ss.str());
  const std::string cache = test_dir("remote_core") + "/cache";

  // B opens first: the core is missing from its view.
  Opened b = open_remote(srv.url(), cache);
  ASSERT_TRUE(b.model && b.file);
  ASSERT_GT(b.model->status().core_missing, 0u);
  // A opens, downloads the whole core and closes (its lock let go).
  {
    Opened a = open_remote(srv.url(), cache);
    ASSERT_TRUE(a.model && a.file);
    ASSERT_TRUE(a.model->ensure_core(nullptr).ok());
    ASSERT_EQ(a.model->status().core_missing, 0u);
  }
  const int before = srv.requests.load();
  Status s = b.model->ensure_core(nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(srv.requests.load(), before) << "B fetched core chunks that A had stored";
  EXPECT_EQ(b.model->status().core_missing, 0u);
}
