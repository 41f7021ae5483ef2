// `tfrecordfs repair SOURCE... --output DIR`: a copy of every shard without
// its damaged records (reshape::RepairShard), each named as the mount shows
// it, under DIR.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/progress.h"
#include "src/cli/reports.h"
#include "src/cli/reshape_cli.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/reshape/bucket_parts.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/repair_shards.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kRepairUsage[] = R"(Usage: tfrecordfs repair [options] SOURCE... --output DIR

Writes a copy of every shard in the SOURCEs (shard files, or directories
searched recursively, exactly as a mount would; plain, GZIP, ZLIB and SNAPPY
shards, not ARRAYRECORD files, whose chunk hashes confine damage already) to DIR, under the path a mount shows it at and with the same compression,
leaving out the damaged records: those whose framing, length CRC or data CRC
fails, found by the same header walk that resynchronises after damage in a
mount. Payloads are copied byte for byte; records that are not Examples are
kept. Each dropped record is printed with its shard, record index, byte
offset (uncompressed, in a GZIP/ZLIB shard) and reason, in the words of
`tfrecordfs verify`, and so is each damaged span of bytes in no record
(stray bytes, a truncated tail: "not copied"); the summary counts them as
verify does (records written + dropped = records).

DIR is created if needed; it must lie outside every SOURCE and hold none,
and no file is ever replaced. Each copy is written under a temporary name
(.NAME.tmp) and renamed when complete: Ctrl-C leaves no partial file under
a final name. Files that are not shards are not copied.

Options:
  -o, --output DIR  where the copies go (required)
  --json            one JSON document instead: {"shards": [{"path": ...,
                    "output": ..., "records": N, "written": K}],
                    "records": N, "written": K, "dropped": [{"path": ...,
                    "record": i, "offset": ..., "reason": ...}],
                    "unreadable": [...]}; "record" is null for damage
                    between records
)";
constexpr char kRepairUsageEnd[] = R"(
Exit status: 0 when nothing was dropped, 1 when a record was dropped or a
shard could not be read or written, 2 on a usage error, 130 when
interrupted.
)";

}  // namespace

int RepairMain(int argc, char** argv) {
  Tool tool({.name = "repair",
             .usage = kRepairUsage,
             .usage_end = kRepairUsageEnd,
             .usage_column = 20,
             .indexes = true,
             .parts = true,
             .finalize = true});
  std::string output;
  auto own = [&](int* i) -> std::optional<int> {
    std::string flag, value;
    const std::string arg = argv[*i];
    if (arg != "-o" && arg != "--output" && !absl::StartsWith(arg, "--output=")) {
      return std::nullopt;
    }
    if (!TakeValue(argc, argv, i, &flag, &value) || value.empty()) {
      return tool.Usage("--output needs a directory");
    }
    output = value;
    return kExitOk;
  };
  if (auto stop = tool.Parse(argc, argv, own)) return *stop;
  if (auto stop = tool.NeedSources()) return *stop;
  if (output.empty()) return tool.Usage("need --output DIR");
  if (reshape::IsBucketOutput(output)) {
    return tool.Usage("repair writes into a local folder, not a bucket (reshard writes to both)");
  }
  if (tool.finalize()) return FinalizeMain(&tool, output, "repair");
  const std::atomic<bool>* interrupted = InstallInterruptHandlers();

  if (auto stop = tool.Scan()) return *stop;
  if (auto s = CheckOutputDir(output, tool.operands(), tool.shards()); !s.ok()) {
    return tool.Usage(s.message());
  }
  for (const scan::ScannedShard& s : tool.shards()) {
    const std::string out = JoinPath(output, s.mount_path);
    auto exists = Exists(out);
    if (!exists.ok() || *exists) {
      log::Error(exists.ok()
                     ? absl::StrCat(out, ": already exists (never replaced); nothing written")
                     : std::string(exists.status().message()));
      return kExitFailed;
    }
  }

  // A part writes into a work folder of its own, published whole at the end.
  std::unique_ptr<reshape::PartOutput> part_out;
  std::string write_dir = output;
  if (tool.part()) {
    if (auto made = MakeDirs(output, 0755); !made.ok()) return tool.Fail(made);
    auto begun = reshape::PartOutput::Begin(output, tool.plan().IdHex(), tool.part()->index);
    if (!begun.ok()) return tool.Fail(begun.status());
    part_out = *std::move(begun);
    write_dir = part_out->work_dir();
  }
  ProgressBar progress = tool.Progress(tool.DataBytes());
  reshape::Control control;
  control.cancel = interrupted;
  control.progress = [&](uint64_t n, uint64_t bytes) { progress.Add(0, n, bytes); };
  control.mid_output = PauseHook();
  auto repaired =
      reshape::RepairShards(tool.shards(), write_dir, control, [&] { progress.Add(1, 0, 0); });
  progress.Finish();
  if (!repaired.ok()) {
    log::Error("interrupted: ", repaired.status().message(),
               "; copies not yet complete were removed");
    return kExitInterrupted;
  }
  // A part whose every shard was copied is published (its copies under
  // DIR/.tfrecordfs-parts until --finalize); one with a failed shard is not.
  if (part_out && std::all_of(repaired->begin(), repaired->end(),
                              [](const reshape::RepairedShard& d) { return d.status.ok(); })) {
    reshape::PartManifest manifest = NewManifest(tool, "repair");
    for (reshape::RepairedShard& d : *repaired) {
      manifest.outputs.push_back({d.shard->mount_path, d.result.records_kept, d.result.bytes,
                                  d.result.file_bytes, d.result.crc32c.value_or(0),
                                  d.result.crc32c.has_value()});
      d.result.output = JoinPath(part_out->published_dir(), d.shard->mount_path);
    }
    if (auto st = part_out->Publish(std::move(manifest)); !st.ok()) return tool.Fail(st);
  }
  const reshape::RepairTotals t = reshape::TotalsOf(*repaired);
  return tool.Finish(RepairReport(*repaired, output, tool.json()),
                     t.dropped + t.spans == 0 && t.unreadable == 0);
}

}  // namespace tfrecordfs::cli
