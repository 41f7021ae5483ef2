// Reshard (reshape.h): plan the output order and shard boundaries from the
// indexes alone, then copy the records in batches (each batch read in file
// order, written in output order).
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "src/reshape/internal.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/plan.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/reshape/shuffle.h"

namespace tfrecordfs::reshape {
namespace {

// Where global record g (inputs concatenated in order) lives.
struct Ref {
  size_t input;
  uint64_t record;
};

class Plan {
 public:
  explicit Plan(const std::vector<Input>& inputs) : inputs_(inputs) {
    starts_.push_back(0);
    for (const Input& in : inputs) starts_.push_back(starts_.back() + in.index->num_records());
  }
  uint64_t total() const { return starts_.back(); }
  Ref At(uint64_t g) const {
    const size_t i = std::upper_bound(starts_.begin(), starts_.end(), g) - starts_.begin() - 1;
    return {i, g - starts_[i]};
  }
  uint64_t Framed(const Ref& r) const {
    const index::ShardIndex& idx = *inputs_[r.input].index;
    return idx.end(r.record) - idx.begin(r.record);
  }

 private:
  const std::vector<Input>& inputs_;
  std::vector<uint64_t> starts_;  // starts_[i]: global number of input i's record 0
};

// Positions [bounds[s], bounds[s+1]) go to output shard s.
std::vector<uint64_t> Boundaries(const Plan& plan, const ReshardOptions& o) {
  const uint64_t n = plan.total();
  std::vector<uint64_t> bounds = {0};
  if (o.shards > 0) {
    const uint64_t base = n / o.shards, extra = n % o.shards;
    for (uint64_t s = 0; s < o.shards; ++s) bounds.push_back(bounds.back() + base + (s < extra));
    return bounds;
  }
  uint64_t in_shard = 0;
  for (uint64_t p = 0; p < n; ++p) {
    const uint64_t framed = plan.Framed(plan.At(p));
    if (p > bounds.back() && in_shard + framed > o.shard_size) {
      bounds.push_back(p);
      in_shard = 0;
    }
    in_shard += framed;
  }
  if (n > 0) bounds.push_back(n);
  return bounds;
}

}  // namespace

namespace {

// A shuffled reshard in one process: both passes of shuffle.h, the runs in
// a work folder of output_dir's parts folder (removed whatever happens).
absl::StatusOr<ReshardReport> ShuffleInOneProcess(const std::vector<Input>& inputs,
                                                  const ReshardOptions& o, const Control& control) {
  uint64_t input_bytes = 0;
  std::vector<MapInput> map;
  for (const Input& in : inputs) {
    input_bytes += in.index->file_size();
    map.push_back({in.index, in.source, Fnv1a64(in.name.empty() ? in.index->path() : in.name), 0,
                   in.index->num_records()});
  }
  // Nothing under a final name may exist: say so before the first pass.
  ShuffleOptions so{o.seed, ShuffleBuckets(input_bytes, o.memory), o.memory, o.skip_damaged};
  const std::string root = JoinPath(o.output_dir, kPartsDirName);
  const bool had_root = Exists(root).value_or(true);
  ReshardReport report;
  {
    auto work = PartOutput::Begin(o.output_dir, "one-process", 0, "shuffle");
    if (!work.ok()) return work.status();
    auto mapped = ShuffleMap(map, (*work)->work_dir(), so, control);
    if (!mapped.ok()) {
      work->reset();
      if (!had_root) (void)::rmdir(root.c_str());
      return mapped.status();
    }
    Control quiet = control;
    quiet.progress = nullptr;  // the records were counted as read
    auto reduced = ShuffleReduce({(*work)->work_dir()}, so, o, quiet);
    work->reset();  // the runs go
    if (!had_root) (void)::rmdir(root.c_str());
    if (!reduced.ok()) return reduced.status();
    report = *std::move(reduced);
    report.skipped = std::move(mapped->skipped);
  }
  return report;
}

}  // namespace

absl::StatusOr<ReshardReport> Reshard(const std::vector<Input>& inputs, const ReshardOptions& o,
                                      const Control& control) {
  if ((o.shards > 0) == (o.shard_size > 0)) {
    return absl::InvalidArgumentError("give exactly one of a shard count and a shard size");
  }
  if (o.shuffle) {
    if (auto s = repack::ValidatePrefix(o.prefix); !s.ok()) return s;
    return ShuffleInOneProcess(inputs, o, control);
  }
  if (auto s = repack::ValidatePrefix(o.prefix); !s.ok()) return s;
  if (!o.skip_damaged) {
    // Damage the header walk met is known before any byte is copied.
    for (const Input& in : inputs) {
      if (!in.index->problems().empty()) {
        const record::WalkProblem& p = in.index->problems().front();
        return absl::DataLossError(absl::StrCat(in.index->path(), ": damaged at byte offset ",
                                                p.offset, ": ", p.message,
                                                " (--skip-damaged leaves damaged records out)"));
      }
    }
  }
  const Plan plan(inputs);
  const std::vector<uint64_t> bounds = Boundaries(plan, o);
  const uint64_t num_shards = bounds.size() - 1;
  // The output shards this call writes: [first, last).
  uint64_t first = 0, last = num_shards;
  if (o.part) {
    std::vector<uint64_t> weights(num_shards, 0);
    for (uint64_t s = 0; s < num_shards; ++s) {
      for (uint64_t p = bounds[s]; p < bounds[s + 1]; ++p) weights[s] += plan.Framed(plan.At(p));
    }
    const std::vector<size_t> cuts = SplitByWeight(weights, o.part->count);
    first = cuts[o.part->index];
    last = cuts[o.part->index + 1];
  }

  // What a run killed midway left (its temporary files) goes before
  // anything of this run is written.
  ReshardReport report;
  auto prepared = PrepareOutputNames(o, num_shards, first, last, &report.stale_removed);
  if (!prepared.ok()) return prepared.status();
  const std::vector<std::string> names = *std::move(prepared);
  std::vector<std::vector<uint64_t>> damaged(inputs.size());  // per input, record numbers
  // Each output file is fsynced on the syncer's thread while the next one is
  // written; all are renamed at the end, once every one is fsynced.
  ShardSyncer syncer(/*commit=*/false);
  // Plain shards into plain output in source order: runs of adjacent records
  // are copied file to file (copy_file_range, as repair copies), each record
  // read back and checked first (record::ReadRecordInto) exactly as when it is appended.
  // An intact record's framing is a function of its payload, so the bytes
  // copied are the bytes Append would write.
  std::vector<std::optional<source::FileRange>> splice(inputs.size());
  if (o.codec == source::Codec::kNone) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].source->codec() != source::Codec::kNone ||
          inputs[i].index->num_records() == 0) {
        continue;
      }
      auto range = inputs[i].source->Spliceable(0);
      if (range.ok()) splice[i] = *std::move(range);
    }
  }
  constexpr uint64_t kRunBytes = uint64_t{16} << 20;
  // In source order (a shuffle went to ShuffleInOneProcess above) a
  // batch's file order is its output order: batches of one record read the
  // same bytes in the same order, in a buffer the size of the largest
  // record.
  const uint64_t buffer = 1;
  struct Slot {
    Ref ref;
    uint64_t at;  // of its framed bytes in `arena`
    absl::string_view data;
    bool ok = false;
  };
  std::vector<Slot> batch;
  std::vector<size_t> by_file;
  std::string arena;  // one batch's framed records; grows to the largest batch, never shrinks
  for (uint64_t s = first; s < last; ++s) {
    auto out = PendingShard::Create(names[s], o.codec, o.array_record);
    if (!out.ok()) return out.status();
    std::unique_ptr<PendingShard> owned = *std::move(out);
    PendingShard& shard = *owned;
    Midpoint mid(s == first ? control.mid_output : nullptr, bounds[s + 1] - bounds[s]);
    // The run of checked records not yet queued: records [run_first,
    // run_first + run_records) of input run_input. Destroyed before `owned`.
    std::optional<RunCopier> copier;
    size_t run_input = 0;
    uint64_t run_first = 0, run_records = 0;
    auto flush = [&]() -> absl::Status {
      if (run_records == 0) return absl::OkStatus();
      const index::ShardIndex& idx = *inputs[run_input].index;
      const uint64_t begin = idx.begin(run_first);
      const uint64_t end = idx.end(run_first + run_records - 1);
      if (!copier) copier.emplace(&shard);
      const source::FileRange& range = *splice[run_input];
      absl::Status st = copier->Push(range.fd, range.offset + begin, end - begin, run_records);
      for (uint64_t k = 0; k < run_records; ++k) mid.Appended();
      run_records = 0;
      return st;
    };
    for (uint64_t p = bounds[s]; p < bounds[s + 1];) {
      // One batch: positions [p, q) holding at most `buffer` framed bytes.
      batch.clear();
      uint64_t bytes = 0;
      for (; p < bounds[s + 1]; ++p) {
        const Ref ref = plan.At(p);
        const uint64_t framed = plan.Framed(ref);
        if (!batch.empty() && bytes + framed > buffer) break;
        batch.push_back({ref, bytes, {}, false});
        bytes += framed;
      }
      if (arena.size() < bytes) arena.resize(bytes);
      by_file.resize(batch.size());
      std::iota(by_file.begin(), by_file.end(), size_t{0});
      std::sort(by_file.begin(), by_file.end(), [&](size_t a, size_t b) {
        const Ref &x = batch[a].ref, &y = batch[b].ref;
        return x.input != y.input ? x.input < y.input : x.record < y.record;
      });
      for (size_t k : by_file) {
        if (Cancelled(control)) {
          return absl::CancelledError(absl::StrCat("interrupted while writing ", names[s]));
        }
        Slot& slot = batch[k];
        const Input& in = inputs[slot.ref.input];
        const uint64_t begin = in.index->begin(slot.ref.record);
        auto data = record::ReadRecordInto(*in.source, slot.ref.record, begin,
                                           in.index->end(slot.ref.record), arena.data() + slot.at);
        if (control.progress) control.progress(1, in.index->end(slot.ref.record) - begin);
        if (!data.ok()) {
          if (!absl::IsDataLoss(data.status()) || !o.skip_damaged) {
            return SetMessage(data.status(),
                              absl::StrCat(data.status().message(),
                                           absl::IsDataLoss(data.status())
                                               ? " (--skip-damaged leaves damaged records out)"
                                               : ""));
          }
          report.skipped.push_back(
              {in.index->path(), slot.ref.record, begin, DamageReason(data.status(), begin)});
          damaged[slot.ref.input].push_back(slot.ref.record);
          continue;
        }
        slot.data = *data;
        slot.ok = true;
      }
      for (Slot& slot : batch) {
        if (!slot.ok) continue;
        if (splice[slot.ref.input]) {
          // A run holds adjacent records of one input: a record left out
          // (damaged) or damage the walk skipped ends it.
          const index::ShardIndex& idx = *inputs[slot.ref.input].index;
          const uint64_t begin = idx.begin(slot.ref.record), end = idx.end(slot.ref.record);
          if (run_records > 0 &&
              (run_input != slot.ref.input || run_first + run_records != slot.ref.record ||
               idx.end(run_first + run_records - 1) != begin ||
               end - idx.begin(run_first) > kRunBytes)) {
            if (auto st = flush(); !st.ok()) return st;
          }
          if (run_records == 0) {
            run_input = slot.ref.input;
            run_first = slot.ref.record;
          }
          ++run_records;
          continue;
        }
        // Appended here: the copier must be done with the writer first.
        if (auto st = flush(); !st.ok()) return st;
        if (copier) {
          if (auto st = copier->Finish(); !st.ok()) return st;
        }
        if (auto st = shard.Append(slot.data); !st.ok()) return st;
        mid.Appended();
      }
    }
    if (auto st = flush(); !st.ok()) return st;
    if (copier) {
      if (auto st = copier->Finish(); !st.ok()) return st;
      copier.reset();
    }
    if (Cancelled(control)) {
      return absl::CancelledError(absl::StrCat("interrupted while writing ", names[s]));
    }
    if (auto st = shard.Seal(); !st.ok()) return st;
    report.records += shard.records();
    syncer.Add(std::move(owned));
    if (control.output_done) control.output_done();
    if (auto st = syncer.error(); !st.ok()) return st;
  }
  std::vector<std::unique_ptr<PendingShard>> pending;
  for (ShardSyncer::Synced& synced : syncer.Wait()) {
    if (!synced.status.ok()) return synced.status;
    const PendingShard& shard = *synced.shard;
    report.shards.push_back({shard.final_path(), shard.records(), shard.bytes(), shard.file_bytes(),
                             shard.file_crc32c()});
    pending.push_back(std::move(synced.shard));
  }
  // The bytes copied are the bytes checked only if the shards did not change
  // meanwhile (shards are immutable while read: say so if not).
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!splice[i]) continue;
    if (auto st = inputs[i].source->CheckUnchanged(); !st.ok()) return st;
  }
  if (o.skip_damaged && (!o.part || o.part->index == 0)) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::sort(damaged[i].begin(), damaged[i].end());
      auto outside = DamageOutsideRecords(*inputs[i].index, *inputs[i].source, damaged[i]);
      if (!outside.ok()) return outside.status();
      for (Dropped& d : *outside) report.skipped.push_back(std::move(d));
    }
  }
  // Every file is complete: give them their final names together (unless
  // interrupted meanwhile).
  if (Cancelled(control)) return absl::CancelledError("interrupted before the rename");
  if (auto st = CommitAll(pending, o.output_dir); !st.ok()) return st;
  return report;
}

absl::StatusOr<std::vector<std::string>> PrepareOutputNames(
    const ReshardOptions& o, uint64_t num_shards, uint64_t first, uint64_t last,
    std::vector<std::string>* stale_removed) {
  auto stale = RemoveStaleTemps(o.output_dir, o.prefix);
  if (!stale.ok()) return stale.status();
  *stale_removed = *std::move(stale);
  std::vector<std::string> names;
  for (uint64_t s = 0; s < num_shards; ++s) {
    names.push_back(JoinPath(o.output_dir, repack::ShardName(o.prefix, s, num_shards, o.codec)));
    if (s < first || s >= last) continue;
    auto exists = Exists(names.back());
    if (!exists.ok()) return exists.status();
    if (*exists) {
      return absl::AlreadyExistsError(
          absl::StrCat(names.back(), ": already exists (never replaced); nothing written"));
    }
  }
  return names;
}

absl::Status CommitAll(const std::vector<std::unique_ptr<PendingShard>>& pending,
                       const std::string& dir) {
  // One fsync of the directory for all the renames (they share it).
  for (size_t s = 0; s < pending.size(); ++s) {
    if (auto st = pending[s]->Commit(/*sync_dir=*/false); !st.ok()) {
      for (size_t k = 0; k < s; ++k) (void)UnlinkIfExists(pending[k]->final_path());
      return st;
    }
  }
  if (auto st = FsyncDir(dir); !st.ok()) {
    for (const auto& shard : pending) (void)UnlinkIfExists(shard->final_path());
    return st;
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::reshape
