// `tfrecordfs count SOURCE...`: records per shard, from the index alone (a
// cached or shared index, else a header walk): payloads are never read.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kCountUsage[] = R"(Usage: tfrecordfs count [options] SOURCE...

Counts the records of every shard in the SOURCEs (shard files, or
directories searched recursively, exactly as a mount would; plain, GZIP,
ZLIB and SNAPPY shards, ARRAYRECORD files). Counts come from the shard indexes (the per-user index cache,
else a walk of the record headers, which is then cached): no payload is read.

Output: one line `records<TAB>path` per shard, then `records<TAB>total`.
A damaged shard counts the records its header walk found, as a mount shows
them, and is named on stderr (`tfrecordfs verify` says what is wrong).

Options:
  --json       one JSON document instead:
               {"shards": [{"path": ..., "records": N}], "records": TOTAL}
  -q, --quiet  no progress bar
  --max-shard-records N
               the most records one shard may have (default 50000000);
               a shard with more is skipped, and the exit status is 1
  -h, --help   show this help and exit

Exit status: 0 on success, 1 when a SOURCE cannot be read or a shard is
damaged, 2 on a usage error.
)";

}  // namespace

int CountMain(int argc, char** argv) {
  Tool tool({.name = "count", .usage = kCountUsage, .indexes = true, .parts = true});
  if (auto stop = tool.Start(argc, argv)) return *stop;
  const bool json = tool.json();
  uint64_t total = 0;
  bool damaged = false;
  std::string out;
  JsonWriter w;
  if (json) w.BeginObject().Key("shards").BeginArray();
  for (const scan::ScannedShard& s : tool.shards()) {
    const uint64_t n = s.index->num_records();
    total += n;
    if (!s.index->problems().empty()) {
      damaged = true;
      log::Warning(s.path, ": damaged shard: ", n, " record(s) indexed, ",
                   s.index->problems().size(), " problem(s) (see tfrecordfs verify)");
    }
    if (json) {
      w.BeginObject().Key("path").String(s.path).Key("records").Uint(n);
      if (!s.index->problems().empty()) w.Key("damaged").Bool(true);
      w.EndObject();
    } else {
      absl::StrAppend(&out, n, "\t", EscapeForLog(s.path), "\n");
    }
  }
  if (json) {
    w.EndArray().Key("records").Uint(total).EndObject();
    out = w.str();
  } else {
    absl::StrAppend(&out, total, "\ttotal\n");
  }
  return tool.Finish(out, !damaged);
}

}  // namespace tfrecordfs::cli
