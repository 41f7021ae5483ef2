// The crash-safety test hook (fault injection), whose points are documented
// where they are (repack/pack.h, repack/rewrite.h, vfs/record_edits.h):
// when the environment variable TFRECORDFS_FAULT names the point the
// process reaches, it kills itself with SIGKILL, so tests can check
// recovery from every step. Unset (the normal case) costs one getenv per
// FaultPoints made.
//
// Thread-safety: immutable after construction.
#ifndef TFRECORDFS_BASE_FAULT_POINTS_H_
#define TFRECORDFS_BASE_FAULT_POINTS_H_

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs {

class FaultPoints {
 public:
  FaultPoints() {
    if (const char* v = std::getenv("TFRECORDFS_FAULT")) point_ = v;
  }
  void At(absl::string_view point) const {
    if (!point_.empty() && point_ == point) {
      log::Warning("TFRECORDFS_FAULT=", point_, ": killing the process");
      std::raise(SIGKILL);
    }
  }
  // True when TFRECORDFS_FAULT names `point`: for a fault other than a
  // crash, which the caller then makes (e.g. a byte changed on disk).
  bool Is(absl::string_view point) const { return !point_.empty() && point_ == point; }
  // At("<prefix>:<k>").
  void At(absl::string_view prefix, uint64_t k) const {
    if (!point_.empty()) At(absl::StrCat(prefix, ":", k));
  }

 private:
  std::string point_;
};

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_FAULT_POINTS_H_
