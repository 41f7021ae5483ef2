#include "tfrecordfs/base/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <string>

#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"

namespace tfrecordfs::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::atomic<bool> g_syslog{false};
std::atomic<int> g_file{-1};  // set once by UseFile, never closed

// "2024-05-01T12:00:00Z tfrecordfs[123]: " for the log file.
std::string Stamp() {
  const time_t now = ::time(nullptr);
  struct tm tm;
  ::gmtime_r(&now, &tm);
  char buf[32];
  ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return absl::StrCat(buf, " tfrecordfs[", ::getpid(), "]: ");
}

}  // namespace

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }
Level GetLevel() { return static_cast<Level>(g_level.load()); }
void UseSyslog(bool on) { g_syslog.store(on); }

absl::StatusOr<uint64_t> UseFile(const std::string& path, absl::string_view header,
                                 uint64_t rotate_at) {
  if (auto s = MakeDirs(Dirname(path), 0700); !s.ok()) return s;
  // Each mount appends to the same file: past `rotate_at` it is kept as
  // PATH.1 (replacing an older one) and a new one is begun.
  if (struct stat old; rotate_at > 0 && ::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) &&
                       static_cast<uint64_t>(old.st_size) >= rotate_at) {
    const std::string kept = path + ".1";
    if (::rename(path.c_str(), kept.c_str()) != 0) return ErrnoError(errno, kept);
  }
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
  const std::string line = absl::StrCat(Stamp(), header, "\n");
  if (auto s = WriteFull(fd->get(), line.data(), line.size(), path); !s.ok()) return s;
  const int old = g_file.exchange(fd->release());
  if (old >= 0) ::close(old);
  return static_cast<uint64_t>(st.st_size);
}

void Write(Level level, absl::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  static constexpr const char* kNames[] = {"debug", "info", "warning", "error"};
  std::string line =
      absl::StrCat("tfrecordfs: ", kNames[static_cast<int>(level)], ": ", message, "\n");
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  if (const int fd = g_file.load(); fd >= 0) {
    // One write(2) of a whole line to an O_APPEND file: lines of concurrent
    // threads never interleave.
    const std::string stamped =
        absl::StrCat(Stamp(), kNames[static_cast<int>(level)], ": ", message, "\n");
    ignored = ::write(fd, stamped.data(), stamped.size());
  }
  if (g_syslog.load()) {
    static constexpr int kPrio[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR};
    ::syslog(kPrio[static_cast<int>(level)], "%.*s", static_cast<int>(message.size()),
             message.data());
  }
}

}  // namespace tfrecordfs::log
