#include "tfrecordfs/base/log.h"

#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <string>

namespace tfrecordfs::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::atomic<bool> g_syslog{false};
}  // namespace

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }
Level GetLevel() { return static_cast<Level>(g_level.load()); }
void UseSyslog(bool on) { g_syslog.store(on); }

void Write(Level level, absl::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  static constexpr const char* kNames[] = {"debug", "info", "warning", "error"};
  std::string line = absl::StrCat("tfrecordfs: ", kNames[static_cast<int>(level)], ": ", message,
                                  "\n");
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  if (g_syslog.load()) {
    static constexpr int kPrio[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR};
    ::syslog(kPrio[static_cast<int>(level)], "%.*s", static_cast<int>(message.size()),
             message.data());
  }
}

}  // namespace tfrecordfs::log
