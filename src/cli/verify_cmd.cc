// `tfrecordfs verify SOURCE...`: reads every record of every shard, checks
// both CRCs and decodes the payload (inspect::VerifyShard), and names each
// damaged record.
#include <atomic>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "src/cli/progress.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/inspect/inspect.h"
#include "tfrecordfs/reshape/plan.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kVerifyUsage[] = R"(Usage: tfrecordfs verify [options] SOURCE...

Reads every record of every shard in the SOURCEs (shard files, or
directories searched recursively, exactly as a mount would; plain, GZIP,
ZLIB and SNAPPY shards, ARRAYRECORD files), checks the length CRC and the data CRC of each
(an ArrayRecord file's chunk and block header hashes), and decodes
each payload as a tf.train.Example or SequenceExample.

Each damaged record is printed with its shard, record index, byte offset and
the reason. In a GZIP/ZLIB shard the offset is in the decompressed stream;
the compressed offset given beside it is that of the nearest checkpoint at
or before the record (where a reader resumes inflating), not of the record
itself. Damage between records (stray bytes, a stream that stops inflating)
has no record index, nor has a shard's tail that is no whole record (a
truncated last record): the summary counts damaged records and damaged
spans apart. In a shard whose records are Examples, a payload that
is not one is damaged; a shard of other payloads only (TensorBoard events,
raw strings) is reported as such, not as damaged. A summary line ends the
report.

Options:
  --json       one JSON document instead:
               {"shards": S, "records": N, "damaged_records": D,
               "damaged_spans": B, "damaged": [{"path": ..., "record": i,
               "offset": ..., "reason": ...}], ...}; "record" is null for
               damage between or after records (counted in
               "damaged_spans", not in "damaged_records"), and compressed
               shards add "checkpoint_offset"
)";
constexpr char kVerifyUsageEnd[] = R"(
Exit status: 0 when every record is intact, 1 when something is damaged or
cannot be read, 2 on a usage error.
)";

std::string Where(const inspect::Damage& d, bool compressed) {
  std::string out =
      DamagePlace(d.record == inspect::kNoRecord ? std::nullopt : std::optional<uint64_t>(d.record),
                  d.offset, compressed);
  if (d.checkpoint_offset) {
    absl::StrAppend(&out, " (compressed: after the checkpoint at byte ", *d.checkpoint_offset, ")");
  }
  return out;
}

}  // namespace

int VerifyMain(int argc, char** argv) {
  Tool tool({.name = "verify",
             .usage = kVerifyUsage,
             .usage_end = kVerifyUsageEnd,
             .usage_column = 15,
             .indexes = true,
             .parts = true});
  // A large shard is verified by several parts, each its records.
  tool.SetSplitFiles(true);
  if (auto stop = tool.Start(argc, argv)) return *stop;
  const bool json = tool.json();
  ProgressBar progress = tool.Progress(tool.DataBytes());

  struct Result {
    const scan::ScannedShard* shard;
    absl::Status status;  // unreadable
    inspect::ShardReport report;
  };
  std::vector<Result> results;
  source::BlockCache cache(32 << 20);
  for (const scan::ScannedShard& s : tool.shards()) {
    Result r{&s, absl::OkStatus(), {}};
    auto src = scan::OpenShard(s, &cache);
    // An index loaded from a file may hold forged checkpoints (a walk's own
    // are right by construction).
    const absl::Status stored = s.info.source == index::IndexSource::kWalked
                                    ? absl::OkStatus()
                                    : inspect::VerifyStoredCheckpoints(*s.index, s.object.get());
    if (!src.ok()) {
      r.status = src.status();
    } else if (!stored.ok()) {
      r.status = stored;
    } else {
      // This part's pieces of the shard (the whole shard without --part).
      for (const reshape::Piece& piece : tool.PiecesOf(s.path)) {
        inspect::RecordRange range;
        if (tool.part()) {
          const auto [first, last] = reshape::PieceRecords(*s.index, piece);
          range = {first, last};
        }
        auto report = inspect::VerifyShard(
            *s.index, **src, [&](uint64_t n, uint64_t bytes) { progress.Add(0, n, bytes); }, range);
        if (!report.ok()) {
          r.status = report.status();
          break;
        }
        r.report.records += report->records;
        r.report.examples += report->examples;
        r.report.sequence_examples += report->sequence_examples;
        r.report.others += report->others;
        if (r.report.first_other_reason.empty()) {
          r.report.first_other_reason = report->first_other_reason;
        }
        for (inspect::Damage& d : report->damage) r.report.damage.push_back(std::move(d));
      }
    }
    progress.Add(1, 0, 0);
    results.push_back(std::move(r));
  }
  progress.Finish();

  uint64_t records = 0, damaged = 0, spans = 0, unreadable = 0, examples = 0, sequences = 0,
           lists = 0, others = 0;
  for (const Result& r : results) {
    records += r.report.records;
    damaged += r.report.DamagedRecords();
    spans += r.report.DamagedSpans();
    unreadable += !r.status.ok();
    examples += r.report.examples;
    sequences += r.report.sequence_examples;
    lists += r.report.example_lists;
    others += r.report.others;
  }
  std::string out;
  if (json) {
    JsonWriter w;
    w.BeginObject()
        .Key("shards")
        .Uint(results.size())
        .Key("records")
        .Uint(records)
        .Key("examples")
        .Uint(examples)
        .Key("sequence_examples")
        .Uint(sequences)
        .Key("example_lists_with_context")
        .Uint(lists)
        .Key("other_payloads")
        .Uint(others)
        .Key("damaged_records")
        .Uint(damaged)
        .Key("damaged_spans")
        .Uint(spans)
        .Key("damaged")
        .BeginArray();
    for (const Result& r : results) {
      for (const inspect::Damage& d : r.report.damage) {
        w.BeginObject();
        WriteJsonPlace(&w, r.shard->path,
                       d.record == inspect::kNoRecord ? std::nullopt : std::optional(d.record),
                       d.offset);
        if (d.checkpoint_offset) w.Key("checkpoint_offset").Uint(*d.checkpoint_offset);
        w.Key("reason").String(d.reason).EndObject();
      }
    }
    w.EndArray().Key("unreadable").BeginArray();
    for (const Result& r : results) {
      if (!r.status.ok()) WriteJsonUnreadable(&w, r.shard->path, r.status);
    }
    w.EndArray().Key("non_example_shards").BeginArray();
    for (const Result& r : results) {
      if (r.status.ok() && r.report.others > 0 &&
          r.report.examples + r.report.sequence_examples + r.report.example_lists == 0) {
        w.BeginObject()
            .Key("path")
            .String(r.shard->path)
            .Key("records")
            .Uint(r.report.others)
            .Key("reason")
            .String(r.report.first_other_reason)
            .EndObject();
      }
    }
    w.EndArray().EndObject();
    out = w.str();
  } else {
    for (const Result& r : results) {
      const std::string path = EscapeForLog(r.shard->path);
      if (!r.status.ok()) {
        absl::StrAppend(&out, path, ": unreadable: ", EscapeForLog(r.status.message()), "\n");
        continue;
      }
      const bool compressed = r.shard->codec != source::Codec::kNone;
      for (const inspect::Damage& d : r.report.damage) {
        absl::StrAppend(&out, path, ": ", Where(d, compressed), ": ", EscapeForLog(d.reason), "\n");
      }
      if (r.report.others > 0 &&
          r.report.examples + r.report.sequence_examples + r.report.example_lists == 0) {
        absl::StrAppend(&out, path, ": ", r.report.others,
                        " record(s), none of them a tf.train.Example, SequenceExample or "
                        "ExampleListWithContext (",
                        EscapeForLog(r.report.first_other_reason), ")\n");
      }
    }
    std::string verdict;
    if (damaged + spans + unreadable == 0) {
      verdict = "all intact";
    } else {
      verdict = absl::StrCat(damaged, " damaged");
      if (spans > 0) {
        absl::StrAppend(&verdict, ", ", spans, " damaged span(s) between or after records");
      }
      if (unreadable > 0) absl::StrAppend(&verdict, ", ", unreadable, " shard(s) unreadable");
    }
    absl::StrAppend(&out, results.size(), " shard(s), ", records, " record(s): ", verdict, " (",
                    examples, " Example(s), ", sequences, " SequenceExample(s), ",
                    lists > 0 ? absl::StrCat(lists, " ExampleListWithContext(s), ") : "", others,
                    " other payload(s))\n");
  }
  return tool.Finish(out, damaged + spans + unreadable == 0);
}

}  // namespace tfrecordfs::cli
