#include "src/cli/reshape_cli.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/reshape/bucket_parts.h"
#include "tfrecordfs/reshape/tfds_split.h"

namespace tfrecordfs::cli {
namespace {

// The one piece of process-wide state: a signal handler can reach nothing
// else. Lock-free, hence async-signal-safe.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void OnInterrupt(int sig) {
  g_interrupted.store(true);
  ::signal(sig, SIG_DFL);  // a second Ctrl-C kills at once
}

// `inner` is `outer` or lies below it.
bool Within(const std::string& inner, const std::string& outer) {
  return inner == outer || outer == "/" || absl::StartsWith(inner, absl::StrCat(outer, "/"));
}

std::string Resolved(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  return ec ? path : p.string();
}

}  // namespace

const std::atomic<bool>* InstallInterruptHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  return &g_interrupted;
}

std::function<void()> PauseHook() {
  const char* fault = std::getenv("TFRECORDFS_FAULT");
  if (fault == nullptr || std::strcmp(fault, "pause_mid_output") != 0) return nullptr;
  return [done = false]() mutable {
    if (done) return;
    done = true;
    constexpr char kMsg[] = "tfrecordfs: paused (TFRECORDFS_FAULT=pause_mid_output)\n";
    (void)!::write(2, kMsg, sizeof(kMsg) - 1);
    // Poll the flag: the signal may be handled by another thread (a run
    // copier, a worker), so a sigsuspend here, in this thread, could wait
    // for good.
    while (!g_interrupted.load()) {
      struct timespec tick = {0, 10'000'000};  // 10 ms
      ::nanosleep(&tick, nullptr);
    }
  };
}

absl::Status CheckOutputDir(const std::string& output, const std::vector<std::string>& sources,
                            const std::vector<scan::ScannedShard>& shards) {
  const std::string out = Resolved(output);
  for (const std::string& s : sources) {
    const std::string src = Resolved(s);
    if (Within(out, src) || Within(src, out)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--output ", output, " overlaps the source ", s,
                       " (the output directory must be outside every SOURCE and hold none)"));
    }
  }
  for (const scan::ScannedShard& s : shards) {
    if (Within(Resolved(s.path), out)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--output ", output, " holds the input shard ", s.path));
    }
  }
  return absl::OkStatus();
}

std::string DescribeDropped(const reshape::Dropped& d, bool compressed) {
  return absl::StrCat(
      EscapeForLog(d.path), ": ",
      DamagePlace(d.record == reshape::kNoRecord ? std::nullopt : std::optional<uint64_t>(d.record),
                  d.offset, compressed),
      ": ", EscapeForLog(d.reason));
}

void WriteJsonDropped(JsonWriter* w, const reshape::Dropped& d) {
  w->BeginObject();
  WriteJsonPlace(w, d.path, d.record == reshape::kNoRecord ? std::nullopt : std::optional(d.record),
                 d.offset);
  w->Key("reason").String(d.reason).EndObject();
}

reshape::PartManifest NewManifest(const Tool& tool, absl::string_view command) {
  absl::flat_hash_set<std::string> read;
  for (const scan::ScannedShard& s : tool.shards()) read.insert(s.path);
  return reshape::NewPartManifest(command, tool.plan(), *tool.part(), tool.plan_files(),
                                  [&](const std::string& path) { return read.contains(path); });
}

int FinalizeMain(Tool* tool, const std::string& output, absl::string_view command) {
  if (auto stop = tool->Scan()) return *stop;
  if (auto s = CheckOutputDir(output, tool->operands(), tool->shards()); !s.ok()) {
    return tool->Usage(s.message());
  }
  const std::vector<reshape::ManifestInput>& current = tool->plan_files();
  const auto plan_for = [&](uint32_t n) { return tool->PlanFor(n).IdHex(); };
  std::unique_ptr<reshape::BucketParts> bucket;  // an s3:// or gs:// --output
  if (reshape::IsBucketOutput(output)) {
    auto opened = reshape::BucketParts::Open(output);
    if (!opened.ok()) return tool->Fail(opened.status());
    bucket = *std::move(opened);
  }
  auto report = bucket ? bucket->Finalize(std::string(command), plan_for, current)
                       : reshape::FinalizeParts(output, std::string(command), plan_for, current);
  if (!report.ok()) {
    log::Error(report.status().message());
    return kExitFailed;
  }
  if (command == "reshard") {
    // TFDS-named shards: their split's sizes in dataset_info.json.
    std::vector<std::string> inputs;
    for (const PlanInputFile& f : tool->plan_files()) inputs.push_back(f.path);
    auto info = reshape::WriteTfdsInfoAfterFinalize(report->outputs, inputs, output, bucket.get());
    if (!info.ok()) {
      log::Error("the shards are named, but their dataset_info.json is not written: ",
                 info.status().message());
      return kExitFailed;
    }
    if (*info) log::Info("wrote ", EscapeForLog(**info), ": the split's shardLengths and numBytes");
  }
  for (const std::string& w : report->removed) {
    log::Warning("removed ", EscapeForLog(w), ", the work folder of a part that was killed");
  }
  uint64_t records = 0;
  std::string out;
  JsonWriter w;
  if (tool->json()) w.BeginObject().Key("outputs").BeginArray();
  for (const reshape::ManifestOutput& o : report->outputs) {
    records += o.records;
    const std::string path = bucket ? bucket->ObjectName(o.path) : JoinPath(output, o.path);
    if (tool->json()) {
      w.BeginObject()
          .Key("path")
          .String(path)
          .Key("records")
          .Uint(o.records)
          .Key("bytes")
          .Uint(o.bytes)
          .Key("file_bytes")
          .Uint(o.file_bytes)
          .EndObject();
    } else {
      absl::StrAppend(&out, o.records, "\t", EscapeForLog(path), "\n");
    }
  }
  if (tool->json()) {
    w.EndArray()
        .Key("records")
        .Uint(records)
        .Key("plan")
        .String(report->plan)
        .Key("parts")
        .Uint(report->parts)
        .EndObject();
    out = w.str();
  } else {
    absl::StrAppend(&out, records, "\ttotal: ", report->outputs.size(), " file(s) from ",
                    report->parts, " part(s) of plan ", report->plan, "\n");
  }
  return tool->Finish(out, true);
}

}  // namespace tfrecordfs::cli
