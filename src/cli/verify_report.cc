// verify's report (reports.h).
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/cli/json_writer.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::cli {
namespace {

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

std::string VerifyReport(const inspect::VerifyResult& v, bool json) {
  std::string out;
  if (json) {
    JsonWriter w;
    w.BeginObject()
        .Key("shards")
        .Uint(v.shards.size())
        .Key("records")
        .Uint(v.records)
        .Key("examples")
        .Uint(v.examples)
        .Key("sequence_examples")
        .Uint(v.sequence_examples)
        .Key("example_lists_with_context")
        .Uint(v.example_lists)
        .Key("other_payloads")
        .Uint(v.others)
        .Key("damaged_records")
        .Uint(v.damaged)
        .Key("damaged_spans")
        .Uint(v.spans)
        .Key("damaged")
        .BeginArray();
    for (const inspect::ShardVerdict& r : v.shards) {
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
    for (const inspect::ShardVerdict& r : v.shards) {
      if (!r.status.ok()) WriteJsonUnreadable(&w, r.shard->path, r.status);
    }
    w.EndArray().Key("non_example_shards").BeginArray();
    for (const inspect::ShardVerdict& r : v.shards) {
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
    for (const inspect::ShardVerdict& r : v.shards) {
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
    if (v.damaged + v.spans + v.unreadable == 0) {
      verdict = "all intact";
    } else {
      verdict = absl::StrCat(v.damaged, " damaged");
      if (v.spans > 0) {
        absl::StrAppend(&verdict, ", ", v.spans, " damaged span(s) between or after records");
      }
      if (v.unreadable > 0) absl::StrAppend(&verdict, ", ", v.unreadable, " shard(s) unreadable");
    }
    absl::StrAppend(
        &out, v.shards.size(), " shard(s), ", v.records, " record(s): ", verdict, " (", v.examples,
        " Example(s), ", v.sequence_examples, " SequenceExample(s), ",
        v.example_lists > 0 ? absl::StrCat(v.example_lists, " ExampleListWithContext(s), ") : "",
        v.others, " other payload(s))\n");
  }
  return out;
}

}  // namespace tfrecordfs::cli
