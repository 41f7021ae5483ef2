// `tfrecordfs pack`: the mount's unmount-time pack, offline, on a plain
// directory of record folders. A thin adapter over repack::Pack.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/cli/commands.h"
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
                     SIZE then bounds the uncompressed bytes
  -v, --verbose      log progress to stderr
  -h, --help         show this help and exit

Exit status: 0 when every record was packed, 1 when some record was left
out or the pack failed, 2 on a usage error.
)";

int Usage(const std::string& message) { return UsageError("pack", message); }

}  // namespace

int PackMain(int argc, char** argv) {
  repack::PackOptions options;
  options.remove_packed = false;
  bool verbose = false;
  std::vector<std::string> positional;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (options_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::cout << kPackUsage;
      return kExitOk;
    }
    if (arg == "-v" || arg == "--verbose") {
      verbose = true;
      continue;
    }
    // --flag VALUE or --flag=VALUE
    std::string value;
    std::string flag = arg;
    if (size_t eq = arg.find('='); absl::StartsWith(arg, "--") && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (flag == "--shard-size" || flag == "--prefix" || flag == "--compression") {
      if (i + 1 >= argc) return Usage(absl::StrCat(flag, " needs a value"));
      value = argv[++i];
    }
    if (flag == "--shard-size") {
      auto size = ParseSize(value);
      if (!size.ok()) return Usage(std::string(size.status().message()));
      options.shard_size = *size;
    } else if (flag == "--prefix") {
      if (auto s = repack::ValidatePrefix(value); !s.ok()) return Usage(std::string(s.message()));
      options.prefix = value;
    } else if (flag == "--compression") {
      auto codec = source::ParseCodecName(value);
      if (!codec) {
        return Usage(absl::StrCat("--compression needs none, gzip or zlib, not '", value, "'"));
      }
      options.compression = *codec;
    } else {
      return Usage(absl::StrCat("unknown option '", arg, "'"));
    }
  }
  if (positional.size() != 2) {
    return Usage(positional.size() < 2 ? "expected DIR and OUTPUT_DIR"
                                       : "too many arguments (expected DIR and OUTPUT_DIR)");
  }
  options.records_dir = positional[0];
  options.output_dir = positional[1];
  options.journal_path = absl::StrCat(options.output_dir, "/", repack::kDefaultJournalName);

  // The summary on stdout says everything the log would; keep stderr for
  // errors unless asked.
  if (!verbose) log::SetLevel(log::Level::kError);
  // Pack first runs Recover on the journal, finishing an interrupted pack.
  repack::PackReport report = repack::Pack(options);
  // Pack has logged a failure to stderr already: stdout keeps what was
  // written and what stayed staged, and the error is said once.
  std::string summary = report.Summary();
  if (!report.status.ok()) {
    absl::string_view rest = summary;
    if (absl::ConsumeSuffix(&rest, absl::StrCat("pack failed: ", report.status.message(), "\n"))) {
      summary = std::string(rest);
    }
  }
  std::cout << summary;
  if (!report.status.ok()) return kExitFailed;
  return report.left.empty() ? kExitOk : kExitFailed;
}

}  // namespace tfrecordfs::cli
