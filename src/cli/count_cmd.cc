// `tfrecordfs count SOURCE...`: records per shard, from the index alone (a
// cached or shared index, else a header walk): payloads are never read.
#include "src/cli/commands.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/inspect/commands.h"

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
)";
constexpr char kCountUsageEnd[] = R"(
Exit status: 0 on success, 1 when a SOURCE cannot be read or a shard is
damaged, 2 on a usage error.
)";

}  // namespace

int CountMain(int argc, char** argv) {
  Tool tool({.name = "count",
             .usage = kCountUsage,
             .usage_end = kCountUsageEnd,
             .usage_column = 15,
             .indexes = true,
             .parts = true});
  if (auto stop = tool.Start(argc, argv)) return *stop;
  const inspect::CountResult result = inspect::CountRecords(tool.shards());
  return tool.Finish(CountReport(result, tool.json()), !result.damaged());
}

}  // namespace tfrecordfs::cli
