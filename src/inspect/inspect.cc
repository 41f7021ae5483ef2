#include "tfrecordfs/inspect/inspect.h"

#include <fcntl.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::inspect {

namespace {

void AddFeature(const example::Feature& f, FeatureStats* s) {
  ++s->present;
  const size_t n = f.size();
  switch (f.kind) {
    case example::Kind::kNone:
      ++s->empty;
      return;
    case example::Kind::kInt64:
      ++s->int64_records;
      for (int64_t v : f.int64s) {
        if (!s->min_int64 || v < *s->min_int64) s->min_int64 = v;
        if (!s->max_int64 || v > *s->max_int64) s->max_int64 = v;
      }
      break;
    case example::Kind::kFloat:
      ++s->float_records;
      for (float v : f.floats) {
        if (std::isnan(v)) {
          ++s->nan_values;
          continue;
        }
        if (!s->min_float || v < *s->min_float) s->min_float = v;
        if (!s->max_float || v > *s->max_float) s->max_float = v;
      }
      break;
    case example::Kind::kBytes:
      ++s->bytes_records;
      for (absl::string_view v : f.bytes) {
        ++s->bytes_values;
        s->min_bytes = std::min<uint64_t>(s->min_bytes, v.size());
        s->max_bytes = std::max<uint64_t>(s->max_bytes, v.size());
        if (naming::IsSingleLineText(v)) {
          ++s->text_values;
          continue;
        }
        if (auto t = tensor::DecodeTensorType(v); t.ok()) {  // (no broadcast expanded)
          ++s->tensor_values;
          ++s->tensor_dtypes[tensor::InfoOf(t->dtype).name];
          const std::vector<int64_t>& shape = t->shape;
          if (s->tensor_values == 1) {
            s->min_shape = s->max_shape = shape;
          } else if (!s->mixed_rank && shape.size() == s->min_shape.size()) {
            for (size_t d = 0; d < shape.size(); ++d) {
              s->min_shape[d] = std::min(s->min_shape[d], shape[d]);
              s->max_shape[d] = std::max(s->max_shape[d], shape[d]);
            }
          } else {
            s->mixed_rank = true;
          }
          continue;
        }
        ++s->sniffed[std::string(naming::SniffExtension(v))];
      }
      break;
  }
  s->min_count = std::min<uint64_t>(s->min_count, n);
  s->max_count = std::max<uint64_t>(s->max_count, n);
}

FeatureStats& StatsFor(std::map<std::string, FeatureStats>* m, const std::string& name) {
  auto [it, fresh] = m->try_emplace(name);
  if (fresh) it->second.name = name;
  return it->second;
}

}  // namespace

std::string FeatureStats::Kind() const {
  const int kinds = (int64_records > 0) + (float_records > 0) + (bytes_records > 0);
  if (kinds == 0) return "empty";
  if (kinds > 1) return "mixed";
  if (int64_records > 0) return "int64";
  if (float_records > 0) return "float";
  if (bytes_values > 0 && text_values == bytes_values) return "text";
  if (bytes_values > 0 && tensor_values == bytes_values) return "tensor";
  return "bytes";
}

std::string FeatureStats::ShapeRange() const {
  if (Kind() != "tensor") return "";
  if (mixed_rank) return "[mixed rank]";
  std::vector<std::string> dims;
  for (size_t d = 0; d < min_shape.size(); ++d) {
    dims.push_back(min_shape[d] == max_shape[d] ? absl::StrCat(min_shape[d])
                                                : absl::StrCat(min_shape[d], "..", max_shape[d]));
  }
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

void SchemaBuilder::Add(absl::string_view payload) {
  ++records_;
  example::DecodedRecord decoded = example::DecodeRecord(payload);
  switch (decoded.kind) {
    case example::PayloadKind::kExample:
      ++examples_;
      for (const example::Feature& f : decoded.example.features) {
        AddFeature(f, &StatsFor(&features_, f.name));
      }
      return;
    case example::PayloadKind::kSequenceExample:
      ++sequence_examples_;
      for (const example::Feature& f : decoded.sequence.context.features) {
        FeatureStats& s = StatsFor(&features_, f.name);
        s.in_context = true;
        AddFeature(f, &s);
      }
      for (const example::FeatureList& l : decoded.sequence.lists) {
        auto [it, fresh] = lists_.try_emplace(l.name);
        ListStats& ls = it->second;
        if (fresh) ls.name = ls.steps.name = l.name;
        ++ls.present;
        ls.min_steps = std::min<uint64_t>(ls.min_steps, l.steps.size());
        ls.max_steps = std::max<uint64_t>(ls.max_steps, l.steps.size());
        for (const example::Feature& step : l.steps) AddFeature(step, &ls.steps);
      }
      return;
    case example::PayloadKind::kExampleList:
    case example::PayloadKind::kExampleInExample:
      ++(decoded.kind == example::PayloadKind::kExampleList ? example_lists_
                                                            : examples_in_examples_);
      if (decoded.list.has_context) {
        for (const example::Feature& f : decoded.list.context.features) {
          FeatureStats& s = StatsFor(&features_, f.name);
          s.in_context = true;
          AddFeature(f, &s);
        }
      }
      for (const example::FeatureTable& ex : decoded.list.examples) {
        ++listed_examples_;
        for (const example::Feature& f : ex.features) {
          AddFeature(f, &StatsFor(&example_features_, f.name));
        }
      }
      return;
    case example::PayloadKind::kRaw:
      ++others_;
      if (first_other_reason_.empty()) first_other_reason_ = std::move(decoded.raw_reason);
      return;
  }
}

std::vector<std::pair<size_t, uint64_t>> PlanSample(const std::vector<uint64_t>& counts,
                                                    uint64_t n) {
  std::vector<std::pair<size_t, uint64_t>> out;
  absl::uint128 total = 0;
  uint64_t nonempty = 0;
  for (uint64_t c : counts) {
    total += c;
    nonempty += c > 0;
  }
  // One record from every shard, the rest of n in proportion to size.
  const uint64_t rest = n > nonempty ? n - nonempty : 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    const uint64_t c = counts[s];
    if (c == 0) continue;
    uint64_t take = c;
    if (total > n) {
      take = std::min<uint64_t>(c, 1 + absl::Uint128Low64(absl::uint128(rest) * c / total));
    }
    for (uint64_t k = 0; k < take; ++k) {
      out.emplace_back(s, absl::Uint128Low64(absl::uint128(k) * c / take));
    }
  }
  return out;
}

uint64_t ShardReport::DamagedRecords() const {
  uint64_t n = 0;
  for (const Damage& d : damage) n += d.record != kNoRecord;
  return n;
}

namespace {

// The walk's problems, folded into the report. Bytes the records cover
// (from the first record's start to the last one's end) belong to a record:
// a problem there is a note on the damaged record holding it or the one
// just before (a shortened record makes the walk step back, so its notes
// land a few bytes into the next, intact record); one with neither is
// reported on its own. Problems before the first record are
// damage between records; those at or after the last record's end are the
// tail's (CheckTail), reported once there.
void AttributeWalkProblems(const index::ShardIndex& idx,
                           const std::vector<uint64_t>& damaged_records,
                           const std::function<std::optional<uint64_t>(uint64_t)>& checkpoint,
                           ShardReport* report) {
  const uint64_t first = idx.offsets().front(), last = idx.offsets().back();
  const std::set<uint64_t> damaged(damaged_records.begin(), damaged_records.end());
  for (const record::WalkProblem& p : idx.problems()) {
    if (p.offset >= last && last < idx.data_size()) continue;  // the tail's
    bool attributed = false;
    if (p.offset >= first && p.offset <= last && idx.num_records() > 0) {
      // The record holding the offset (the last one for its end), and the one before.
      const auto& offsets = idx.offsets();
      uint64_t i = std::upper_bound(offsets.begin(), offsets.end(), p.offset) - offsets.begin();
      i = std::min<uint64_t>(i == 0 ? 0 : i - 1, idx.num_records() - 1);
      attributed = damaged.count(i) > 0 || (i > 0 && damaged.count(i - 1) > 0);
    }
    if (!attributed) {
      report->damage.push_back({kNoRecord, p.offset, checkpoint(p.offset), p.message});
    }
  }
}

}  // namespace

std::vector<Damage> DamageOutsideRecords(const index::ShardIndex& idx,
                                         const std::vector<uint64_t>& damaged_records) {
  ShardReport report;
  AttributeWalkProblems(
      idx, damaged_records, [](uint64_t) { return std::optional<uint64_t>(); }, &report);
  return std::move(report.damage);
}

absl::StatusOr<std::optional<Damage>> CheckTail(const index::ShardIndex& idx,
                                                const source::ShardSource& src) {
  const uint64_t end = idx.offsets().back(), size = idx.data_size();
  if (end >= size) return std::optional<Damage>();
  Damage d{kNoRecord, end, std::nullopt, ""};
  // What the walk said where it stopped, and after (a compressed stream's
  // end: zlib's reason it stops inflating).
  for (const record::WalkProblem& p : idx.problems()) {
    if (p.offset >= end) absl::StrAppend(&d.reason, p.message, "; ");
  }
  absl::StrAppend(&d.reason, "the last ", size - end, " byte(s) of the shard are in no record");
  // A header whose CRC holds but whose record runs past the end is a
  // truncated last record (it may start before `end` when the record
  // before it is short).
  const uint64_t from =
      idx.num_records() > 0 ? idx.begin(idx.num_records() - 1) + record::kHeaderSize : 0;
  std::string buf;
  for (uint64_t base = from; base + record::kHeaderSize <= size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(1 << 20, size - base));
    buf.resize(n);
    auto got = src.ReadAt(base, buf.data(), n);
    if (!got.ok()) return got.status();
    if (*got < record::kHeaderSize) break;
    for (size_t k = 0; k + record::kHeaderSize <= *got; ++k) {
      auto len = record::ParseHeader(buf.data() + k);
      const uint64_t at = base + k;
      if (!len.ok() || *len > (uint64_t{1} << 40)) continue;
      const uint64_t want = record::kFramingOverhead + *len;
      if (at + want <= size) continue;
      absl::StrAppend(&d.reason, ": a record header at byte offset ", at, " states ", *len,
                      " data byte(s), and the shard ends ", at + want - size,
                      " byte(s) short of that record (a truncated last record)");
      return std::optional<Damage>(std::move(d));
    }
    base += *got - (record::kHeaderSize - 1);
  }
  return std::optional<Damage>(std::move(d));
}

absl::Status VerifyStoredCheckpoints(const index::ShardIndex& idx,
                                     const source::ObjectReader* object) {
  // GZIP/ZLIB checkpoints resume inflating mid-stream with a stored window;
  // SNAPPY's block table is checked by every block's own framing.
  if (!idx.checkpoints() ||
      (idx.codec() != source::Codec::kGzip && idx.codec() != source::Codec::kZlib)) {
    return absl::OkStatus();
  }
  absl::Status s;
  if (object != nullptr) {
    s = source::VerifyCheckpoints(object, idx.path(), idx.file_size(), *idx.checkpoints());
  } else {
    auto fd = OpenFile(idx.path(), O_RDONLY | O_CLOEXEC);
    if (!fd.ok()) return fd.status();
    s = source::VerifyCheckpoints(fd->get(), idx.path(), idx.file_size(), *idx.checkpoints());
  }
  if (!absl::IsDataLoss(s)) return s;
  return absl::DataLossError(
      absl::StrCat(s.message(),
                   "; the stored index is wrong, not necessarily the shard: rebuild it with "
                   "`tfrecordfs index --force ",
                   idx.path(), "`"));
}

absl::StatusOr<ShardReport> VerifyShard(const index::ShardIndex& idx,
                                        const source::ShardSource& src,
                                        const std::function<void(uint64_t, uint64_t)>& progress,
                                        RecordRange range) {
  ShardReport report;
  const uint64_t first = std::min(range.first, idx.num_records());
  const uint64_t last = std::clamp(range.last, first, idx.num_records());
  const bool to_end = last == idx.num_records();
  // The range's bytes: damage outside records is reported by the piece
  // whose bytes hold it.
  const uint64_t from = first == 0 ? 0 : idx.begin(first);
  const uint64_t to = to_end ? std::numeric_limits<uint64_t>::max() : idx.begin(last);
  report.records = last - first;
  const auto checkpoint = [&](uint64_t offset) -> std::optional<uint64_t> {
    if (!idx.checkpoints()) return std::nullopt;
    return idx.checkpoints()->Before(offset).in;
  };
  std::vector<uint64_t> damaged_records;
  std::vector<std::pair<uint64_t, std::string>> others;  // record, why (of shards with Examples)
  for (uint64_t i = first; i < last; ++i) {
    const uint64_t begin = idx.begin(i), end = idx.end(i);
    auto data = record::ReadRecord(src, i, begin, end);
    if (progress) progress(1, end - begin);
    if (!data.ok()) {
      if (!absl::IsDataLoss(data.status())) return data.status();
      // The reader's message starts "<path>: record i at [uncompressed ]byte
      // offset N: "; keep the reason after it.
      std::string reason(data.status().message());
      const std::string mark = absl::StrCat("byte offset ", begin, ": ");
      if (const size_t at = reason.find(mark); at != std::string::npos) {
        reason = reason.substr(at + mark.size());
      }
      report.damage.push_back({i, begin, checkpoint(begin), std::move(reason)});
      damaged_records.push_back(i);
      continue;
    }
    example::DecodedRecord decoded = example::DecodeRecord(*data);
    switch (decoded.kind) {
      case example::PayloadKind::kExample:
        ++report.examples;
        break;
      case example::PayloadKind::kSequenceExample:
        ++report.sequence_examples;
        break;
      case example::PayloadKind::kExampleList:
        ++report.example_lists;
        break;
      case example::PayloadKind::kExampleInExample:
        ++report.examples;  // an Example (a ranking list inside)
        break;
      case example::PayloadKind::kRaw: {
        std::string why = std::move(decoded.raw_reason);
        ++report.others;
        if (report.first_other_reason.empty()) report.first_other_reason = why;
        others.emplace_back(i, std::move(why));
        break;
      }
    }
  }
  if (report.examples + report.sequence_examples + report.example_lists > 0) {
    for (auto& [i, why] : others) {
      report.damage.push_back(
          {i, idx.begin(i), checkpoint(idx.begin(i)),
           absl::StrCat("the payload is not an Example, SequenceExample or "
                        "ExampleListWithContext, unlike the shard's other records (",
                        why, ")")});
    }
  }
  const size_t before_walk = report.damage.size();
  AttributeWalkProblems(idx, damaged_records, checkpoint, &report);
  // Walk problems outside this range's bytes are another piece's.
  report.damage.erase(std::remove_if(report.damage.begin() + before_walk, report.damage.end(),
                                     [&](const Damage& d) {
                                       return d.record == kNoRecord &&
                                              (d.offset < from || d.offset >= to);
                                     }),
                      report.damage.end());
  if (!to_end) {
    // The tail is the last piece's.
  } else if (auto tail = CheckTail(idx, src); !tail.ok()) {
    return tail.status();
  } else if (tail->has_value()) {
    (*tail)->checkpoint_offset = checkpoint((*tail)->offset);
    report.damage.push_back(std::move(**tail));
  }
  // Further checks of the shard as a whole (a compressed shard's checkpoints
  // against its stream, say) go here: each adds Damage entries, with
  // kNoRecord where no one record is to blame.
  std::stable_sort(report.damage.begin(), report.damage.end(),
                   [](const Damage& a, const Damage& b) { return a.offset < b.offset; });
  return report;
}

}  // namespace tfrecordfs::inspect
