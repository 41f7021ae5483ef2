// repair's report (reports.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "src/cli/json_writer.h"
#include "src/cli/reports.h"
#include "src/cli/reshape_cli.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::cli {

std::string RepairReport(const std::vector<reshape::RepairedShard>& repaired,
                         const std::string& output, bool json) {
  const reshape::RepairTotals t = reshape::TotalsOf(repaired);
  std::string out;
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("shards").BeginArray();
    for (const reshape::RepairedShard& d : repaired) {
      if (!d.status.ok()) continue;
      w.BeginObject()
          .Key("path")
          .String(d.shard->path)
          .Key("output")
          .String(d.result.output)
          .Key("records")
          .Uint(d.result.records_in)
          .Key("written")
          .Uint(d.result.records_kept)
          .EndObject();
    }
    w.EndArray().Key("records").Uint(t.records).Key("written").Uint(t.written);
    w.Key("dropped").BeginArray();
    for (const reshape::RepairedShard& d : repaired) {
      for (const reshape::Dropped& x : d.result.dropped) WriteJsonDropped(&w, x);
    }
    w.EndArray().Key("unreadable").BeginArray();
    for (const reshape::RepairedShard& d : repaired) {
      if (!d.status.ok()) WriteJsonUnreadable(&w, d.shard->path, d.status);
    }
    w.EndArray().EndObject();
    out = w.str();
  } else {
    for (const reshape::RepairedShard& d : repaired) {
      if (!d.status.ok()) {
        absl::StrAppend(&out, EscapeForLog(d.shard->path),
                        ": not repaired: ", EscapeForLog(d.status.message()), "\n");
        continue;
      }
      const bool compressed = d.shard->codec != source::Codec::kNone;
      for (const reshape::Dropped& x : d.result.dropped) {
        absl::StrAppend(&out, DescribeDropped(x, compressed),
                        x.record == reshape::kNoRecord ? ": not copied\n" : ": dropped\n");
      }
    }
    absl::StrAppend(
        &out, repaired.size() - t.unreadable, " shard(s) copied to ", EscapeForLog(output), ": ",
        t.written, " of ", t.records, " record(s) written, ", t.dropped, " dropped",
        t.spans > 0 ? absl::StrCat(", ", t.spans, " damaged span(s) between or after records") : "",
        t.unreadable > 0 ? absl::StrCat(", ", t.unreadable, " shard(s) failed") : "", "\n");
  }
  return out;
}

}  // namespace tfrecordfs::cli
