// Finding the shards in a set of sources, the way a mount finds them, without
// building a mount.
//
// A SOURCE is a shard file or a directory. A directory is searched
// recursively; its entries appear at the root of the namespace a mount would
// show, and a file source appears there under its base name. Entries are
// visited in name order (bytewise); symlinks are followed, a directory met a
// second time (a symlink loop) is not entered again; fifos, sockets and
// devices are skipped; `X.tfri` beside a sibling `X` is X's index (index
// /index_store.h, "beside the shard") and skipped, as the mount hides it.
// Every regular file is probed by content
// (index::ProbeFile: plain, GZIP or ZLIB TFRecord framing); the shards are
// indexed through an IndexStore (so cached and shared indexes are used and
// new ones written back) or, without one, by a walk.
//
// `mount_path` is the path a mount of the same sources shows a shard at
// ("train/x-00001-of-00010.tfrecord"); it keys the shared index directory
// and names DALI index files. The rules here must match vfs::Filesystem's.
//
// Thread-safety: Scan() runs probes and walks on its own threads and calls
// the `on_shard` hook from them; the results are plain values.
#ifndef TFRECORDFS_SCAN_SCAN_H_
#define TFRECORDFS_SCAN_SCAN_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::scan {

struct ScannedShard {
  std::string path;        // as reached from the SOURCE (not resolved)
  std::string mount_path;  // where a mount shows it
  source::Codec codec = source::Codec::kNone;
  struct stat st = {};  // when probed
  std::shared_ptr<const index::ShardIndex> index;
  index::LoadInfo info;  // where the index came from (kWalked without a store)
};

// A regular file that is not a shard.
struct OtherFile {
  std::string path;
  std::string mount_path;
  // Set when the file is GZIP/ZLIB but holds no TFRecord framing.
  source::Codec codec = source::Codec::kNone;
  // Its name looks like a shard's (index::LooksLikeShardName).
  bool shard_like_name = false;
};

struct ScanOptions {
  std::vector<std::string> sources;
  // Loads indexes; null: every shard is walked and nothing is saved.
  index::IndexStore* store = nullptr;
  // Probing and indexing threads; 0: one per CPU (at most 16), or
  // index::kRemoteWalkThreads when a source is on remote storage
  // (source::OnRemoteStorage), where a walk waits on round trips, not CPU.
  int threads = 0;
  // Called once per shard as soon as it is indexed, from a scan thread.
  std::function<void(const ScannedShard&)> on_shard;
};

struct ScanResult {
  std::vector<ScannedShard> shards;  // in mount order (depth first, by name)
  std::vector<OtherFile> others;
};

// Scans `options.sources`. Errors: a SOURCE that does not exist or is
// neither a file nor a directory, a directory that cannot be listed, two
// sources giving the same name at one place of the mount (AlreadyExists),
// and I/O errors while probing or walking. Damaged shards are not errors:
// their index holds the walk's problems.
absl::StatusOr<ScanResult> Scan(const ScanOptions& options);

// Opens a scanned shard for reading through its index (a PlainSource, or an
// InflateSource over its checkpoints using `cache`, which must outlive the
// source). FailedPrecondition when the file changed (size or mtime) since it
// was indexed.
absl::StatusOr<std::unique_ptr<source::ShardSource>> OpenShard(const ScannedShard& shard,
                                                               source::BlockCache* cache);

// One shard given by its path (the `show` command): probes it and indexes
// it through `store` (or a walk when null). InvalidArgument when it is not
// a TFRecord shard.
absl::StatusOr<ScannedShard> ScanOne(const std::string& path, index::IndexStore* store);

}  // namespace tfrecordfs::scan

#endif  // TFRECORDFS_SCAN_SCAN_H_
