// tfrecordfs: the subcommands, else a mount (commands.h).
#include <cstring>

#include "src/cli/commands.h"

int main(int argc, char** argv) {
  namespace cli = tfrecordfs::cli;
  struct Command {
    const char* name;
    int (*main)(int, char**);
  };
  static constexpr Command kCommands[] = {
      {"pack", cli::PackMain},       {"unmount", cli::UnmountMain}, {"index", cli::IndexMain},
      {"count", cli::CountMain},     {"schema", cli::SchemaMain},   {"show", cli::ShowMain},
      {"verify", cli::VerifyMain},   {"status", cli::StatusMain},   {"repair", cli::RepairMain},
      {"reshard", cli::ReshardMain}, {"commit", cli::CommitMain},
  };
  if (argc >= 2) {
    for (const Command& c : kCommands) {
      if (std::strcmp(argv[1], c.name) == 0) return c.main(argc - 1, argv + 1);
    }
  }
  return cli::MountMain(argc, argv);
}
