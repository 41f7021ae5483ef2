// Where the daemon keeps its per-mount state, and how `tfrecordfs unmount`
// finds it.
//
// The mount registry: one file per live mount, named after a CRC of the
// mountpoint's real path, in $XDG_RUNTIME_DIR/tfrecordfs, else
// /run/tfrecordfs for root, else /tmp/tfrecordfs-<uid>. It holds
// `mountpoint=`, `store=` and `pid=` lines; the daemon writes it once
// the mount is ready and removes it when it exits.
#ifndef TFRECORDFS_CLI_RUNTIME_H_
#define TFRECORDFS_CLI_RUNTIME_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tfrecordfs::cli {

// The default staging store for a set of sources: survives reboots and is
// tied to the sources' real paths:
// ${XDG_STATE_HOME:-~/.local/state}/tfrecordfs/staging/<name>-<crc32c>.
std::string DefaultStagingDir(const std::vector<std::string>& sources);

// `path` anchored to the current directory when it is relative ("" and
// absolute paths come back unchanged). Symlinks are not resolved, so names
// the mount shows stay the ones the user typed. The daemon changes to "/"
// when it detaches, so every path it opens later must go through this while
// the command line is parsed.
std::string AbsolutePath(const std::string& path);

// The default output directory: the first source if it is a directory, else
// the directory holding it.
std::string DefaultOutputDir(const std::vector<std::string>& sources);

struct MountRecord {
  std::string mountpoint;
  std::string store;
  long pid = 0;
};

std::string RegistryPath(const std::string& mountpoint_realpath);
absl::Status WriteMountRecord(const MountRecord& record);
absl::StatusOr<MountRecord> ReadMountRecord(const std::string& mountpoint_realpath);
void RemoveMountRecord(const std::string& mountpoint_realpath);

// The pack report the daemon leaves in the store for `tfrecordfs unmount`:
// a first line `result: ok|left|failed`, then the pack summary.
inline constexpr char kResultOk[] = "result: ok";

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_RUNTIME_H_
