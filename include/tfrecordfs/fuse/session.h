// Runs a FUSE session over a vfs::Filesystem: mount, optional detach, the
// (multi-threaded) request loop, unmount.
//
// Not thread-safe: call once from main.
#ifndef TFRECORDFS_FUSE_SESSION_H_
#define TFRECORDFS_FUSE_SESSION_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tfrecordfs/fuse/ops.h"
#include "tfrecordfs/vfs/filesystem.h"

namespace tfrecordfs::fuse {

struct SessionOptions {
  std::string mountpoint;
  // Mount options handed to libfuse ("allow_other", "ro", "fsname=...").
  std::vector<std::string> fuse_options;
  bool foreground = false;       // -f: do not detach
  bool debug = false;            // -d: libfuse request tracing (implies -f)
  bool single_threaded = false;  // -s
  unsigned max_threads = 16;     // for the multi-threaded loop
  bool clone_fd = false;         // each loop thread reads its own /dev/fuse clone
  OpsOptions ops;
  // Called once the mount exists, before any request is served; unless
  // foreground, in the detached child and before the parent exits.
  std::function<void()> on_ready;
};

// Mounts and serves until the file system is unmounted or the process gets
// SIGINT/SIGTERM/SIGHUP. Returns an error if the mount could not be made.
// When not foreground, the calling process forks: the parent exits 0 once
// on_ready has returned in the child (1 if the child died first), and this
// function returns in the detached child, whose stdio is /dev/null and whose
// log goes to syslog.
absl::Status RunSession(vfs::Filesystem* fs, const SessionOptions& options);

}  // namespace tfrecordfs::fuse

#endif  // TFRECORDFS_FUSE_SESSION_H_
