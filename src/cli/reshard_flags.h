// reshard's command line (reshard_cmd.cc's parse step): its flags read into
// ReshardFlags and checked against each other before any SOURCE is read,
// and what is decided once the shards are known (the output's format and
// codec). Usage errors are InvalidArgument with the message `tfrecordfs
// reshard: MESSAGE` says (Tool::Usage), so a unit test reads them.
//
// Thread-safety: none; the command's main thread parses.
#ifndef TFRECORDFS_CLI_RESHARD_FLAGS_H_
#define TFRECORDFS_CLI_RESHARD_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/reshape/reshard_run.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::cli {

// What reshard's own flags say.
struct ReshardFlags {
  std::string output;  // -o/--output: a folder or a bucket prefix
  // --shards, --shard-size (the default 128M when neither is given),
  // --prefix, --shuffle, --seed, --skip-damaged, --buffer, --memory,
  // --group-size; options.part is the Tool's part; the codec is
  // ResolveReshardFormat's.
  reshape::ReshardOptions options;
  bool seeded = false;       // --seed given
  bool codec_given = false;  // --compression given: its value in `compression`
  std::string compression;   // read once the format is known
  std::string format;        // --format: "tfrecord", "arrayrecord", "" (from the sources)
  std::string group_size;    // --group-size as given ("" without)
  std::string pass;          // --pass: "map", "reduce", "" (a shuffle's as parts)
};

// The Tool reshard runs with: its name, --help and the shared flags it
// takes (parts, --finalize, the object-storage flags). reshard_cmd.cc.
ToolSpec ReshardSpec();

// Parses reshard's command line through `tool` (made with ReshardSpec():
// the shared flags, the part, the operands) and checks the flags against
// each other as far as they can be without the shards. After -h/--help
// (tool->help()) nothing is checked. The flags; InvalidArgument with the
// usage message.
absl::StatusOr<ReshardFlags> ParseReshard(Tool* tool, int argc, char** argv);

// What shapes the output, as a plan's salt (Tool::SetPlanSalt): the parts
// of another reshard are foreign to this one.
std::string ReshardPlanSalt(const ReshardFlags& flags);

// Once the shards are known: the output's format (--format, else
// arrayrecord when every shard is an ArrayRecord file) and codec
// (--compression, else the shards' common one) into flags->options.
// InvalidArgument with the usage message (--group-size without
// arrayrecord, a --compression the format does not take).
absl::Status ResolveReshardFormat(const std::vector<scan::ScannedShard>& shards,
                                  ReshardFlags* flags);

// After Scan and ResolveReshardFormat: the run step's job
// (reshape/reshard_run.h) from `tool` (its shards, listing and plan) and
// `flags`; the caller adds the output (reshape::OpenReshardOutput of
// flags.output) and the Control.
reshape::ReshardJob ReshardJobOf(const Tool& tool, const ReshardFlags& flags);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_RESHARD_FLAGS_H_
