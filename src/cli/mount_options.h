// The mount's command line: `tfrecordfs [options] SOURCE... MOUNTPOINT`.
// Our -o options live in one table (kMountOptions, mount_options.cc) that
// gives --help, the parser, the names the bash completion offers
// (tfrecordfs --list-mount-options), and what mount_cli_test checks against
// the man page's OPTIONS; the FUSE and mount(8) options we pass on or
// ignore are allow-lists beside it.
//
// Thread-safety: none needed; parsed once, on the main thread.
#ifndef TFRECORDFS_CLI_MOUNT_OPTIONS_H_
#define TFRECORDFS_CLI_MOUNT_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfrecordfs/fuse/session.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/vfs/filesystem.h"

namespace tfrecordfs::cli {

// What the command line asks of a mount. Defaults are the options' (see
// --help); paths are made absolute by ParseMountCommandLine.
struct CliOptions {
  vfs::Options vfs;
  fuse::SessionOptions session;
  std::vector<std::string> positional;
  std::string staging_dir;
  repack::PackOptions pack;
  std::string index_dir;
  bool index_cache = true;
  bool index_beside = true;                            // -o nobeside
  bool index_verify = false;                           // -o index_verify
  bool read_only = false;                              // -o ro (the last of ro/rw wins)
  bool always_open = false;                            // -o open
  uint64_t gz_span = source::kDefaultSpan;             // -o gz_span
  index::WalkMode walk_mode = index::WalkMode::kAuto;  // -o walk
  uint64_t max_records = record::kDefaultMaxRecords;   // -o max_shard_records
  std::optional<source::Codec> compression;            // -o compression; unset: the sources'
  std::string log_path;  // -o log (default: DefaultLogPath when detached)
  // -o no_sign_request, -o gcs_token_file (made absolute): how s3:// and
  // gs:// SOURCEs are reached (objstore::SetDefaultObjectOptions hands them to
  // the mount's scan).
  objstore::ObjectOptions objects;
};

// Parses the mount's command line (argv[0] is the program) into *cli:
// options, the SOURCEs (cli->vfs.sources) and the mount point
// (cli->session.mountpoint), every path made absolute (a detached daemon
// changes to "/" before it serves). Returns an exit code when the command
// should stop now: kExitOk after --help, --version or
// --list-mount-options; kExitUsage after saying what is wrong (an unknown
// option, a value that does not parse, no SOURCE or MOUNTPOINT). Nothing is
// read or created.
std::optional<int> ParseMountCommandLine(int argc, char** argv, CliOptions* cli);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_MOUNT_OPTIONS_H_
