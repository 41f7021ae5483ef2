#include "tfrecordfs/inspect/commands.h"

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/source/block_cache.h"

namespace tfrecordfs::inspect {
namespace {

// The toolbox reads each shard once, front to back: a small cache serves it.
constexpr size_t kCacheBytes = 32 << 20;

void Tick(const Progress& progress, uint64_t shards, uint64_t records, uint64_t bytes) {
  if (progress) progress(shards, records, bytes);
}

}  // namespace

bool CountResult::damaged() const {
  for (const ShardCount& s : shards) {
    if (s.problems > 0) return true;
  }
  return false;
}

CountResult CountRecords(const std::vector<scan::ScannedShard>& shards) {
  CountResult result;
  for (const scan::ScannedShard& s : shards) {
    result.shards.push_back({s.path, s.index->num_records(), s.index->problems().size()});
    result.records += s.index->num_records();
  }
  return result;
}

SchemaPlan PlanSchema(const std::vector<scan::ScannedShard>& shards,
                      std::optional<uint64_t> sample) {
  SchemaPlan plan;
  std::vector<uint64_t> counts;
  for (const scan::ScannedShard& s : shards) {
    counts.push_back(s.index->num_records());
    plan.records_total += s.index->num_records();
  }
  plan.records = PlanSample(counts, sample.value_or(plan.records_total));
  for (const auto& [s, r] : plan.records) {
    plan.bytes += shards[s].index->end(r) - shards[s].index->begin(r);
  }
  return plan;
}

SchemaResult ReadSchema(const std::vector<scan::ScannedShard>& shards, const SchemaPlan& plan,
                        const Progress& progress) {
  SchemaResult result;
  result.records_total = plan.records_total;
  result.shards = shards.size();
  source::BlockCache cache(kCacheBytes);
  std::unique_ptr<source::ShardSource> src;
  size_t open_shard = SIZE_MAX;
  for (const auto& [s, r] : plan.records) {
    const scan::ScannedShard& shard = shards[s];
    if (s != open_shard) {
      Tick(progress, open_shard == SIZE_MAX ? 0 : 1, 0, 0);
      open_shard = s;
      auto opened = scan::OpenShard(shard, &cache);
      if (!opened.ok()) {
        log::Error(opened.status().message());
        src.reset();
      } else {
        src = std::move(*opened);
      }
    }
    if (src == nullptr) {
      ++result.unreadable;
      continue;
    }
    const index::ShardIndex& idx = *shard.index;
    auto data = record::ReadRecord(*src, r, idx.begin(r), idx.end(r));
    Tick(progress, 0, 1, idx.end(r) - idx.begin(r));
    if (!data.ok()) {
      log::Warning(data.status().message(), " (skipped)");
      ++result.unreadable;
      continue;
    }
    result.schema.Add(*data);
  }
  return result;
}

absl::StatusOr<std::vector<ShownRecord>> ReadRecords(const scan::ScannedShard& shard,
                                                     const std::vector<uint64_t>& wanted) {
  source::BlockCache cache(kCacheBytes);
  auto src = scan::OpenShard(shard, &cache);
  if (!src.ok()) return src.status();
  const index::ShardIndex& idx = *shard.index;
  std::vector<ShownRecord> records;
  for (uint64_t r : wanted) {
    if (r >= idx.num_records()) {
      records.push_back(
          {r, 0,
           absl::NotFoundError(absl::StrCat(shard.path, ": no record ", r, ": the shard has ",
                                            idx.num_records(), " record(s)"))});
      continue;
    }
    records.push_back({r, idx.begin(r), record::ReadRecord(**src, r, idx.begin(r), idx.end(r))});
  }
  return records;
}

VerifyResult VerifyShards(const std::vector<scan::ScannedShard>& shards, const RangesOf& ranges,
                          const Progress& progress) {
  VerifyResult result;
  source::BlockCache cache(kCacheBytes);
  for (const scan::ScannedShard& s : shards) {
    ShardVerdict v{&s, absl::OkStatus(), {}};
    auto src = scan::OpenShard(s, &cache);
    // An index loaded from a file may hold forged checkpoints (a walk's own
    // are right by construction).
    const absl::Status stored = s.info.source == index::IndexSource::kWalked
                                    ? absl::OkStatus()
                                    : VerifyStoredCheckpoints(*s.index, s.object.get());
    if (!src.ok()) {
      v.status = src.status();
    } else if (!stored.ok()) {
      v.status = stored;
    } else {
      for (const RecordRange& range :
           ranges ? ranges(s) : std::vector<RecordRange>{RecordRange{}}) {
        auto report = VerifyShard(
            *s.index, **src, [&](uint64_t n, uint64_t bytes) { Tick(progress, 0, n, bytes); },
            range);
        if (!report.ok()) {
          v.status = report.status();
          break;
        }
        v.report.records += report->records;
        v.report.examples += report->examples;
        v.report.sequence_examples += report->sequence_examples;
        v.report.example_lists += report->example_lists;
        v.report.others += report->others;
        if (v.report.first_other_reason.empty()) {
          v.report.first_other_reason = report->first_other_reason;
        }
        for (Damage& d : report->damage) v.report.damage.push_back(std::move(d));
      }
    }
    Tick(progress, 1, 0, 0);
    result.shards.push_back(std::move(v));
  }
  for (const ShardVerdict& v : result.shards) {
    result.records += v.report.records;
    result.damaged += v.report.DamagedRecords();
    result.spans += v.report.DamagedSpans();
    result.unreadable += !v.status.ok();
    result.examples += v.report.examples;
    result.sequence_examples += v.report.sequence_examples;
    result.example_lists += v.report.example_lists;
    result.others += v.report.others;
  }
  return result;
}

}  // namespace tfrecordfs::inspect
