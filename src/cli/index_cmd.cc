// `tfrecordfs index`: builds and saves the shard indexes a mount would,
// without mounting. The source scan (scan::Scan) finds the shards and names
// them as a mount does, so the names it stores them under are the mount's.
// With --beside it writes each index next to its shard (`<shard>.tfri`),
// where every later mount finds it; with --dali-dir it also writes NVIDIA
// DALI index files.
#include <chrono>
#include <iostream>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "src/cli/commands.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/scan/indexing.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kIndexUsage[] = R"(Usage: tfrecordfs index [options] SOURCE...

Walks the record headers of every shard in the SOURCEs (shard files, or
directories searched recursively, exactly as a mount would) and saves each
shard's index, so that a later mount of the same SOURCEs loads the indexes
instead of walking the shards. Indexes that are still valid are kept; a shard
that only grew is walked from its old end.

Options:
  --beside          save each index beside its shard, <shard>.tfri (the
                    shard's directory must be writable; for an object, a
                    PUT of <object>.tfri into its bucket): every later
                    mount of the shards, on any machine, loads it unless
                    mounted with -o nobeside, and the mount does not show
                    it; the per-user cache is then left alone
  --index-dir PATH  save the indexes under PATH, laid out like the mount
                    (PATH/<path in the mount>.tfri), for mounts with
                    -o index_dir=PATH, e.g. on storage that many machines
                    share; the per-user cache is then left alone
  --dali-dir DIR    also write an NVIDIA DALI index for every plain shard,
                    DIR/<path in the mount>.idx, one line "<offset> <size>"
                    per record as DALI's tfrecord2idx writes them (DALI
                    reads raw bytes: GZIP/ZLIB shards get none, and are
                    named; a damaged shard gets none and fails the command)
  --force           walk every shard even when its saved index is valid
  --threads N       shards walked in parallel (default: CPUs, at most 16;
                    32 when a SOURCE is on network storage, where a walk
                    waits on round trips, not on the CPU)
  --walk MODE       how shard headers are read: headers (one read per
                    record header: local disks), blocks (8 MiB sequential
                    reads: network storage, where every read is a round
                    trip) or auto (blocks on FUSE/NFS/CIFS/Lustre/Ceph/9p,
                    else headers; the default)
  -q, --quiet       no progress bar and no summary
  -v, --verbose     say for each shard where its index came from
)";
constexpr char kIndexUsageEnd[] = R"(
Without --beside or --index-dir the indexes go to the per-user cache,
${XDG_CACHE_HOME:-~/.cache}/tfrecordfs/index. On a terminal, a progress bar
(shards, records, bytes, rate, ETA) is drawn on stderr; a summary line goes
to stdout. Damaged shards are reported and indexed up to the damage, as a
mount shows them.

Exit status: 0 when every shard's index is saved (or was valid already), 1
when a SOURCE cannot be read, an index cannot be saved, or a DALI index
cannot be written, 2 on a usage error.
)";

// index's command line.
struct IndexFlags {
  index::StoreOptions store;  // where the indexes go, how shards are walked
  int threads = 0;            // 0: the scan's default
  bool beside = false;
  std::string dali_dir;  // "" without --dali-dir
  scan::IndexPlace place() const {
    return beside               ? scan::IndexPlace::kBeside
           : store.write_shared ? scan::IndexPlace::kShared
                                : scan::IndexPlace::kCache;
  }
};

// Parses index's flags into `*f` (the store placed as they say); an exit
// code when the command stops here.
std::optional<int> ParseIndex(int argc, char** argv, Tool* tool, IndexFlags* f) {
  auto own = [&](int* i) -> std::optional<int> {
    const std::string arg = argv[*i];
    if (arg == "-v" || arg == "--verbose") {
      log::SetLevel(log::Level::kDebug);
      return kExitOk;
    }
    if (arg == "--force" || arg == "--beside") {
      (arg == "--force" ? f->store.force_walk : f->beside) = true;
      return kExitOk;
    }
    const std::string name = arg.substr(0, arg.find('='));
    if (name != "--index-dir" && name != "--threads" && name != "--dali-dir" && name != "--walk") {
      return std::nullopt;
    }
    std::string flag, value;
    if (!TakeValue(argc, argv, i, &flag, &value)) return tool->Usage(flag + " needs a value");
    if (flag == "--index-dir") {
      if (value.empty()) return tool->Usage("--index-dir needs a directory");
      f->store.shared_dir = value;
      f->store.write_shared = true;
    } else if (flag == "--dali-dir") {
      if (value.empty()) return tool->Usage("--dali-dir needs a directory");
      f->dali_dir = value;
    } else if (flag == "--walk") {
      if (value == "auto") {
        f->store.walk_mode = index::WalkMode::kAuto;
      } else if (value == "headers") {
        f->store.walk_mode = index::WalkMode::kHeaders;
      } else if (value == "blocks") {
        f->store.walk_mode = index::WalkMode::kBlocks;
      } else {
        return tool->Usage("--walk needs auto, headers or blocks");
      }
    } else if (!absl::SimpleAtoi(value, &f->threads) || f->threads <= 0) {  // --threads
      return tool->Usage("--threads needs a positive number");
    }
    return kExitOk;
  };
  if (auto stop = tool->Parse(argc, argv, own)) return *stop;
  if (auto stop = tool->NeedSources()) return *stop;
  if (f->beside && f->store.write_shared) {
    return tool->Usage("--beside and --index-dir are two places for the same indexes; give one");
  }
  if (f->beside) {
    f->store.write_beside = true;
    f->store.durable = true;  // other machines rely on these files
  } else if (f->store.write_shared) {
    f->store.durable = true;  // other machines rely on these files
  } else {
    f->store.cache_dir = index::DefaultCacheDir();
    f->store.durable = false;  // a cache: a torn file is just rebuilt
    if (f->store.cache_dir.empty()) {
      std::cerr << "tfrecordfs index: no cache directory (neither XDG_CACHE_HOME nor HOME is "
                   "set); use --index-dir PATH\n";
      return kExitFailed;
    }
  }

  return std::nullopt;
}

}  // namespace

int IndexMain(int argc, char** argv) {
  Tool tool({.name = "index",
             .usage = kIndexUsage,
             .usage_end = kIndexUsageEnd,
             .usage_column = 20,
             .quiet_row = false,
             .json = false,
             .indexes = true,
             .parts = true});
  IndexFlags flags;
  if (auto stop = ParseIndex(argc, argv, &tool, &flags)) return *stop;
  const auto start = std::chrono::steady_clock::now();
  scan::IndexTally tally(flags.place());
  scan::ScanOptions options;
  options.threads = flags.threads;
  options.on_shard = [&](const scan::ScannedShard& shard) { tally.Observe(shard); };
  if (auto stop = tool.Scan(flags.store, std::move(options), "not indexed")) return *stop;
  LogDamagedShards(tool.shards());
  std::optional<scan::DaliResult> dali;
  if (!flags.dali_dir.empty()) dali = scan::WriteDaliIndexes(tool.shards(), flags.dali_dir);
  const IndexRun run{
      .stats = tool.store()->stats(),
      .seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      .totals = tally.totals(),
      .dali = dali ? &*dali : nullptr,
      .dali_dir = flags.dali_dir,
      .where = flags.beside               ? std::string("beside the shards")
               : flags.store.write_shared ? "in " + flags.store.shared_dir
                                          : "in " + flags.store.cache_dir};
  const std::string out = IndexReport(run, tool.quiet());
  const int code = tool.Finish(out, !run.totals.save_failed && !(dali && dali->failed));
  if (run.totals.save_failed) {
    log::Error(run.stats.save_failures, " index file(s) could not be saved");
  }
  return code;
}

}  // namespace tfrecordfs::cli
