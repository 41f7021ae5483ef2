// What the toolbox commands (count, schema, show, verify, index, repair,
// reshard, status, pack, commit, unmount) share: their start-up (command
// line, the index store, a scan of the SOURCEs with a progress bar), their
// end (stdout and the exit status), and value formatting.
#ifndef TFRECORDFS_CLI_TOOLBOX_H_
#define TFRECORDFS_CLI_TOOLBOX_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "src/cli/progress.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/plan.h"
#include "tfrecordfs/scan/scan.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::cli {

// The index store the toolbox uses: the per-user cache, read and written,
// as a mount uses it (a walk only, when neither XDG_CACHE_HOME nor HOME is
// set).
index::StoreOptions ToolStoreOptions();

// How a toolbox command starts and ends, in one place:
//
//   int CountMain(int argc, char** argv) {
//     Tool tool({.name = "count", .usage = kCountUsage});
//     if (auto stop = tool.Start(argc, argv)) return *stop;  // parse, SOURCEs, scan
//     for (const scan::ScannedShard& s : tool.shards()) ...
//     return tool.Finish(out, !damaged);  // stdout, then the exit status
//   }
//
// A command with checks of its own between parsing and scanning calls
// Parse, NeedSources and Scan itself; one that scans no SOURCEs (show,
// status, pack, commit, unmount) uses Parse and Finish. A command whose
// parse is a function of its own (a page: parse, run, report; reshard's
// ParseReshard, commit's, pack's) calls ParseFlags, which says nothing and
// returns the usage error, then Stop. Exit statuses are
// commands.h's.
//
// Thread-safety: none; a command's main thread owns its Tool.
struct ToolSpec {
  absl::string_view name;  // "count": messages say "tfrecordfs count: ..."
  // What -h/--help prints: `usage` (through the command's own option rows),
  // the rows of the shared flags the command takes (SharedFlagRows: -q as
  // `quiet_row` allows, --max-shard-records when it indexes, -h), with their
  // descriptions at `usage_column`, then `usage_end` (its exit statuses),
  // then the paragraphs on object-storage flags and parts.
  absl::string_view usage;
  absl::string_view usage_end = "";
  size_t usage_column = 15;
  bool quiet_row = true;  // false: the command's own rows describe -q
  bool json = true;       // takes --json
  bool quiet = true;      // takes -q/--quiet (no progress bar)
  // Indexes shards: takes --max-shard-records N (index::StoreOptions::
  // max_records); a shard over it is skipped with an error and the command
  // then exits 1 (Finish). Such a command reads SOURCEs, so it also takes
  // the object-storage flags --no-sign-request and --gcs-token-file PATH
  // (objstore::ObjectOptions; its --help gets a paragraph on them).
  bool indexes = false;
  // Runs as one part of many: takes --part K/N and --parts N, and reads the
  // job runners' variables (SLURM_ARRAY_TASK_ID/_COUNT,
  // AWS_BATCH_JOB_ARRAY_INDEX/_SIZE, JOB_COMPLETION_INDEX with --parts N);
  // Scan then keeps the part's own files (reshape/plan.h) unless the
  // command sets another PartScope. Its --help gets a paragraph on them.
  bool parts = false;
  // Also takes --finalize (the step after the parts; Scan then lists the
  // SOURCEs without indexing them: PartScope::kListOnly).
  bool finalize = false;
};

// What Scan indexes when the command runs as a part (ToolSpec::parts).
enum class PartScope {
  kOwnFiles,  // the files the plan gives this part (count, verify, index, repair)
  kAllFiles,  // every shard: each part needs all indexes (reshard)
  kListOnly,  // none: the listing alone (--finalize); no shard is required
};

// A regular file of the SOURCEs as the plan sees it (Tool::plan_files()):
// what a part's manifest says of an input (reshape/parts.h).
using PlanInputFile = reshape::ManifestInput;

// A command's own options: `own(i)` gets the first look at each option
// (argv[*i]) and returns nullopt when it is not one of the command's own,
// kExitOk when it took it (advancing *i past any value), or an exit code.
using OwnOptions = std::function<std::optional<int>(int* i)>;
// The same for ParseFlags: true when it took argv[*i] (advancing *i past
// any value), false when it is not one of the command's own, or
// InvalidArgument with the usage message.
using OwnFlags = std::function<absl::StatusOr<bool>(int* i)>;

class Tool {
 public:
  explicit Tool(ToolSpec spec) : spec_(spec) {}
  Tool(const Tool&) = delete;
  Tool& operator=(const Tool&) = delete;

  // Parses the command line: operands; -h/--help (prints the usage);
  // --json, -q/--quiet, --max-shard-records and the object-storage flags
  // as the spec allows; "--" (only operands follow);
  // `own` for the rest; anything else is a usage error. Returns an exit
  // code when the command should stop now (help printed, usage error),
  // else nullopt.
  std::optional<int> Parse(int argc, char** argv, const OwnOptions& own = nullptr);
  // What Parse does, saying nothing: a usage error is InvalidArgument with
  // its message (Usage says it); -h/--help sets help() and ends the parse
  // (PrintHelp prints it). For a command's parse function that a unit test
  // calls.
  absl::Status ParseFlags(int argc, char** argv, const OwnFlags& own = nullptr);
  bool help() const { return help_; }
  // Prints -h/--help's text on stdout; kExitOk.
  int PrintHelp() const;
  // After a command's parse function (over ParseFlags) returned `parsed`:
  // the exit code when the command stops here, after saying the usage
  // error or printing --help; else nullopt.
  std::optional<int> Stop(const absl::Status& parsed) const;
  // A usage error when there is no operand ("need at least one SOURCE").
  std::optional<int> NeedSources() const;
  // Scans the operands as SOURCEs (scan::Scan) through store() (made with
  // `store_options`), with a progress bar over their file bytes on a
  // terminal unless quiet. `extra` may add an on_shard callback and
  // threads. Files named like shards that are not are reported as a mount
  // reports them ("...; <skipped>"). Finding no shard is an error. Returns
  // kExitFailed, after saying why, when the scan fails.
  std::optional<int> Scan(const index::StoreOptions& store_options = ToolStoreOptions(),
                          scan::ScanOptions extra = {}, absl::string_view skipped = "skipped");
  // Parse, NeedSources and Scan (with the toolbox's store).
  std::optional<int> Start(int argc, char** argv, const OwnOptions& own = nullptr);

  // ---- parts (ToolSpec::parts) ----
  // After Parse: the part this run is, from --part K/N or the job runners'
  // variables (said on stderr), or nullopt (the whole work; also with
  // --finalize). A variable without its count and no --parts, and --parts
  // without a variable, are usage errors (Parse returns kExitUsage).
  const std::optional<reshape::PartSpec>& part() const { return part_; }
  bool finalize() const { return finalize_; }
  // Before Scan: what this run computes beyond the command's name (the
  // options that shape its output), part of the plan's id; and what Scan
  // indexes.
  void SetPlanSalt(std::string salt) { salt_ = std::move(salt); }
  void SetPartScope(PartScope scope) { scope_ = scope; }
  // Before Scan: the plan may cut files into pieces (reshape/plan.h: a part
  // owns the records that begin in its pieces), so that one large shard is
  // not one part's work. Default: whole files.
  void SetSplitFiles(bool split) { split_ = split; }
  // After Scan with a part: the part's pieces of the file at `path` (none
  // when another part owns it; without a part, the whole file).
  std::vector<reshape::Piece> PiecesOf(const std::string& path) const;
  // After Scan with a part or --finalize: every regular file the SOURCEs
  // listed (the plan's inputs, in listing order), and the plan of them over
  // `parts` parts (plan() is the one for part()->count).
  const std::vector<PlanInputFile>& plan_files() const { return plan_files_; }
  reshape::PartPlan PlanFor(uint32_t parts) const;
  const reshape::PartPlan& plan() const { return plan_; }

  bool json() const { return json_; }
  bool quiet() const { return quiet_; }
  const std::vector<std::string>& operands() const { return operands_; }
  // How s3:// and gs:// operands are reached (--no-sign-request,
  // --gcs-token-file); Scan passes them on.
  const objstore::ObjectOptions& objects() const { return objects_; }
  // The shards Scan found (none before).
  const std::vector<scan::ScannedShard>& shards() const { return scanned_.shards; }
  // The uncompressed bytes of the scanned shards' records: the work of a
  // command that reads them all.
  uint64_t DataBytes() const;
  // The index store: Scan's, else one made with ToolStoreOptions() (and
  // --max-shard-records).
  index::IndexStore* store();

  // A progress bar over `total_bytes`, drawn on a terminal unless quiet.
  ProgressBar Progress(uint64_t total_bytes) const;

  // "tfrecordfs NAME: MESSAGE" and the --help hint; kExitUsage.
  int Usage(absl::string_view message) const { return UsageError(spec_.name, message); }
  // Logs `status` as an error; kExitFailed.
  static int Fail(const absl::Status& status);
  // Writes `out` to stdout; kExitOk when that worked, `ok`, and Scan skipped
  // no shard over --max-shard-records; else kExitFailed.
  int Finish(absl::string_view out, bool ok) const;

 private:
  const ToolSpec spec_;
  bool json_ = false;
  bool quiet_ = false;
  std::vector<std::string> operands_;
  std::optional<uint64_t> max_records_;  // --max-shard-records
  objstore::ObjectOptions objects_;
  bool skipped_shards_ = false;  // Scan skipped a shard over it
  std::optional<index::IndexStore> store_;
  scan::ScanResult scanned_;
  absl::Status ResolvePart();
  bool help_ = false;
  std::string part_flag_;               // --part's value
  std::optional<uint32_t> parts_flag_;  // --parts
  std::optional<reshape::PartSpec> part_;
  bool finalize_ = false;
  std::string salt_;
  PartScope scope_ = PartScope::kOwnFiles;
  bool split_ = false;
  std::vector<PlanInputFile> plan_files_;
  reshape::PartPlan plan_;
};

// A shared flag's row in a command's --help: the flag and its description
// (lines separated by '\n').
struct FlagRow {
  absl::string_view flag;
  absl::string_view text;
};
inline constexpr FlagRow kQuietRow = {"-q, --quiet", "no progress bar"};
inline constexpr FlagRow kMaxShardRecordsRow = {
    "--max-shard-records N",
    "the most records one shard may have (default 50000000);\n"
    "a shard with more is skipped, and the exit status is 1"};
inline constexpr FlagRow kHelpRow = {"-h, --help", "show this help and exit"};

// `rows` as --help prints them: "  FLAG", the description from `column` on
// (the flag on a line of its own when it reaches the column), each further
// line of it indented to the column.
std::string FlagRows(size_t column, std::initializer_list<FlagRow> rows);

// Splits "--flag=value" into flag and value; a flag that takes a value and
// has none after '=' takes argv[++*i]. Returns false when the value is
// missing.
bool TakeValue(int argc, char** argv, int* i, std::string* flag, std::string* value);

// The value of pack's and reshard's --compression: none, gzip, zlib; else
// InvalidArgument with the usage message.
absl::StatusOr<source::Codec> CompressionFlag(absl::string_view value);

// One float as the shortest decimal that reads back bit-exact
// (naming::FormatFloats): "0.1", "1e+30", "nan", "-inf", "nan(0x...)".
std::string FormatFloat(float v);
// The same as a JSON value: a number that reads back as a float ("1.0",
// "-0.0", "0.1"), or a string for NaN and infinities (JSON has no such
// numbers).
void WriteJsonFloat(JsonWriter* w, float v);

// {"path": ..., "reason": ...}: a shard a command could not read (verify's
// and repair's "unreadable").
void WriteJsonUnreadable(JsonWriter* w, absl::string_view path, const absl::Status& status);

// "path": ..., "record": i | null, "offset": N, inside an object the caller
// has begun: where in a shard a damaged record or span is (verify's
// "damaged", repair's and reshard's "dropped"). No record (damage between
// records or after the last one) is null.
void WriteJsonPlace(JsonWriter* w, absl::string_view path, std::optional<uint64_t> record,
                    uint64_t offset);

// Where a damaged record or span is, as verify, repair and reshard print it
// (the same words in all three): "record i at [uncompressed ]byte offset
// N", or "outside any record at [uncompressed ]byte offset N" for damage
// between records or after the last one (no record).
std::string DamagePlace(std::optional<uint64_t> record, uint64_t offset, bool compressed);

bool StdoutIsTerminal();

// Writes `text` to stdout; false when that fails (a closed pipe, a full
// disk), after saying so.
bool WriteStdout(absl::string_view text);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_TOOLBOX_H_
