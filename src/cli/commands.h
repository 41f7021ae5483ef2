// Subcommands of the tfrecordfs binary, dispatched from main.cc by argv[1]
// (anything else is a mount). Each takes the arguments from the subcommand
// name on (argv[0] is the subcommand) and returns the process exit status:
// kExitOk, kExitFailed or kExitUsage. Not thread-safe: each runs once, on
// the main thread.
#ifndef TFRECORDFS_CLI_COMMANDS_H_
#define TFRECORDFS_CLI_COMMANDS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::cli {

// The exit status of every command (the man page's EXIT STATUS).
inline constexpr int kExitOk = 0;
// Failed: damaged or unreadable input, a mount that could not start, a
// pack that failed or left records staged.
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;  // a usage error: nothing was done
// status, commit: MOUNTPOINT is not a live tfrecordfs mount of this user
// (or, for commit, not a read-write one), or cannot be read.
inline constexpr int kExitNotMounted = 3;

// Prints "tfrecordfs CMD: MESSAGE" and the --help hint to stderr (no CMD:
// "tfrecordfs: MESSAGE", the mount's); returns kExitUsage.
int UsageError(absl::string_view cmd, absl::string_view message);

// Parses a size: digits with an optional binary multiple suffix K, M, G or T
// (either case): "123", "64K", "128M", "2G". Rejects 0, overflow, anything
// else. For `pack --shard-size` and the mount's `-o shard_size=` and
// `-o gz_span=`.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// `tfrecordfs [options] SOURCE... MOUNTPOINT` (mount_cmd.cc; its command
// line: mount_options.h): argv[0] is the program.
int MountMain(int argc, char** argv);

// `tfrecordfs pack [--shard-size SIZE] [--prefix NAME] [--compression C] DIR OUTPUT_DIR`
int PackMain(int argc, char** argv);

// `tfrecordfs unmount MOUNTPOINT` (unmount_cmd.cc)
int UnmountMain(int argc, char** argv);

// `tfrecordfs commit [--rebase] [--timeout S] MOUNTPOINT` (commit_cmd.cc): the edits
// of a live mount written into its shards without unmounting. Exits 0, 1
// when a shard was not committed, 2 on a usage error, 3 when MOUNTPOINT is
// not a live read-write mount of this user.
int CommitMain(int argc, char** argv);

// `tfrecordfs status [--json] MOUNTPOINT` (status_cmd.cc): what is staged,
// what the pack would leave staged and why, where the daemon logs. Exits 0,
// 1 when something would stay staged, 2 on a usage error, 3 when MOUNTPOINT
// is not a live mount of this user.
int StatusMain(int argc, char** argv);

// `tfrecordfs index [--index-dir PATH] [--force] SOURCE...` (index_cmd.cc)
int IndexMain(int argc, char** argv);

// The toolbox, without a mount: `tfrecordfs count|schema|show|verify ...`
// (count_cmd.cc, schema_cmd.cc, show_cmd.cc, verify_cmd.cc).
int CountMain(int argc, char** argv);
int SchemaMain(int argc, char** argv);
int ShowMain(int argc, char** argv);
int VerifyMain(int argc, char** argv);

// Reshaping, without a mount: `tfrecordfs repair|reshard ...`
// (repair_cmd.cc, reshard_cmd.cc).
int RepairMain(int argc, char** argv);
int ReshardMain(int argc, char** argv);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_COMMANDS_H_
