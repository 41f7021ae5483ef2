// What `repair` and `reshard` share on top of the toolbox (toolbox.h): the
// output-directory checks that keep them from writing into their input,
// Ctrl-C handling, and how a dropped record is printed.
//
// Thread-safety: InstallInterruptHandlers and the flag are process-wide
// (signal dispositions are); call from the main thread.
#ifndef TFRECORDFS_CLI_RESHAPE_CLI_H_
#define TFRECORDFS_CLI_RESHAPE_CLI_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/cli/json_writer.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::cli {

// The exit status after SIGINT or SIGTERM stopped a command (128 + SIGINT,
// as a shell reports it).
inline constexpr int kExitInterrupted = 130;

// Makes SIGINT and SIGTERM set the returned flag instead of killing the
// process, so that the command can remove its temporary files. A second
// signal kills as usual.
const std::atomic<bool>* InstallInterruptHandlers();

// The test hook of the commands (the man page does not list it): with
// TFRECORDFS_FAULT=pause_mid_output in the environment, the returned
// function says "paused" on stderr and waits for SIGINT/SIGTERM, the first
// time it is called (reshape::Control::mid_output); otherwise it is empty.
std::function<void()> PauseHook();

// OK when `output` (which may not exist yet) is not a SOURCE, does not lie
// inside a directory SOURCE, and contains neither a SOURCE nor a shard
// (compared after resolving symlinks): the commands never write among
// their input. InvalidArgument naming both otherwise.
absl::Status CheckOutputDir(const std::string& output, const std::vector<std::string>& sources,
                            const std::vector<scan::ScannedShard>& shards);

// "<path>: record i at [uncompressed ]byte offset N: <reason>" (or
// "outside any record at ...": DamagePlace, verify's words), escaped for a
// terminal, no newline.
std::string DescribeDropped(const reshape::Dropped& d, bool compressed);
// {"path": ..., "record": i | null, "offset": N, "reason": ...}
void WriteJsonDropped(JsonWriter* w, const reshape::Dropped& d);

// ---- parts (reshape/parts.h) ----

// The manifest of the part `tool` runs (Tool::part()): its command, plan and
// inputs (every file the plan covers when the scope is kAllFiles, else the
// part's own files); the caller adds the outputs.
reshape::PartManifest NewManifest(const Tool& tool, absl::string_view command);

// `COMMAND SOURCE... --output DIR --finalize`: lists the SOURCEs (no index
// built), checks the parts' manifests against them (reshape::FinalizeParts)
// and moves the outputs into DIR; prints "records<TAB>path" per output and
// a total (or JSON with --json). Exit 0, 1 with the missing, stale or
// foreign parts named, or 2 on a usage error.
int FinalizeMain(Tool* tool, const std::string& output, absl::string_view command);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_RESHAPE_CLI_H_
