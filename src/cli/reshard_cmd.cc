// `tfrecordfs reshard SOURCE... --output DIR`: every record of the SOURCEs
// into N new shards, in source order or shuffled. A page: parse
// (reshard_flags.h), run (reshape::RunReshard, reshape/reshard_run.h),
// report (reports.h's ReshardReport).
#include <atomic>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "src/cli/commands.h"
#include "src/cli/progress.h"
#include "src/cli/reports.h"
#include "src/cli/reshape_cli.h"
#include "src/cli/reshard_flags.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/reshape/reshard_run.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kReshardUsage[] = R"(Usage: tfrecordfs reshard [options] SOURCE... --output DIR

Writes every record of the shards in the SOURCEs (shard files, or
directories searched recursively, exactly as a mount would; plain, GZIP,
ZLIB and SNAPPY shards and ARRAYRECORD files, taken in that order) into new
shards DIR/NAME-00000-of-0000N.tfrecord[.gz|.zlib] or ArrayRecord files
(--format): merging many shards, splitting one and converting between
TFRecord and ArrayRecord are the same command. Payloads are copied byte for byte, in
source order, or with --shuffle in a uniformly random global order that
depends only on the seed and the sources.

A shuffled reshard sorts the records by a key drawn from the seed, the
shard's path in the SOURCE and the record's number, in two passes: each
record is read in file order and written, sorted, into runs of half the
--memory budget in a work folder under DIR; then the runs are read back a
bucket of keys at a time and the records written in key order. Memory stays
within --memory whatever the dataset's size; each record is read twice and
written twice. The order depends only on the seed and the sources: the same
bytes come out of one process and of any number of parts (--part).

Every output file is written under a temporary name (.NAME.tmp); all are
renamed together once every one is complete. As parts (--part K/N), each
part writes its run of the output shards (the ones one process would
write, byte for byte) under DIR/.tfrecordfs-parts; --finalize names them. Ctrl-C, an error or a damaged
record leaves nothing under a final name, and no file is ever replaced.

Options:
  -o, --output DIR     where the new shards go (created if needed; outside
                       every SOURCE; required); or a bucket prefix
                       s3://BUCKET/PREFIX/ or gs://...: the shards are
                       written in a scratch folder under TMPDIR, then
                       each put as one object (never over one)
  --shards N           exactly N shards, the records split as evenly as
                       possible (earlier shards take the remainder)
  --shard-size SIZE    shards of at most SIZE framed (uncompressed) bytes,
                       at least one record each; K, M, G, T suffixes are
                       binary multiples (the default: 128M); with --shuffle,
                       ceil(total / SIZE) shards of equal bytes (a shard
                       may pass SIZE by less than one record)
  --prefix NAME        shard name prefix (default: data)
  --format F           tfrecord or arrayrecord (NAME.array_record-00000-of-
                       0000N, as TFDS names them); default: arrayrecord when
                       every source is an ArrayRecord file, else tfrecord
  --compression C      TFRecord: none, gzip (.tfrecord.gz) or zlib
                       (.tfrecord.zlib); default: the sources' when every
                       shard has the same, else none. ArrayRecord: none,
                       brotli, zstd or snappy, with an optional level as the
                       reference writer spells it (brotli:6, zstd:3);
                       default zstd:3
  --group-size N       ArrayRecord: records per chunk (default 1: each record
                       read alone, as TFDS writes them for Grain)
  --shuffle            a uniformly random global order
  --seed S             the shuffle's seed (an unsigned 64-bit number; default:
                       a random one, printed in the summary)
  --skip-damaged       leave damaged records out (listed) instead of stopping
  --buffer SIZE        in source order: the cache of compressed sources'
                       inflated blocks (default 64M)
  --memory SIZE        --shuffle: the memory budget (default 512M, at least
                       1M); the same for every part of a shuffle
  --pass map|reduce    --shuffle as parts: the first pass (every part),
                       then the second (every part), then --finalize
  --json               a JSON summary instead: {"shards": [{"path": ...,
                       "records": N, "bytes": B, "file_bytes": F}],
                       "records": N, "seed": S | null, "skipped": [...]}
)";
constexpr char kReshardUsageEnd[] = R"(
Exit status: 0 when every record was written, 1 when a damaged record was
skipped or the reshard failed (a damaged record without --skip-damaged),
2 on a usage error, 130 when interrupted.
)";

// How a failed run ends (reshape::FailedIn says where it failed): a pass
// over the records says it failed (130 when interrupted), another step
// says its error; 1.
int RunFailed(const absl::Status& status, const std::atomic<bool>* interrupted) {
  const reshape::ReshardStep step = reshape::FailedIn(status);
  if (step == reshape::ReshardStep::kOther) return Tool::Fail(status);
  const bool map = step == reshape::ReshardStep::kMap;
  if (absl::IsCancelled(status) || interrupted->load()) {
    log::Error("interrupted: ", status.message(),
               map ? "" : "; nothing was left under a final name");
    return kExitInterrupted;
  }
  log::Error(map ? "reshard --pass map" : "reshard", " failed: ", status.message(),
             map ? "" : "; nothing was written");
  return kExitFailed;
}

}  // namespace

ToolSpec ReshardSpec() {
  return {.name = "reshard",
          .usage = kReshardUsage,
          .usage_end = kReshardUsageEnd,
          .usage_column = 23,
          .indexes = true,
          .parts = true,
          .finalize = true};
}

int ReshardMain(int argc, char** argv) {
  Tool tool(ReshardSpec());
  auto flags = ParseReshard(&tool, argc, argv);
  if (auto stop = tool.Stop(flags.status())) return *stop;
  reshape::ReshardOptions& options = flags->options;
  tool.SetPlanSalt(ReshardPlanSalt(*flags));
  // A shuffle's map pass may take a piece of a large shard (the records
  // that begin in it): the same plan for its reduce pass and --finalize.
  tool.SetSplitFiles(options.shuffle);
  if (tool.finalize()) return FinalizeMain(&tool, flags->output, "reshard");
  const std::string& pass = flags->pass;
  // An in-order part reads every shard's index (the whole reshard's
  // boundaries); a shuffle's map pass its own shards; its reduce pass the
  // map passes' runs only.
  tool.SetPartScope(pass == "map"      ? PartScope::kOwnFiles
                    : pass == "reduce" ? PartScope::kListOnly
                                       : PartScope::kAllFiles);
  if (options.shuffle && !flags->seeded) {
    std::random_device rd;
    options.seed = (uint64_t{rd()} << 32) | rd();
  }
  const std::atomic<bool>* interrupted = InstallInterruptHandlers();

  if (auto stop = tool.Scan()) return *stop;
  if (auto s = CheckOutputDir(flags->output, tool.operands(), tool.shards()); !s.ok()) {
    return tool.Usage(s.message());
  }
  // Run (reshape/reshard_run.h), with a progress bar while the records go;
  // a bucket prefix is resolved before the format is.
  auto output = reshape::OpenReshardOutput(flags->output);
  if (!output.ok()) return tool.Fail(output.status());
  if (auto s = ResolveReshardFormat(tool.shards(), &*flags); !s.ok()) {
    return tool.Usage(s.message());
  }
  reshape::ReshardJob job = ReshardJobOf(tool, *flags);
  job.output = &*output;
  std::optional<ProgressBar> progress;
  job.on_pass_begin = [&] {
    progress.emplace(tool.DataBytes(), !tool.quiet() && StderrIsTerminal());
  };
  job.on_pass_end = [&] { progress->Finish(); };
  job.control.cancel = interrupted;
  job.control.progress = [&](uint64_t n, uint64_t bytes) { progress->Add(0, n, bytes); };
  job.control.output_done = [&] { progress->Add(1, 0, 0); };  // the bar's shards: those written
  job.control.mid_output = PauseHook();
  auto result = reshape::RunReshard(job);

  // Report.
  if (!result.ok()) return RunFailed(result.status(), interrupted);
  const bool complete = result->pass == reshape::ReshardPass::kMap ? result->map.skipped.empty()
                                                                   : result->report.skipped.empty();
  return tool.Finish(ReshardReport(*result, tool.shards(), options, tool.json()), complete);
}

}  // namespace tfrecordfs::cli
