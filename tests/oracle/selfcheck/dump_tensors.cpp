// Developer check (not built by CMake, not run by ctest): runs a GGUF through the
// oracle's llama.cpp (node-llama-cpp's prebuilt libraries) with an eval callback and
// writes every contiguous F32 graph tensor as OUTDIR/<name>.bin: four int64 ne[]
// followed by the floats. Used to find the first op where deltafin and llama.cpp part
// (compare the token-t slice of a tensor, e.g. kda_out-3, with deltafin's value).
//
// Build, with LIB = build/oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
// and SRC = a clone of node-llama-cpp's llama/gitRelease.bundle (tests/oracle/README.md):
//   g++ -O1 -std=c++17 dump_tensors.cpp -I$SRC/include -I$SRC/ggml/include -L$LIB \
//       -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,$LIB -o dump_tensors
// Run: dump_tensors LIB MODEL.gguf OUTDIR 1,2,3 [f32kv]
//   (one llama_decode of all ids: 2+ ids take the batch paths, 1 id the single-token ones;
//   a name seen in several layers carries its layer, e.g. ffn_norm-2; unnamed nodes clash.)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {
std::string g_out;

bool on_tensor(ggml_tensor* t, bool ask, void*) {
  if (ask) return true;  // every node
  if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) || !ggml_backend_buffer_is_host(t->buffer)) return true;
  std::string n = t->name;
  for (char& c : n)
    if (c == '/' || c == ' ') c = '_';
  FILE* f = std::fopen((g_out + "/" + n + ".bin").c_str(), "wb");
  if (f == nullptr) return true;
  const int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
  std::fwrite(ne, sizeof ne[0], 4, f);
  std::fwrite(t->data, sizeof(float), size_t(ggml_nelements(t)), f);
  std::fclose(f);
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s LIBDIR MODEL OUTDIR ID,ID,... [f32kv]\n", argv[0]);
    return 2;
  }
  g_out = argv[3];
  llama_backend_init();
  ggml_backend_load_all_from_path(argv[1]);
  llama_model* m = llama_model_load_from_file(argv[2], llama_model_default_params());
  if (m == nullptr) return 1;
  std::vector<llama_token> ids;
  for (char* p = std::strtok(argv[4], ","); p != nullptr; p = std::strtok(nullptr, ",")) ids.push_back(std::atoi(p));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = uint32_t(ids.size() + 64);
  cp.n_threads = cp.n_threads_batch = 1;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;  // as llama_ref.mjs
  cp.cb_eval = on_tensor;
  if (argc > 5) cp.type_k = cp.type_v = GGML_TYPE_F32;
  llama_context* c = llama_init_from_model(m, cp);
  if (c == nullptr) return 1;
  const int rc = llama_decode(c, llama_batch_get_one(ids.data(), int32_t(ids.size())));
  llama_free(c);
  llama_model_free(m);
  return rc == 0 ? 0 : 1;
}
