// `tfrecordfs show SHARD RECORD...`: records as text or JSON.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/inspect/commands.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kShowUsage[] = R"(Usage: tfrecordfs show [options] SHARD RECORD...

Prints records of the shard file SHARD (plain, GZIP, ZLIB or SNAPPY, or an
ARRAYRECORD file); RECORD
is a record index, counted from 0 (`tfrecordfs count` gives the number).

Text: a heading per record, then one line per feature: name, kind[count] and
the values. Floats print as the shortest decimal that reads back bit-exact.
Bytes values print quoted when they are single-line UTF-8 text (control
bytes and '\' escaped), else as <type, N bytes> (the type sniffed from the
content, or the dtype and shape of a serialized tensor). On a terminal long
lists and long text are shortened; off a terminal every value is printed.
SequenceExamples print their context, then each feature list step by step.
ExampleListWithContext and Example-in-Example records (TF-Ranking) print
their context, then each example's features. A payload that is none of these prints as raw bytes.

Options:
  --json       one JSON document instead: for one RECORD an object, for
               several an array of them:
                 {"record": i, "offset": N, "kind": "Example",
                  "features": {"name": {"kind": "int64"|"float"|"bytes",
                                        "values": [...]}}}
               SequenceExamples: "context" (as "features") and
               "feature_lists": {"name": [[step values], ...]};
               ExampleListWithContext and ExampleInExample: "context"
               (absent when the record has none) and "examples":
               [{features}, ...]; other
               payloads: "raw". Bytes values are strings when they are
               single-line UTF-8 text, else {"base64": "..."}; NaN and
               infinite floats are strings ("nan", "-inf").
)";
constexpr char kShowUsageEnd[] = R"(
Exit status: 0 on success, 1 when SHARD or a record cannot be read (damaged,
or no such record), 2 on a usage error.
)";

}  // namespace

int ShowMain(int argc, char** argv) {
  Tool tool({.name = "show",
             .usage = kShowUsage,
             .usage_end = kShowUsageEnd,
             .usage_column = 15,
             .quiet = false,
             .indexes = true});
  if (auto stop = tool.Parse(argc, argv)) return *stop;
  const std::vector<std::string>& positional = tool.operands();
  if (positional.size() < 2) return tool.Usage("need a SHARD and at least one RECORD");
  std::vector<uint64_t> wanted;
  for (size_t k = 1; k < positional.size(); ++k) {
    uint64_t r = 0;
    if (!absl::SimpleAtoi(positional[k], &r) || positional[k][0] == '+') {
      return tool.Usage(
          absl::StrCat("RECORD must be a record index (0, 1, ...), not '", positional[k], "'"));
    }
    wanted.push_back(r);
  }
  const std::string& path = positional[0];
  auto shard = scan::ScanOne(path, tool.store(), tool.objects());
  if (!shard.ok()) return tool.Fail(shard.status());
  auto records = inspect::ReadRecords(*shard, wanted);
  if (!records.ok()) return tool.Fail(records.status());
  const bool read_all = std::all_of(records->begin(), records->end(),
                                    [](const inspect::ShownRecord& r) { return r.payload.ok(); });
  return tool.Finish(ShowReport(path, shard->codec != source::Codec::kNone, *records, tool.json(),
                                !tool.json() && StdoutIsTerminal()),
                     read_all);
}

}  // namespace tfrecordfs::cli
