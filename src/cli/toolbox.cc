#include "src/cli/toolbox.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/cli/progress.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::cli {

std::optional<int> ParseToolArgs(int argc, char** argv, absl::string_view cmd,
                                 absl::string_view usage, bool quiet_ok, ToolArgs* args,
                                 const std::function<std::optional<int>(int* i)>& own) {
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (options_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      args->operands.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << usage;
      return kExitOk;
    } else if (arg == "--json") {
      args->json = true;
    } else if (quiet_ok && (arg == "-q" || arg == "--quiet")) {
      args->quiet = true;
    } else if (auto taken = own ? own(&i) : std::nullopt; taken.has_value()) {
      if (*taken != kExitOk) return taken;
    } else {
      return UsageError(cmd, "unknown option " + arg);
    }
  }
  return std::nullopt;
}

bool TakeValue(int argc, char** argv, int* i, std::string* flag, std::string* value) {
  const std::string arg = argv[*i];
  if (const size_t eq = arg.find('='); eq != std::string::npos) {
    *flag = arg.substr(0, eq);
    *value = arg.substr(eq + 1);
    return true;
  }
  *flag = arg;
  if (*i + 1 >= argc) return false;
  *value = argv[++*i];
  return true;
}

index::StoreOptions ToolStoreOptions() {
  index::StoreOptions options;
  options.cache_dir = index::DefaultCacheDir();
  options.durable = false;  // a cache: a torn file is just rebuilt
  return options;
}

absl::StatusOr<scan::ScanResult> ScanSources(const std::vector<std::string>& sources,
                                             index::IndexStore* store, bool quiet) {
  const bool draw = !quiet && StderrIsTerminal();
  ProgressBar progress(draw ? TotalBytes(sources) : 0, draw);
  scan::ScanOptions options;
  options.sources = sources;
  options.store = store;
  options.on_shard = [&](const scan::ScannedShard& s) {
    progress.Add(1, s.index->num_records(), static_cast<uint64_t>(s.st.st_size));
  };
  auto result = scan::Scan(options);
  progress.Finish();
  if (!result.ok()) return result;
  for (const scan::OtherFile& f : result->others) {
    if (const std::string note = scan::NotAShardNote(f); !note.empty()) {
      log::Warning(note, "; skipped");
    }
  }
  if (absl::Status s = RequireShards(sources, *result); !s.ok()) return s;
  return result;
}

absl::Status RequireShards(const std::vector<std::string>& sources,
                           const scan::ScanResult& result) {
  if (!result.shards.empty()) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      "no TFRecord shard in ", absl::StrJoin(sources, ", "), " (", result.others.size(),
      " other file(s); shards are found by content, in directories "
      "searched recursively)"));
}

std::string FormatFloat(float v) {
  return std::string(absl::StripSuffix(naming::FormatFloats({&v, 1}), "\n"));
}

void WriteJsonFloat(JsonWriter* w, float v) {
  const std::string s = FormatFloat(v);
  if (absl::StrContains(s, "nan") || absl::StrContains(s, "inf")) {
    w->String(s);
  } else if (s.find_first_of(".e") == std::string::npos) {
    // "1" and "-0" would read back as integers, and -0 as 0: keep them floats.
    w->Number(absl::StrCat(s, ".0"));
  } else {
    w->Number(s);
  }
}

bool StdoutIsTerminal() { return ::isatty(1) == 1; }

bool WriteStdout(absl::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    log::Error("cannot write to stdout: ", std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace tfrecordfs::cli
