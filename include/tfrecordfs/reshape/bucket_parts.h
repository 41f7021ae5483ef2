// Parts that write into a bucket prefix (`reshard --part K/N ... --output
// s3://BUCKET/PREFIX/`, or gs://): the layout of parts.h, as objects.
//
//   PREFIX/.tfrecordfs-parts/<plan>-part-<K>/<outputs...>   part K's outputs
//   PREFIX/.tfrecordfs-parts/<plan>-part-<K>/manifest.json  put last
//   PREFIX/.tfrecordfs-parts/<plan>-map-<K>/...             a shuffle's pass 1
//   PREFIX/.tfrecordfs-parts/<plan>.finalizing              --finalize's journal
//
// A part runs as it does locally, in a local scratch folder (parts.h's work
// folder, then published there); then UploadPart puts its folder into the
// bucket: first the earlier run's manifest is deleted (the part is no
// longer published), then every file is put (one PUT with If-None-Match: *,
// or a completed multipart upload: an object appears whole or not at all),
// the manifest last. A part is published in the bucket exactly when its
// manifest is there, and its manifest names only objects put before it. A
// re-run part (a retried pod) writes the same bytes under the same keys:
// it deletes its own earlier objects and puts them again; two runs of the
// same part at once put the same bytes (a put refused because the other
// run's object took the key is accepted when the bytes are the same,
// compared with ranged GETs, else refused naming the key).
//
// --finalize (Finalize): lists PREFIX/.tfrecordfs-parts/, reads every
// manifest, judges them as the local one does (parts.h's CheckParts:
// missing, stale, foreign parts refused, nothing copied), checks that no
// final name is taken, then puts the journal `<plan>.finalizing` (the
// outputs it will copy, with each source's ETag) and copies each output
// server-side to PREFIX/<final name> (a multipart upload of UploadPartCopy
// parts pinned to the source's ETag, completed with If-None-Match: *: no
// byte crosses the network, nothing half-copied is ever under a final
// name), then deletes every object under PREFIX/.tfrecordfs-parts/, the
// journal last. The journal is the commitment: a finalize interrupted
// after it was put and run again finishes it (copies what is not under its
// final name yet, deletes the rest) without judging the parts again.
//
// A shuffle's reduce part needs every map part's runs, but only the bytes
// of the buckets of its own output shards (shuffle.h's ReduceBuckets):
// FetchMapParts downloads the map parts' small files (manifest, tables,
// totals, codec) whole and, of each run, only that byte range, written at
// its offset in a sparse local file, so that the local FindMapParts and
// ShuffleReduce read them as they read a local map's folders, and every
// record is still read about twice.
//
// Requests per part: 1 LIST, 1 + F DELETEs, F + 1 PUTs (or multipart
// uploads) for F output files; a reduce part: 1 + R ranged GETs per map part
// with R runs, plus 3 small GETs. Finalize: 1 LIST, N manifest GETs, one
// HEAD per output, per output 3 requests (create, copy, complete), 1 DELETE
// per object under .tfrecordfs-parts/.
//
// Thread-safety: a BucketParts is used by one thread.
#ifndef TFRECORDFS_RESHAPE_BUCKET_PARTS_H_
#define TFRECORDFS_RESHAPE_BUCKET_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/objstore/upload.h"
#include "tfrecordfs/reshape/parts.h"

namespace tfrecordfs::reshape {

// True for an --output that names a bucket prefix (s3://, gs://).
bool IsBucketOutput(absl::string_view output);

// A local scratch folder ($TMPDIR or /tmp, "tfrecordfs-<what>-XXXXXX"),
// removed with everything in it when destroyed: where a part writing into
// a bucket does its work.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Make(const std::string& what);
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

class BucketParts {
 public:
  // The prefix `url` (s3://BUCKET/PREFIX or gs://BUCKET/PREFIX, taken as a
  // folder), reached as the environment says (objstore/access.h).
  // Errors: objstore::ResolveUploadTarget's.
  static absl::StatusOr<std::unique_ptr<BucketParts>> Open(const std::string& url);
  // Over an already resolved target (tests).
  explicit BucketParts(objstore::UploadTarget target);
  BucketParts(const BucketParts&) = delete;
  BucketParts& operator=(const BucketParts&) = delete;

  // "s3://BUCKET/PREFIX/": how messages name the prefix.
  std::string Name() const;
  // The object's name for a path relative to the prefix.
  std::string ObjectName(const std::string& relative) const;

  // Puts the published local part folder `local_dir` (its base name
  // "<plan>-<phase>-<K>") under PREFIX/.tfrecordfs-parts/, as above.
  // Errors: I/O, the store's (naming the object), AlreadyExists for a key
  // a concurrent run filled with other bytes.
  absl::Status UploadPart(const std::string& local_dir) const;

  // Puts the local file `path` as PREFIX/`relative`, never over an
  // existing object (AlreadyExists naming it): one process's output.
  absl::Status UploadNew(const std::string& path, const std::string& relative) const;

  // The small object PREFIX/`relative` (at most 64 MiB), nullopt when
  // there is none.
  absl::StatusOr<std::optional<std::string>> ReadObject(const std::string& relative) const;
  // Puts `bytes` as PREFIX/`relative`: a new object, or replacing the one
  // there only if it did not change since this call listed it (If-Match
  // its ETag; ESTALE otherwise).
  absl::Status PutObject(const std::string& relative, const std::string& bytes) const;

  // Downloads the published map folders of parts 0..parts-1 of `plan`
  // into `local_dir`/.tfrecordfs-parts/ as described above; `buckets(totals)`
  // gives the bucket range [first, last) this part reads from the map
  // parts' totals (ReduceBuckets). FailedPrecondition naming the parts
  // whose pass 1 is not in the bucket.
  absl::Status FetchMapParts(const std::string& plan, uint32_t parts, const std::string& local_dir,
                             const std::function<absl::StatusOr<std::pair<uint32_t, uint32_t>>(
                                 const std::vector<std::string>& totals)>& buckets) const;

  // --finalize in the bucket (above); the report's outputs are relative to
  // the prefix, `removed` lists nothing. Errors: as FinalizeParts's.
  absl::StatusOr<FinalizeReport> Finalize(
      const std::string& command, const std::function<std::string(uint32_t parts)>& plan_for,
      const std::vector<ManifestInput>& current) const;

 private:
  // Puts one file under `key` (PUT or multipart); a key taken by the same
  // bytes is fine when `same_ok`.
  absl::Status PutFile(const std::string& path, const std::string& key, bool same_ok) const;
  std::string PartsKey() const;  // "PREFIX/.tfrecordfs-parts/"
  // Copies what the journal of `plan` names (those not copied yet), then
  // deletes every object of `listed` and the journal.
  absl::StatusOr<FinalizeReport> FinishFinalize(
      const std::string& plan, const std::vector<objstore::ListedObject>& listed) const;

  objstore::UploadTarget target_;
  objstore::BucketWriter writer_;
};

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_BUCKET_PARTS_H_
