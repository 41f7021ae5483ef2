// The types of the feature names in the mounted shards (naming::FeatureType),
// for the staging area's checks: the mount's naming::FeatureTypes.
//
// Types are learnt from every record the mount parses (Learn, which
// RecordView calls); a name not known that way is looked for by sampling
// more records (Lookup): round-robin
// across the shards (record 0 of every shard, then record 1 of every shard,
// ...), resuming where the previous sampling stopped, and ending as soon as
// the name is found. Sampled records are read and decoded without entering
// the record cache (the working set stays), and are marked checked when
// intact; records already checked were learnt from and are passed over for
// free.
//
// Bounded: one name is sampled for at most once (a later miss of it answers
// kNone at once, unless another name's sampling learnt it), and reads at most
// the per-call budget; all names together read at most the total budget over
// the sampler's life. A record larger than the per-call byte budget is never
// sampled. So a feature present only in records past what the budget reaches
// stays kNone.
//
// Thread-safety (locks are tfrecordfs::Mutex, base/mutex.h: what
// ABSL_GUARDED_BY says is checked by scripts/thread-safety): all methods may
// be called concurrently. Lock order: sample_mu_, then types_mu_; types_mu_
// is a leaf (nothing is acquired while holding it) and is never held while a
// record is read or decoded, so a known name is answered under types_mu_
// alone while another sampling runs; sampling is serialised by sample_mu_
// (concurrent misses wait for it, then look again).
#ifndef TFRECORDFS_VFS_FEATURE_TYPE_SAMPLER_H_
#define TFRECORDFS_VFS_FEATURE_TYPE_SAMPLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/example_list.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/vfs/checked_records.h"
#include "tfrecordfs/vfs/mounted_shard.h"

namespace tfrecordfs::vfs {

// A limit on sampling: at most this many records and bytes (record framing
// included) read from the shards.
struct SampleBudget {
  uint64_t records = 0;
  uint64_t bytes = 0;
};

class FeatureTypeSampler final : public naming::FeatureTypes {
 public:
  // Samples the mounted shards `shards` (index and source each), passing
  // over the records `checked` marks and marking the intact records it
  // reads. Both are borrowed: they must outlive the sampler and not change
  // (bits aside) while it lives. Only the records a mount shows
  // (MountedShard::records_shown) are sampled. A per-call record budget of 0
  // turns sampling off.
  FeatureTypeSampler(const std::vector<MountedShard>& shards, CheckedRecords* checked,
                     SampleBudget per_call, SampleBudget total);

  // The type of `feature_name` (kind kNone if unknown): for bytes features,
  // also the tensor types of their values (naming::FeatureTypeOf). A
  // sequence list answers under `feature_lists/<name>`. Samples on a miss
  // (see above).
  naming::FeatureType Lookup(absl::string_view feature_name) override;

  // Learns the types of names not known yet (naming::FeatureTypeOf), and the
  // tensor types of known bytes names (naming::MergeFeatureType: only values that
  // start like a TensorProto have their header decoded).
  void Learn(const example::FeatureTable& table);
  // A SequenceExample's kinds: context features by name, lists under
  // `feature_lists/<name>` (the type of their first step that has a kind).
  void Learn(const example::SequenceTable& table);
  // An ExampleListWithContext's kinds: its context's and its examples'
  // features by name, as an Example's (one name space: TF-Ranking's context
  // and example feature specs are keyed by plain names too).
  void Learn(const example::ExampleListTable& table);

  // What sampling has read so far.
  uint64_t records_sampled() const { return records_sampled_.load(std::memory_order_relaxed); }
  uint64_t bytes_sampled() const { return bytes_sampled_.load(std::memory_order_relaxed); }

 private:
  void LearnOne(absl::string_view name, const example::Feature& f)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(types_mu_);
  // Reads records from the cursor on until a record gives `name` a kind or
  // a budget is spent.
  void Sample(absl::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sample_mu_);

  const std::vector<MountedShard>& shards_;
  CheckedRecords* const checked_;
  const SampleBudget per_call_;
  uint64_t rounds_ = 0;  // the most records of any shard (shown)

  // Lock order: sample_mu_, then types_mu_.
  Mutex sample_mu_;
  SampleBudget left_ ABSL_GUARDED_BY(sample_mu_);   // of the total budget
  uint64_t round_ ABSL_GUARDED_BY(sample_mu_) = 0;  // the record index sampled next
  uint64_t shard_ ABSL_GUARDED_BY(sample_mu_) = 0;  // in this shard
  bool done_ ABSL_GUARDED_BY(sample_mu_) = false;   // every record or the budget
  absl::flat_hash_set<std::string> sampled_names_ ABSL_GUARDED_BY(sample_mu_);

  Mutex types_mu_;  // leaf
  absl::flat_hash_map<std::string, naming::FeatureType> types_ ABSL_GUARDED_BY(types_mu_);

  std::atomic<uint64_t> records_sampled_{0};
  std::atomic<uint64_t> bytes_sampled_{0};
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_FEATURE_TYPE_SAMPLER_H_
