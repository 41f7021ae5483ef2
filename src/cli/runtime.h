// Where the daemon keeps its per-mount state, and how `tfrecordfs unmount`
// and `tfrecordfs status` find it.
//
// The mount registry: one file per live mount, named after a CRC of the
// mountpoint's real path, in $XDG_RUNTIME_DIR/tfrecordfs, else
// /run/tfrecordfs for root, else /tmp/tfrecordfs-<uid>. It holds
// `mountpoint=`, `store=`, `pid=`, `read_only=`, `log=`, `log_start=` and
// `staging=` lines; the daemon writes it once the mount is ready and removes
// it when it exits. A read-only mount's store may not exist (it is never
// created read-only).
#ifndef TFRECORDFS_CLI_RUNTIME_H_
#define TFRECORDFS_CLI_RUNTIME_H_

#include <cstdint>
#include <optional>
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

// Where a detached daemon logs unless -o log=PATH says otherwise:
// ${XDG_STATE_HOME:-~/.local/state}/tfrecordfs/log/<mount point>.log, the
// mount point's real path escaped as systemd does it ("/mnt/a-b" ->
// "mnt-a\x2db"), so each mount point has its own file.
std::string DefaultLogPath(const std::string& mountpoint_realpath);

// What a mount logged: its warning and error lines of a log file from byte
// `start` on (the daemon's own lines, see log::UseFile).
struct LogProblems {
  uint64_t errors = 0;
  uint64_t warnings = 0;
  std::vector<std::string> first;  // the first few such lines, errors first
};
LogProblems ScanLog(const std::string& path, uint64_t start);

struct MountRecord {
  std::string mountpoint;
  std::string store;
  long pid = 0;
  bool read_only = false;
  std::string log;         // the daemon's log file ("" when it keeps none)
  uint64_t log_start = 0;  // where its lines start in that file
  std::string staging;     // the staging folder's name at the mount root ("": none)
};

std::string RegistryPath(const std::string& mountpoint_realpath);
// The record of the mount at `mountpoint_realpath`. The daemon writes it
// just after the mount appears (before it serves a request), so a script
// that waited for the mount point may ask a few milliseconds early: while
// the path is a live tfrecordfs mount without a record, waits up to 5 s.
absl::StatusOr<MountRecord> AwaitMountRecord(const std::string& mountpoint_realpath);
// The record of the live tfrecordfs mount of this user at `mountpoint` (any
// spelling of it; AwaitMountRecord), else nullopt after saying why on stderr as `tfrecordfs
// COMMAND: ...` (status and commit then exit kExitNotMounted).
std::optional<MountRecord> LiveMountRecord(const std::string& mountpoint,
                                           absl::string_view command);
absl::Status WriteMountRecord(const MountRecord& record);
absl::StatusOr<MountRecord> ReadMountRecord(const std::string& mountpoint_realpath);
void RemoveMountRecord(const std::string& mountpoint_realpath);

// One line of /proc/self/mountinfo: the mount point (unescaped), the
// filesystem type ("fuse.tfrecordfs") and the source.
struct MountinfoEntry {
  std::string mountpoint;
  std::string fstype;
  std::string source;
};
// The mounts this process sees, read with open/read (no exceptions); an
// error when /proc cannot be read.
absl::StatusOr<std::vector<MountinfoEntry>> ReadMountinfo();
// The tfrecordfs mount on `mountpoint_realpath` this process sees, if any
// (none too when /proc cannot be read).
std::optional<MountinfoEntry> FindTfrecordfsMount(const std::string& mountpoint_realpath);

// Reads a whole small file (a /proc file included: read() until 0, no
// seeking); errors are values, so a process that vanished mid-read is an
// error the caller can treat as "gone".
absl::StatusOr<std::string> ReadProcFile(const std::string& path);

// Whether process `pid` exists and is not a zombie (a foreground daemon's
// parent may reap it late): how unmount and commit notice a daemon that
// died. A process gone while we read counts as gone.
bool ProcessAlive(long pid);

// The pack report the daemon leaves in the store for `tfrecordfs unmount`:
// a first line `result: ok|left|failed`, then the pack summary.
inline constexpr char kResultOk[] = "result: ok";

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_RUNTIME_H_
