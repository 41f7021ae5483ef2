// count's report (reports.h).
#include "absl/strings/str_cat.h"
#include "src/cli/json_writer.h"
#include "src/cli/reports.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::cli {

std::string CountReport(const inspect::CountResult& result, bool json) {
  std::string out;
  JsonWriter w;
  if (json) w.BeginObject().Key("shards").BeginArray();
  for (const inspect::ShardCount& s : result.shards) {
    if (s.problems > 0) {
      log::Warning(s.path, ": damaged shard: ", s.records, " record(s) indexed, ", s.problems,
                   " problem(s) (see tfrecordfs verify)");
    }
    if (json) {
      w.BeginObject().Key("path").String(s.path).Key("records").Uint(s.records);
      if (s.problems > 0) w.Key("damaged").Bool(true);
      w.EndObject();
    } else {
      absl::StrAppend(&out, s.records, "\t", EscapeForLog(s.path), "\n");
    }
  }
  if (!json) return absl::StrCat(out, result.records, "\ttotal\n");
  w.EndArray().Key("records").Uint(result.records).EndObject();
  return w.str();
}

}  // namespace tfrecordfs::cli
