// What the command-line mount tests share (mount_cli_test.cc,
// mount_cli_options_test.cc, mount_daemon_test.cc).
#ifndef TFRECORDFS_TESTS_MOUNT_MOUNT_CLI_UTIL_H_
#define TFRECORDFS_TESTS_MOUNT_MOUNT_CLI_UTIL_H_

#include <filesystem>
#include <string>

#include "mount_harness.h"

namespace tfrecordfs::mount_test {

// Keeps the staging store and pack output of a daemon the harness does not
// own inside `tmp` (see Mount::Start).
inline std::string IsolationOptions(const TempDir& tmp) {
  return "staging_dir=" + tmp.path() + "/store,output_dir=" + tmp.Subdir("out");
}

inline std::string Bin() { return BinaryPath(); }

inline std::string Dirname(const std::string& p) { return std::filesystem::path(p).parent_path(); }

}  // namespace tfrecordfs::mount_test

#endif  // TFRECORDFS_TESTS_MOUNT_MOUNT_CLI_UTIL_H_
