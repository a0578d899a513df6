#include "core/log.h"

#include <atomic>

namespace deltafin {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Warn)};
}
void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
}  // namespace deltafin
