// Subcommands of the tfrecordfs binary, dispatched from main.cc by argv[1].
// Each takes the arguments from the subcommand name on (argv[0] is the
// subcommand) and returns the process exit status: 0 success, 1 failure,
// 2 usage error.
#ifndef TFRECORDFS_CLI_COMMANDS_H_
#define TFRECORDFS_CLI_COMMANDS_H_

namespace tfrecordfs::cli {

// `tfrecordfs pack [--shard-size SIZE] [--prefix NAME] [--compression C] DIR OUTPUT_DIR`
int PackMain(int argc, char** argv);

// `tfrecordfs unmount MOUNTPOINT` (unmount_cmd.cc)
int UnmountMain(int argc, char** argv);

// `tfrecordfs index [--index-dir PATH] [--force] SOURCE...` (index_cmd.cc)
int IndexMain(int argc, char** argv);

// The toolbox, without a mount: `tfrecordfs count|schema|show|verify ...`
// (count_cmd.cc, schema_cmd.cc, show_cmd.cc, verify_cmd.cc).
int CountMain(int argc, char** argv);
int SchemaMain(int argc, char** argv);
int ShowMain(int argc, char** argv);
int VerifyMain(int argc, char** argv);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_COMMANDS_H_
