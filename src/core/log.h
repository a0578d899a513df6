// Minimal leveled logging to stderr. The level is set once by the command line
// (-v / -q); library code only calls log_*.
#pragma once
#include <fmt/format.h>

#include <cstdio>

namespace deltafin {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };
void set_log_level(LogLevel level);
LogLevel log_level();

template <typename... Args>
void log_at(LogLevel level, const char* tag, fmt::format_string<Args...> f, Args&&... args) {
  if (level > log_level()) return;
  std::string s = fmt::format(f, std::forward<Args>(args)...);
  std::fprintf(stderr, "%s%s\n", tag, s.c_str());
}
#define DF_LOG_ERROR(...) ::deltafin::log_at(::deltafin::LogLevel::Error, "error: ", __VA_ARGS__)
#define DF_LOG_WARN(...) ::deltafin::log_at(::deltafin::LogLevel::Warn, "warning: ", __VA_ARGS__)
#define DF_LOG_INFO(...) ::deltafin::log_at(::deltafin::LogLevel::Info, "", __VA_ARGS__)
#define DF_LOG_DEBUG(...) ::deltafin::log_at(::deltafin::LogLevel::Debug, "debug: ", __VA_ARGS__)

}  // namespace deltafin
