// What the read-only toolbox commands (count, schema, show, verify) share:
// the index store they use, a scan of the SOURCEs with a
// progress bar, and value formatting.
#ifndef TFRECORDFS_CLI_TOOLBOX_H_
#define TFRECORDFS_CLI_TOOLBOX_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::cli {

// The arguments every toolbox command shares: operands, --json, -q/--quiet
// (where `quiet_ok`), -h/--help (prints `usage`), "--" (only operands
// follow). `own(i)` gets the first look at each option (argv[*i]) and
// returns nullopt when it is not one of the command's own, kExitOk when it
// took it (advancing *i past any value), or an exit code. Returns an exit
// code when the command should stop now (help printed, usage error), else
// nullopt.
struct ToolArgs {
  bool json = false;
  bool quiet = false;
  std::vector<std::string> operands;
};
std::optional<int> ParseToolArgs(int argc, char** argv, absl::string_view cmd,
                                 absl::string_view usage, bool quiet_ok, ToolArgs* args,
                                 const std::function<std::optional<int>(int* i)>& own = nullptr);

// Splits "--flag=value" into flag and value; a flag that takes a value and
// has none after '=' takes argv[++*i]. Returns false when the value is
// missing.
bool TakeValue(int argc, char** argv, int* i, std::string* flag, std::string* value);

// The index store the toolbox uses: the per-user cache, read and written,
// as a mount uses it (a walk only, when neither XDG_CACHE_HOME nor HOME is
// set).
index::StoreOptions ToolStoreOptions();

// Scans the SOURCEs (scan::Scan) through `store`, drawing a progress bar on
// a terminal unless `quiet`. Files named like shards that are not
// (scan::NotAShardNote) are reported on stderr as a mount reports them.
// Finding no shard at all is an error (RequireShards).
absl::StatusOr<scan::ScanResult> ScanSources(const std::vector<std::string>& sources,
                                             index::IndexStore* store, bool quiet);

// NotFound, naming the SOURCEs, when `result` holds no shard: a toolbox
// command over no shard has nothing to say, and "0 record(s)" would read as
// an answer.
absl::Status RequireShards(const std::vector<std::string>& sources, const scan::ScanResult& result);

// One float as the shortest decimal that reads back bit-exact
// (naming::FormatFloats): "0.1", "1e+30", "nan", "-inf", "nan(0x...)".
std::string FormatFloat(float v);
// The same as a JSON value: a number that reads back as a float ("1.0",
// "-0.0", "0.1"), or a string for NaN and infinities (JSON has no such
// numbers).
void WriteJsonFloat(JsonWriter* w, float v);

bool StdoutIsTerminal();

// Writes `text` to stdout; false when that fails (a closed pipe, a full
// disk), after saying so.
bool WriteStdout(absl::string_view text);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_TOOLBOX_H_
