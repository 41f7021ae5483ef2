// `tfrecordfs pack`: the mount's unmount-time pack, offline, on a plain
// directory of record folders. A thin adapter over repack::Pack.
#include <sys/stat.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/repack/journal.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kPackUsage[] =
    R"(Usage: tfrecordfs pack [--shard-size SIZE] [--prefix NAME] [--compression C] DIR OUTPUT_DIR

Packs every record folder in DIR (each direct subdirectory is one record, in
name order; the layout a tfrecordfs mount shows) into new TFRecord shards
OUTPUT_DIR/NAME-00000-of-0000N.tfrecord. DIR is never modified. Folders that
do not form a valid record are listed with the reason and left out.
OUTPUT_DIR (and its parents) is created when missing, as by repair and
reshard.

A numeric file (no extension) packs as the kind its user.tfrecordfs.kind
attribute names (cp -a keeps it, cp -r drops it); without one, as its text
says: int64 when every line is a whole number, else float (the mount writes
floats with a decimal point, 1.0, so they come back as floats). The report
lists each file whose kind was so inferred.

A shard appears under its final name only once it is complete and on disk;
an interrupted pack is cleaned up by the next `pack` into the same
OUTPUT_DIR (its journal is OUTPUT_DIR/.tfrecordfs-pack.journal).

Options:
  --shard-size SIZE  close a shard before it would exceed SIZE bytes; K, M, G
                     suffixes are binary multiples (default 128M)
  --prefix NAME      shard name prefix (default staged-<UTC yyyymmddThhmmss>)
  --compression C    none (default), gzip (NAME-00000-of-0000N.tfrecord.gz)
                     or zlib (.tfrecord.zlib): one stream per shard, as
                     tf.io.TFRecordWriter writes with that compression type;
                     SIZE then bounds the uncompressed bytes. Without it,
                     an OUTPUT_DIR of ArrayRecord files (and no TFRecord
                     shard) gets an ArrayRecord file NAME.array_record-
                     00000-of-0000N with the options their footers record
  -v, --verbose      log progress to stderr
)";
constexpr char kPackUsageEnd[] = R"(
Exit status: 0 when every record was packed, 1 when some record was left
out or the pack failed, 2 on a usage error.
)";

// pack's command line.
struct PackFlags {
  repack::PackOptions options;  // records_dir, output_dir, journal, shard size, prefix, codec
  bool verbose = false;         // -v: progress logged on stderr
  bool compression_given = false;
};

// Parses pack's command line through `tool`; InvalidArgument with the
// usage message. After -h/--help (tool->help()) nothing is checked.
absl::StatusOr<PackFlags> ParsePack(Tool* tool, int argc, char** argv) {
  PackFlags f;
  repack::PackOptions& options = f.options;
  options.remove_packed = false;
  const absl::Status parsed = tool->ParseFlags(argc, argv, [&](int* i) -> absl::StatusOr<bool> {
    const std::string arg = argv[*i];
    if (arg == "-v" || arg == "--verbose") {
      f.verbose = true;
      return true;
    }
    const std::string name = absl::StartsWith(arg, "--") ? arg.substr(0, arg.find('=')) : arg;
    if (name != "--shard-size" && name != "--prefix" && name != "--compression") {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
    std::string flag, value;
    if (!TakeValue(argc, argv, i, &flag, &value)) {
      return absl::InvalidArgumentError(flag + " needs a value");
    }
    if (flag == "--shard-size") {
      auto size = ParseSize(value);
      if (!size.ok()) return size.status();
      options.shard_size = *size;
    } else if (flag == "--prefix") {
      if (auto s = repack::ValidatePrefix(value); !s.ok()) return s;
      options.prefix = value;
    } else {
      auto codec = CompressionFlag(value);
      if (!codec.ok()) return codec.status();
      options.compression = *codec;
      f.compression_given = true;
    }
    return true;
  });
  if (!parsed.ok()) return parsed;
  if (tool->help()) return f;
  const std::vector<std::string>& positional = tool->operands();
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(positional.size() < 2
                                          ? "expected DIR and OUTPUT_DIR"
                                          : "too many arguments (expected DIR and OUTPUT_DIR)");
  }
  options.records_dir = positional[0];
  options.output_dir = positional[1];
  options.journal_path = absl::StrCat(options.output_dir, "/", repack::kDefaultJournalName);
  return f;
}

}  // namespace

int PackMain(int argc, char** argv) {
  Tool tool({.name = "pack",
             .usage = kPackUsage,
             .usage_end = kPackUsageEnd,
             .usage_column = 21,
             .json = false,
             .quiet = false});
  auto flags = ParsePack(&tool, argc, argv);
  if (auto stop = tool.Stop(flags.status())) return *stop;
  repack::PackOptions& options = flags->options;
  if (auto ar = flags->compression_given ? std::nullopt
                                         : repack::ArrayRecordDatasetIn(options.output_dir)) {
    options.compression = source::Codec::kArrayRecord;  // the dataset's own format
    options.array_record = *ar;
  }

  // OUTPUT_DIR is created when missing, as repair and reshard create
  // theirs (one rule for the toolbox); only once DIR is known to be a
  // folder, so that a mistyped DIR leaves nothing behind.
  struct stat st;
  // A directory that cannot be made fails the pack itself, which says so
  // once (naming the output directory and why).
  if (::stat(options.records_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    (void)MakeDirs(options.output_dir, 0755);
  }
  // The summary on stdout says everything the log would; keep stderr for
  // errors unless asked.
  if (!flags->verbose) log::SetLevel(log::Level::kError);
  // Pack first runs Recover on the journal, finishing an interrupted pack.
  const repack::PackReport report = repack::Pack(options);
  return tool.Finish(PackReport(report), report.status.ok() && report.left.empty());
}

}  // namespace tfrecordfs::cli
