// `tfrecordfs index`: builds and saves the shard indexes a mount would,
// without mounting. The source scan (scan::Scan) finds the shards and names
// them as a mount does, so the names it stores them under are the mount's.
// With --beside it writes each index next to its shard (`<shard>.tfri`),
// where every later mount finds it; with --dali-dir it also writes NVIDIA
// DALI index files.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/commands.h"
#include "src/cli/progress.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/index/dali_index.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/objstore/listing.h"
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
  index::StoreOptions store_options;
  int threads = 0;
  bool beside = false;
  std::string dali_dir;
  auto own = [&](int* i) -> std::optional<int> {
    const std::string arg = argv[*i];
    if (arg == "-v" || arg == "--verbose") {
      log::SetLevel(log::Level::kDebug);
      return kExitOk;
    }
    if (arg == "--force" || arg == "--beside") {
      (arg == "--force" ? store_options.force_walk : beside) = true;
      return kExitOk;
    }
    const std::string name = arg.substr(0, arg.find('='));
    if (name != "--index-dir" && name != "--threads" && name != "--dali-dir" && name != "--walk") {
      return std::nullopt;
    }
    std::string flag, value;
    if (!TakeValue(argc, argv, i, &flag, &value)) return tool.Usage(flag + " needs a value");
    if (flag == "--index-dir") {
      if (value.empty()) return tool.Usage("--index-dir needs a directory");
      store_options.shared_dir = value;
      store_options.write_shared = true;
    } else if (flag == "--dali-dir") {
      if (value.empty()) return tool.Usage("--dali-dir needs a directory");
      dali_dir = value;
    } else if (flag == "--walk") {
      if (value == "auto") {
        store_options.walk_mode = index::WalkMode::kAuto;
      } else if (value == "headers") {
        store_options.walk_mode = index::WalkMode::kHeaders;
      } else if (value == "blocks") {
        store_options.walk_mode = index::WalkMode::kBlocks;
      } else {
        return tool.Usage("--walk needs auto, headers or blocks");
      }
    } else if (!absl::SimpleAtoi(value, &threads) || threads <= 0) {  // --threads
      return tool.Usage("--threads needs a positive number");
    }
    return kExitOk;
  };
  if (auto stop = tool.Parse(argc, argv, own)) return *stop;
  if (auto stop = tool.NeedSources()) return *stop;
  if (beside && store_options.write_shared) {
    return tool.Usage("--beside and --index-dir are two places for the same indexes; give one");
  }
  if (beside) {
    store_options.write_beside = true;
    store_options.durable = true;  // other machines rely on these files
  } else if (store_options.write_shared) {
    store_options.durable = true;  // other machines rely on these files
  } else {
    store_options.cache_dir = index::DefaultCacheDir();
    store_options.durable = false;  // a cache: a torn file is just rebuilt
    if (store_options.cache_dir.empty()) {
      std::cerr << "tfrecordfs index: no cache directory (neither XDG_CACHE_HOME nor HOME is "
                   "set); use --index-dir PATH\n";
      return kExitFailed;
    }
  }

  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> save_failed{false};
  // --beside: directories where an index could not be written, with the
  // first reason and how many shards it cost (reported once per directory).
  // Written by the scan's threads under unwritable_mu, read once they are
  // done.
  Mutex unwritable_mu;
  std::map<std::string, std::pair<std::string, int>> unwritable_dirs;
  std::atomic<uint64_t> compressed_shards{0}, compressed_bytes{0}, compressed_index_bytes{0};
  scan::ScanOptions options;
  options.threads = threads;
  options.on_shard = [&](const scan::ScannedShard& shard) {
    const index::LoadInfo& info = shard.info;
    const uint64_t size = static_cast<uint64_t>(shard.st.st_size);
    if (!info.save_status.ok()) {
      save_failed = true;
      if (store_options.write_shared) {
        log::Error(shard.path, ": cannot save its index: ", info.save_status.message());
      } else if (beside) {
        MutexLock lock(&unwritable_mu);
        auto& [why, count] = unwritable_dirs[Dirname(shard.path)];
        if (count++ == 0) why = std::string(info.save_status.message());
      }
    }
    log::Debug(shard.path, ": ", shard.index->num_records(), " record(s), index ",
               index::IndexSourceName(info.source),
               info.stored_path.empty() ? "" : absl::StrCat(" (", info.stored_path, ")"));
    if (shard.codec != source::Codec::kNone) {
      compressed_shards.fetch_add(1);
      compressed_bytes.fetch_add(size);
      compressed_index_bytes.fetch_add(info.index_bytes);
    }
  };
  if (auto stop = tool.Scan(store_options, std::move(options), "not indexed")) return *stop;
  for (const scan::ScannedShard& shard : tool.shards()) {
    for (const std::string& line : index::FormatProblems(shard.path, shard.index->problems())) {
      log::Warning(line);
    }
    if (!shard.index->problems().empty()) {
      log::Warning(shard.path, ": damaged shard: ", shard.index->num_records(),
                   " record(s) indexed");
    }
  }
  bool dali_failed = false;
  uint64_t dali_written = 0;
  std::vector<std::string> dali_compressed;
  if (!dali_dir.empty()) {
    for (const scan::ScannedShard& shard : tool.shards()) {
      if (shard.codec != source::Codec::kNone) {
        dali_compressed.push_back(shard.path);
        continue;
      }
      if (!shard.index->problems().empty()) {
        log::Error(shard.path,
                   ": no DALI index: the shard is damaged (DALI would fail on it; "
                   "see tfrecordfs verify)");
        dali_failed = true;
        continue;
      }
      const std::string target = absl::StrCat(dali_dir, "/", shard.mount_path, ".idx");
      absl::Status st = MakeDirs(Dirname(target), 0755);
      // Recorded (index/dali_index.h) so that a commit of record edits
      // rewrites it with the shard.
      const std::string text = index::DaliIndexText(shard.index->offsets());
      if (st.ok()) st = WriteFileAtomically(target, text);
      if (st.ok()) st = index::RecordDaliIndex(shard.path, RealPath(target).value_or(target), text);
      if (!st.ok()) {
        log::Error(shard.path, ": cannot write its DALI index: ", st.message());
        dali_failed = true;
        continue;
      }
      ++dali_written;
    }
    if (!dali_compressed.empty()) {
      log::Warning(dali_compressed.size(),
                   " GZIP/ZLIB shard(s) got no DALI index: DALI reads "
                   "the raw file bytes and cannot use an index of compressed records (",
                   dali_compressed.front(), dali_compressed.size() > 1 ? ", ..." : "", ")");
    }
  }
  for (const auto& [dir, failure] : unwritable_dirs) {
    log::Error("cannot write indexes beside the shards in ", dir, " (", failure.second,
               " shard(s)): ", failure.first,
               objstore::IsObjectUrl(dir)
                   ? "; may these credentials write into the bucket? Without --beside the "
                     "indexes go to the per-user cache"
                   : "; is the directory writable? --index-dir PATH keeps them elsewhere");
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const index::StoreStats s = tool.store()->stats();
  std::string out;
  if (!tool.quiet()) {
    absl::StrAppendFormat(
        &out,
        "indexed %d shard(s), %d record(s), %s in %.3f s (%s records/s): %d walked, %d grown, "
        "%d already valid; index files %s\n",
        s.from_shared + s.from_cache + s.grown + s.walked, s.records,
        HumanBytes(static_cast<double>(s.bytes)), secs,
        HumanCount(secs > 0 ? static_cast<double>(s.records) / secs : 0), s.walked, s.grown,
        s.from_shared + s.from_cache,
        beside                       ? std::string("beside the shards")
        : store_options.write_shared ? "in " + store_options.shared_dir
                                     : "in " + store_options.cache_dir);
  }
  if (!tool.quiet() && compressed_index_bytes > 0) {
    absl::StrAppendFormat(
        &out,
        "%d compressed shard(s), %s: their new index files take %s (%.2f%% of the compressed "
        "size, %s per GiB)\n",
        compressed_shards.load(), HumanBytes(static_cast<double>(compressed_bytes.load())),
        HumanBytes(static_cast<double>(compressed_index_bytes.load())),
        100.0 * static_cast<double>(compressed_index_bytes.load()) /
            static_cast<double>(compressed_bytes.load()),
        HumanBytes(static_cast<double>(compressed_index_bytes.load()) * (1 << 30) /
                   static_cast<double>(compressed_bytes.load())));
  }
  if (!tool.quiet() && !dali_dir.empty()) {
    absl::StrAppendFormat(&out, "wrote %d DALI index file(s) in %s\n", dali_written, dali_dir);
  }
  const int code = tool.Finish(out, !save_failed && !dali_failed);
  if (save_failed) log::Error(s.save_failures, " index file(s) could not be saved");
  return code;
}

}  // namespace tfrecordfs::cli
