#include "src/cli/toolbox.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/cli/progress.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/objstore/listing.h"

namespace tfrecordfs::cli {

namespace {

// NotFound, naming the SOURCEs, when `result` holds no shard: a toolbox
// command over no shard has nothing to say, and "0 record(s)" would read as
// an answer.
absl::Status RequireShards(const std::vector<std::string>& sources,
                           const scan::ScanResult& result) {
  if (!result.shards.empty()) return absl::OkStatus();
  std::vector<std::string> named;  // no URL's query string (a presigned URL's credentials)
  for (const std::string& s : sources) named.push_back(objstore::RedactSource(s));
  return absl::NotFoundError(
      absl::StrCat("no TFRecord shard in ", absl::StrJoin(named, ", "), " (", result.others.size(),
                   " other file(s); shards are found by content, in directories "
                   "searched recursively)"));
}

// What --help adds for the commands that read SOURCEs (ToolSpec::indexes).
constexpr char kObjectFlagsUsage[] = R"(
Object storage (s3://, gs:// and http(s):// SOURCEs; see tfrecordfs(1)):
  --no-sign-request      send every request anonymously, whatever
                         credentials are configured (public buckets; as the
                         aws CLI's flag)
  --gcs-token-file PATH  gs://: send the OAuth access token in PATH (what
                         `gcloud auth print-access-token` prints)
  --request-timeout S    give up on a request (all its retries) after S
                         seconds (default 120)
)";

}  // namespace

index::StoreOptions ToolStoreOptions() {
  index::StoreOptions options;
  options.cache_dir = index::DefaultCacheDir();
  options.durable = false;  // a cache: a torn file is just rebuilt
  return options;
}

std::optional<int> Tool::Parse(int argc, char** argv, const OwnOptions& own) {
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (options_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      operands_.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << spec_.usage << (spec_.indexes ? kObjectFlagsUsage : "");
      return kExitOk;
    } else if (spec_.indexes && arg == "--no-sign-request") {
      objects_.no_sign_request = true;
    } else if (spec_.indexes && absl::StartsWith(arg, "--gcs-token-file") &&
               (arg.size() == 16 || arg[16] == '=')) {
      std::string flag, value;
      if (!TakeValue(argc, argv, &i, &flag, &value) || value.empty()) {
        return Usage("--gcs-token-file needs a file");
      }
      objects_.gcs_token_file = value;
    } else if (spec_.indexes && absl::StartsWith(arg, "--request-timeout") &&
               (arg.size() == 17 || arg[17] == '=')) {
      std::string flag, value;
      long seconds = 0;
      if (!TakeValue(argc, argv, &i, &flag, &value) || !absl::SimpleAtoi(value, &seconds) ||
          seconds < 1 || seconds > 86400) {
        return Usage("--request-timeout needs a number of seconds from 1 to 86400");
      }
      objects_.request_timeout_s = seconds;
    } else if (spec_.json && arg == "--json") {
      json_ = true;
    } else if (spec_.quiet && (arg == "-q" || arg == "--quiet")) {
      quiet_ = true;
    } else if (spec_.indexes && absl::StartsWith(arg, "--max-shard-records")) {
      std::string flag, value;
      uint64_t n = 0;
      if (!TakeValue(argc, argv, &i, &flag, &value)) return Usage(arg + " needs a number");
      if (flag != "--max-shard-records") return Usage("unknown option " + arg);
      if (!absl::SimpleAtoi(value, &n) || n == 0) {
        return Usage("--max-shard-records needs a positive number, not '" + value + "'");
      }
      max_records_ = n;
    } else if (auto taken = own ? own(&i) : std::nullopt; taken.has_value()) {
      if (*taken != kExitOk) return taken;
    } else {
      return Usage("unknown option " + arg);
    }
  }
  return std::nullopt;
}

std::optional<int> Tool::NeedSources() const {
  if (operands_.empty()) return Usage("need at least one SOURCE");
  return std::nullopt;
}

std::optional<int> Tool::Scan(const index::StoreOptions& store_options, scan::ScanOptions extra,
                              absl::string_view skipped) {
  index::StoreOptions with_limit = store_options;
  if (max_records_) with_limit.max_records = *max_records_;
  const bool draw = !quiet_ && StderrIsTerminal();
  ProgressBar progress(draw ? TotalBytes(operands_) : 0, draw);
  // The bar advances while a shard is walked (the walk reports its bytes
  // every few MiB), not only when it is done: a big shard's walk would
  // otherwise hold the rate at 0 and then jump. The store outlives this
  // scan, the bar does not: the meter lets go of it at the end.
  auto meter = std::make_shared<WalkMeter>(&progress);
  with_limit.on_walk_progress = [meter](const std::string& path, uint64_t walked) {
    meter->Walked(path, walked);
  };
  store_.emplace(std::move(with_limit));
  scan::ScanOptions options = std::move(extra);
  options.sources = operands_;
  options.store = &*store_;
  if (!options.objects) options.objects = objects_;
  options.on_shard = [meter, also = std::move(options.on_shard)](const scan::ScannedShard& s) {
    meter->Done(s.index->path(), s.index->num_records(), static_cast<uint64_t>(s.st.st_size));
    if (also) also(s);
  };
  auto result = scan::Scan(options);
  meter->Detach();
  progress.Finish();
  if (!result.ok()) return Fail(result.status());
  for (const scan::OtherFile& f : result->others) {
    if (const std::string note = scan::NotAShardNote(f); !note.empty()) {
      log::Warning(note, "; ", skipped);
    }
  }
  for (const scan::RefusedShard& r : result->refused) {
    log::Error(r.why.message(), "; ", skipped);
    skipped_shards_ = true;
  }
  for (const scan::RefusedShard& u : result->unreadable) {
    log::Error(u.why.message(), "; ", skipped);
    skipped_shards_ = true;
  }
  if (result->shards.empty() && skipped_shards_) return kExitFailed;
  if (absl::Status s = RequireShards(operands_, *result); !s.ok()) return Fail(s);
  scanned_ = std::move(*result);
  return std::nullopt;
}

std::optional<int> Tool::Start(int argc, char** argv, const OwnOptions& own) {
  if (auto stop = Parse(argc, argv, own)) return stop;
  if (auto stop = NeedSources()) return stop;
  return Scan();
}

uint64_t Tool::DataBytes() const {
  uint64_t total = 0;
  for (const scan::ScannedShard& s : scanned_.shards) total += s.index->data_size();
  return total;
}

index::IndexStore* Tool::store() {
  if (!store_) {
    index::StoreOptions options = ToolStoreOptions();
    if (max_records_) options.max_records = *max_records_;
    store_.emplace(std::move(options));
  }
  return &*store_;
}

ProgressBar Tool::Progress(uint64_t total_bytes) const {
  return ProgressBar(total_bytes, !quiet_ && StderrIsTerminal());
}

int Tool::Fail(const absl::Status& status) {
  log::Error(status.message());
  return kExitFailed;
}

int Tool::Finish(absl::string_view out, bool ok) const {
  if (!WriteStdout(out)) return kExitFailed;
  return ok && !skipped_shards_ ? kExitOk : kExitFailed;
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

absl::StatusOr<source::Codec> CompressionFlag(absl::string_view value) {
  if (auto codec = source::ParseCodecName(value)) return *codec;
  return absl::InvalidArgumentError(
      absl::StrCat("--compression needs none, gzip or zlib, not '", value, "'"));
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

void WriteJsonUnreadable(JsonWriter* w, absl::string_view path, const absl::Status& status) {
  w->BeginObject().Key("path").String(path).Key("reason").String(status.message()).EndObject();
}

void WriteJsonPlace(JsonWriter* w, absl::string_view path, std::optional<uint64_t> record,
                    uint64_t offset) {
  w->Key("path").String(path).Key("record");
  if (record.has_value()) {
    w->Uint(*record);
  } else {
    w->Null();
  }
  w->Key("offset").Uint(offset);
}

std::string DamagePlace(std::optional<uint64_t> record, uint64_t offset, bool compressed) {
  return absl::StrCat(record ? absl::StrCat("record ", *record) : std::string("outside any record"),
                      " at ", compressed ? "uncompressed " : "", "byte offset ", offset);
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
