// The repack's test hook (fault injection), documented in pack.h and
// rewrite.h: when the environment variable TFRECORDFS_FAULT names the point
// the process reaches, it kills itself with SIGKILL, so tests can check
// recovery from every step. Unset (the normal case) costs one getenv per
// pack or rewrite. Internal to repack.
#ifndef TFRECORDFS_SRC_REPACK_FAULT_POINTS_H_
#define TFRECORDFS_SRC_REPACK_FAULT_POINTS_H_

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::repack {

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
  // At("<prefix>:<k>").
  void At(absl::string_view prefix, uint64_t k) const {
    if (!point_.empty()) At(absl::StrCat(prefix, ":", k));
  }

 private:
  std::string point_;
};

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_SRC_REPACK_FAULT_POINTS_H_
