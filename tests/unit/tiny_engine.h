// The tiny synthetic models of the scheduler, server and chat tests, opened in RAM.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "runtime/engine.h"
#include "synth/synth.h"
#include "synth_once.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

// The tiny model of `arch` (written once per process) opened with `threads` (0: all),
// and its tokenizer. Fails the calling test (call it in ASSERT_NO_FATAL_FAILURE) if it
// cannot.
inline void open_tiny(int threads, std::unique_ptr<Engine>* engine, std::optional<Tokenizer>* tok,
                      const std::string& arch = "qwen3moe") {
  SynthSpec s;
  ASSERT_TRUE(synth_preset("tiny", arch, &s));
  std::string why;
  const std::string path = synth_once("sched", "tiny-" + arch, s, &why);
  ASSERT_FALSE(path.empty()) << why;
  EngineOptions eo;
  eo.threads = threads;
  auto e = Engine::open(path, eo);
  ASSERT_TRUE(e.ok()) << e.error().message;
  *engine = std::move(*e);
  auto t = Tokenizer::from_gguf((*engine)->file().meta());
  ASSERT_TRUE(t.ok()) << t.error().message;
  tok->emplace(std::move(*t));
}

}  // namespace deltafin
