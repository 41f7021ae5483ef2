// Minimal leveled logging to stderr (and syslog once the daemon detaches).
//
// Abseil 20220623 (Debian bookworm) predates absl/log, so this is ours.
// Thread-safe: each message is written with one write(2) call.
#ifndef TFRECORDFS_BASE_LOG_H_
#define TFRECORDFS_BASE_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Messages below `level` are dropped. Default kInfo.
void SetLevel(Level level);
Level GetLevel();
// After this call messages also go to syslog (used once the daemon detaches
// and stderr points to /dev/null).
void UseSyslog(bool on);

// After this call messages also go, time-stamped, to the file at `path`
// (appended to; created 0600 with its missing parent folders), which stays
// open: a detached daemon loses stderr and its working directory, and a
// container often has no syslog socket, so without it errors would be lost.
// `header` is written first as its own line (say which mount this is).
// Returns the file's size before the header: where this process's lines
// start. A regular file of `rotate_at` bytes or more (0: never) is first
// renamed to `path` + ".1", replacing an older one, and a new file begun, so
// a mount point's log, appended to by every mount, stays under about twice
// that. On an error the logging is unchanged (a rotation may have happened).
inline constexpr uint64_t kLogRotateBytes = 4 << 20;
absl::StatusOr<uint64_t> UseFile(const std::string& path, absl::string_view header,
                                 uint64_t rotate_at = kLogRotateBytes);

void Write(Level level, absl::string_view message);

template <typename... Args>
void Info(const Args&... args) {
  if (GetLevel() <= Level::kInfo) Write(Level::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void Warning(const Args&... args) {
  if (GetLevel() <= Level::kWarning) Write(Level::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void Error(const Args&... args) {
  Write(Level::kError, absl::StrCat(args...));
}
template <typename... Args>
void Debug(const Args&... args) {
  if (GetLevel() <= Level::kDebug) Write(Level::kDebug, absl::StrCat(args...));
}

}  // namespace tfrecordfs::log

#endif  // TFRECORDFS_BASE_LOG_H_
