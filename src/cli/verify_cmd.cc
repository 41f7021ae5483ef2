// `tfrecordfs verify SOURCE...`: reads every record of every shard, checks
// both CRCs and decodes the payload (inspect::VerifyShard), and names each
// damaged record.
#include <vector>

#include "src/cli/commands.h"
#include "src/cli/progress.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/inspect/commands.h"
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
  // This part's pieces of each shard (the whole shard without --part).
  auto ranges = [&](const scan::ScannedShard& s) {
    std::vector<inspect::RecordRange> out;
    for (const reshape::Piece& piece : tool.PiecesOf(s.path)) {
      inspect::RecordRange range;
      if (tool.part()) {
        const auto [first, last] = reshape::PieceRecords(*s.index, piece);
        range = {first, last};
      }
      out.push_back(range);
    }
    return out;
  };
  ProgressBar progress = tool.Progress(tool.DataBytes());
  const inspect::VerifyResult result = inspect::VerifyShards(
      tool.shards(), ranges,
      [&](uint64_t s, uint64_t n, uint64_t bytes) { progress.Add(s, n, bytes); });
  progress.Finish();
  return tool.Finish(VerifyReport(result, tool.json()), result.intact());
}

}  // namespace tfrecordfs::cli
