#include "tfrecordfs/vfs/feature_type_sampler.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

FeatureTypeSampler::FeatureTypeSampler(const std::vector<MountedShard>& shards,
                                       CheckedRecords* checked, SampleBudget per_call,
                                       SampleBudget total)
    : shards_(shards), checked_(checked), per_call_(per_call) {
  for (const MountedShard& s : shards_) rounds_ = std::max(rounds_, s.records_shown());
  MutexLock lock(&sample_mu_);
  left_ = total;
  done_ = per_call.records == 0;
}

void FeatureTypeSampler::LearnOne(absl::string_view name, const example::Feature& f) {
  if (f.kind == example::Kind::kNone) return;
  auto it = types_.find(name);
  if (it == types_.end()) {
    types_.try_emplace(std::string(name), naming::FeatureTypeOf(f));
  } else {
    naming::MergeFeatureType(&it->second, f);  // a first byte per value, for most values
  }
}

void FeatureTypeSampler::Learn(const example::FeatureTable& table) {
  MutexLock lock(&types_mu_);
  for (const auto& f : table.features) LearnOne(f.name, f);
}

void FeatureTypeSampler::Learn(const example::ExampleListTable& table) {
  Learn(table.context);
  for (const example::FeatureTable& ex : table.examples) Learn(ex);
}

void FeatureTypeSampler::Learn(const example::SequenceTable& table) {
  Learn(table.context);
  MutexLock lock(&types_mu_);
  std::string key;
  for (const auto& list : table.lists) {
    for (const auto& step : list.steps) {
      if (step.kind == example::Kind::kNone) continue;
      key.assign(naming::kFeatureListsDir.data(), naming::kFeatureListsDir.size());
      absl::StrAppend(&key, "/", list.name);
      LearnOne(key, step);
      break;
    }
  }
}

naming::FeatureType FeatureTypeSampler::Lookup(absl::string_view feature_name) {
  const std::string name(feature_name);
  auto known = [&]() -> std::optional<naming::FeatureType> {
    MutexLock lock(&types_mu_);
    auto it = types_.find(name);
    if (it == types_.end()) return std::nullopt;
    return it->second;
  };
  if (auto type = known()) return *type;
  MutexLock lock(&sample_mu_);
  // Another caller may have sampled while this one waited.
  if (auto type = known()) return *type;
  // A name is sampled for once: its files are validated at every close() and
  // again by the pack, and each would otherwise spend a per-call budget.
  if (done_ || !sampled_names_.insert(name).second) return {};
  Sample(name);
  // The tree's own reads may have taught it meanwhile, too.
  return known().value_or(naming::FeatureType{});
}

void FeatureTypeSampler::Sample(absl::string_view name) {
  // Round-robin over the shards, record index by record index: shards are
  // often written by different workers from different inputs, so spreading
  // the reads meets more of the features sooner than reading one shard
  // through would.
  SampleBudget spent;
  auto finish = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sample_mu_) {
    // every record seen, or the whole-mount budget spent
    done_ = true;
    sampled_names_.clear();  // only asked while sampling goes on
  };
  while (!done_) {
    if (shard_ >= shards_.size()) {
      shard_ = 0;
      ++round_;
    }
    if (round_ >= rounds_ || left_.records == 0) {
      finish();
      break;
    }
    if (spent.records >= per_call_.records) break;
    const uint64_t shard = shard_, record = round_;
    const index::ShardIndex& idx = *shards_[shard].index;
    // Records read for the tree (checked) have taught their kinds already.
    if (record >= shards_[shard].records_shown() || checked_->Checked(shard, record)) {
      ++shard_;
      continue;
    }
    const uint64_t size = idx.end(record) - idx.begin(record);
    if (size > per_call_.bytes) {  // never fits: passed over for good
      ++shard_;
      continue;
    }
    if (size > per_call_.bytes - spent.bytes) break;  // the next call's
    if (size > left_.bytes) {
      finish();
      break;
    }
    ++shard_;
    ++spent.records;
    spent.bytes += size;
    --left_.records;
    left_.bytes -= size;
    records_sampled_.fetch_add(1, std::memory_order_relaxed);
    bytes_sampled_.fetch_add(size, std::memory_order_relaxed);
    // Read and decoded as the tree's reads do, but not cached: sampling many
    // records must not evict the records the user is working with.
    auto data =
        record::ReadRecord(*shards_[shard].source, record, idx.begin(record), idx.end(record));
    if (!data.ok()) {
      // Reported (as EIO) when the record itself is opened.
      log::Debug("sampling feature kinds: ", data.status().message());
      continue;
    }
    checked_->MarkChecked(shard, record);  // intact: what the tree's read would have found
    const example::DecodedRecord decoded = example::DecodeRecord(*data);
    if (decoded.kind == example::PayloadKind::kRaw) continue;  // no feature kinds
    if (decoded.kind == example::PayloadKind::kSequenceExample ||
        decoded.kind == example::PayloadKind::kExampleList ||
        decoded.kind == example::PayloadKind::kExampleInExample) {
      if (decoded.kind == example::PayloadKind::kSequenceExample) {
        Learn(decoded.sequence);
      } else {
        Learn(decoded.list);
      }
      MutexLock lock(&types_mu_);
      if (types_.contains(std::string(name))) return;
      continue;
    }
    const example::FeatureTable* table = &decoded.example;
    Learn(*table);
    auto it =
        std::lower_bound(table->features.begin(), table->features.end(), name,
                         [](const example::Feature& f, absl::string_view n) { return f.name < n; });
    if (it != table->features.end() && it->name == name && it->kind != example::Kind::kNone) {
      return;
    }
  }
}

}  // namespace tfrecordfs::vfs
