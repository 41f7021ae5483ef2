#include "src/cli/toolbox.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "src/cli/progress.h"
#include "tfrecordfs/base/fs_util.h"
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

// What --help adds for the commands that run as parts (ToolSpec::parts).
constexpr char kPartFlagsUsage[] = R"(
Parts (one command run as N processes by a job runner; see tfrecordfs(1)):
  --part K/N             run part K (0 <= K < N) of N: the work is planned
                         from the sorted SOURCE files and their sizes alone,
                         balanced by bytes, the same on every machine
  --parts N              the number of parts when the part's number comes
                         from JOB_COMPLETION_INDEX (a Kubernetes Indexed
                         Job gives no count). Without --part, K and N come
                         from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT
                         (less SLURM_ARRAY_TASK_MIN), AWS_BATCH_JOB_ARRAY_INDEX/
                         AWS_BATCH_JOB_ARRAY_SIZE (or --parts), or
                         JOB_COMPLETION_INDEX with --parts, when set
)";
constexpr char kFinalizeUsage[] =
    R"(  --finalize             after every part ran: check that each part of the
                         plan left its manifest and that no input changed,
                         give the outputs their final names, remove the
                         parts' files; else name the missing, stale or
                         foreign parts and exit 1
)";

// The job runners' variables: the part's number, and the count when the
// runner gives one.
struct PartVariables {
  const char* index;
  const char* count;  // null: --parts N
  const char* min;    // subtracted from the index when set (Slurm's --array=1-4)
};
constexpr PartVariables kPartVariables[] = {
    {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN"},
    {"AWS_BATCH_JOB_ARRAY_INDEX", "AWS_BATCH_JOB_ARRAY_SIZE", nullptr},
    {"JOB_COMPLETION_INDEX", nullptr, nullptr},
};

const char* Env(const char* name) {
  const char* v = name == nullptr ? nullptr : std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

std::string FlagRows(size_t column, std::initializer_list<FlagRow> rows) {
  std::string out;
  for (const FlagRow& row : rows) {
    absl::StrAppend(&out, "  ", row.flag);
    if (2 + row.flag.size() + 2 <= column) {
      out.append(column - 2 - row.flag.size(), ' ');
    } else {
      absl::StrAppend(&out, "\n", std::string(column, ' '));
    }
    absl::StrAppend(&out, absl::StrReplaceAll(row.text, {{"\n", "\n" + std::string(column, ' ')}}),
                    "\n");
  }
  return out;
}

index::StoreOptions ToolStoreOptions() {
  index::StoreOptions options;
  options.cache_dir = index::DefaultCacheDir();
  options.durable = false;  // a cache: a torn file is just rebuilt
  return options;
}

std::optional<int> Tool::Parse(int argc, char** argv, const OwnOptions& own) {
  // A command's own options say their errors themselves (Usage): their
  // exit code stops the parse as it is.
  std::optional<int> own_stop;
  const absl::Status parsed = ParseFlags(argc, argv, [&](int* i) -> absl::StatusOr<bool> {
    const std::optional<int> taken = own ? own(i) : std::nullopt;
    if (!taken.has_value()) return false;
    if (*taken == kExitOk) return true;
    own_stop = taken;
    return absl::CancelledError("said");
  });
  if (own_stop) return own_stop;
  return Stop(parsed);
}

std::optional<int> Tool::Stop(const absl::Status& parsed) const {
  if (!parsed.ok()) return Usage(parsed.message());
  if (help_) return PrintHelp();
  return std::nullopt;
}

int Tool::PrintHelp() const {
  std::string shared;
  if (spec_.quiet && spec_.quiet_row) shared += FlagRows(spec_.usage_column, {kQuietRow});
  if (spec_.indexes) shared += FlagRows(spec_.usage_column, {kMaxShardRecordsRow});
  shared += FlagRows(spec_.usage_column, {kHelpRow});
  std::cout << spec_.usage << shared << spec_.usage_end << (spec_.indexes ? kObjectFlagsUsage : "")
            << (spec_.parts ? kPartFlagsUsage : "") << (spec_.finalize ? kFinalizeUsage : "");
  return kExitOk;
}

absl::Status Tool::ParseFlags(int argc, char** argv, const OwnFlags& own) {
  auto usage = [](absl::string_view message) { return absl::InvalidArgumentError(message); };
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (options_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      operands_.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "-h" || arg == "--help") {
      help_ = true;  // what follows is not read
      return absl::OkStatus();
    } else if (spec_.finalize && arg == "--finalize") {
      finalize_ = true;
    } else if (spec_.parts && (arg == "--part" || absl::StartsWith(arg, "--part="))) {
      std::string flag, value;
      if (!TakeValue(argc, argv, &i, &flag, &value)) return usage("--part needs K/N");
      part_flag_ = value;
      if (auto p = reshape::ParsePartSpec(value); !p.ok()) return usage(p.status().message());
    } else if (spec_.parts && (arg == "--parts" || absl::StartsWith(arg, "--parts="))) {
      std::string flag, value;
      uint32_t n = 0;
      if (!TakeValue(argc, argv, &i, &flag, &value) || !absl::SimpleAtoi(value, &n) || n == 0 ||
          n > reshape::kMaxParts) {
        return usage(absl::StrCat("--parts needs a number from 1 to ", reshape::kMaxParts));
      }
      parts_flag_ = n;
    } else if (spec_.indexes && arg == "--no-sign-request") {
      objects_.no_sign_request = true;
    } else if (spec_.indexes && absl::StartsWith(arg, "--gcs-token-file") &&
               (arg.size() == 16 || arg[16] == '=')) {
      std::string flag, value;
      if (!TakeValue(argc, argv, &i, &flag, &value) || value.empty()) {
        return usage("--gcs-token-file needs a file");
      }
      objects_.gcs_token_file = value;
    } else if (spec_.indexes && absl::StartsWith(arg, "--request-timeout") &&
               (arg.size() == 17 || arg[17] == '=')) {
      std::string flag, value;
      long seconds = 0;
      if (!TakeValue(argc, argv, &i, &flag, &value) || !absl::SimpleAtoi(value, &seconds) ||
          seconds < 1 || seconds > 86400) {
        return usage("--request-timeout needs a number of seconds from 1 to 86400");
      }
      objects_.request_timeout_s = seconds;
    } else if (spec_.json && arg == "--json") {
      json_ = true;
    } else if (spec_.quiet && (arg == "-q" || arg == "--quiet")) {
      quiet_ = true;
    } else if (spec_.indexes && absl::StartsWith(arg, "--max-shard-records")) {
      std::string flag, value;
      uint64_t n = 0;
      if (!TakeValue(argc, argv, &i, &flag, &value)) return usage(arg + " needs a number");
      if (flag != "--max-shard-records") return usage("unknown option " + arg);
      if (!absl::SimpleAtoi(value, &n) || n == 0) {
        return usage("--max-shard-records needs a positive number, not '" + value + "'");
      }
      max_records_ = n;
    } else if (absl::StatusOr<bool> taken = own ? own(&i) : false; !taken.ok()) {
      return taken.status();
    } else if (!*taken) {
      return usage("unknown option " + arg);
    }
  }
  if (spec_.parts) return ResolvePart();
  return absl::OkStatus();
}

absl::Status Tool::ResolvePart() {
  auto usage = [](absl::string_view message) { return absl::InvalidArgumentError(message); };
  if (finalize_) {
    if (!part_flag_.empty()) return usage("--finalize runs once, after the parts: no --part");
    return absl::OkStatus();
  }
  std::string origin;
  if (!part_flag_.empty()) {
    part_ = *reshape::ParsePartSpec(part_flag_);
    origin = absl::StrCat("--part ", part_flag_);
  } else {
    for (const PartVariables& v : kPartVariables) {
      const char* index = Env(v.index);
      if (index == nullptr) continue;
      uint64_t k = 0, min = 0;
      if (!absl::SimpleAtoi(index, &k)) {
        return usage(absl::StrCat(v.index, "=", index, " is not a part number"));
      }
      origin = absl::StrCat(v.index, "=", index);
      if (const char* m = Env(v.min); m != nullptr && absl::SimpleAtoi(m, &min) && min <= k) {
        k -= min;
        absl::StrAppend(&origin, " less ", v.min, "=", m);
      }
      std::string count;
      if (parts_flag_) {
        count = absl::StrCat(*parts_flag_);
        absl::StrAppend(&origin, ", --parts ", count);
      } else if (const char* c = Env(v.count); c != nullptr) {
        count = c;
        absl::StrAppend(&origin, ", ", v.count, "=", c);
      } else {
        return usage(absl::StrCat(v.index, "=", index, " is set but not the number of parts",
                                  v.count == nullptr ? "" : absl::StrCat(" (", v.count, ")"),
                                  ": give --parts N (or --part K/N)"));
      }
      auto p = reshape::ParsePartSpec(absl::StrCat(k, "/", count));
      if (!p.ok()) return usage(absl::StrCat(origin, ": ", p.status().message()));
      part_ = *p;
      break;
    }
    if (!part_ && parts_flag_) {
      return usage(
          "--parts N needs JOB_COMPLETION_INDEX (or SLURM_ARRAY_TASK_ID, "
          "AWS_BATCH_JOB_ARRAY_INDEX) in the environment, or --part K/N");
    }
  }
  if (part_) log::Info("part ", part_->index, "/", part_->count, " (from ", origin, ")");
  return absl::OkStatus();
}

std::vector<reshape::Piece> Tool::PiecesOf(const std::string& path) const {
  if (!part_) return {reshape::Piece{}};
  return reshape::PiecesOf(plan_, part_->index, plan_files_, path);
}

reshape::PartPlan Tool::PlanFor(uint32_t parts) const {
  std::vector<reshape::PlanFile> files;
  for (const PlanInputFile& f : plan_files_) files.push_back({f.path, f.size, split_});
  return reshape::PlanParts(files, parts, absl::StrCat(spec_.name, " ", salt_));
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
  // With ToolSpec::parts the listing is always kept (plan_files()): a
  // whole run names its inputs as a part does.
  const bool planned = spec_.parts;
  if (planned) {
    options.select = [this](const std::vector<const scan::SourceEntry*>& files) {
      for (const scan::SourceEntry* e : files) {
        plan_files_.push_back({e->path, static_cast<uint64_t>(e->st.st_size), MtimeNs(e->st),
                               e->object != nullptr ? CtimeNs(e->st) : 0, e->object != nullptr});
      }
      std::vector<bool> keep(files.size(),
                             !finalize_ && (!part_ || scope_ == PartScope::kAllFiles));
      if (finalize_ || !part_) return keep;
      plan_ = PlanFor(part_->count);
      uint64_t bytes = 0, total = 0;
      for (const PlanInputFile& f : plan_files_) total += f.size;
      for (const reshape::Piece& p : plan_.pieces[part_->index]) {
        if (scope_ == PartScope::kOwnFiles) keep[p.file] = true;
        bytes += p.end - p.begin;
      }
      if (scope_ == PartScope::kAllFiles) {
        log::Info("part ", part_->index, "/", part_->count, ": plan ", plan_.IdHex(),
                  ": its share of the outputs, from all ", files.size(), " file(s)");
      } else {
        log::Info("part ", part_->index, "/", part_->count, ": plan ", plan_.IdHex(), ", ",
                  plan_.pieces[part_->index].size(), " of ", files.size(), " file(s), ", bytes,
                  " of ", total, " bytes");
      }
      return keep;
    };
  }
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
  // A part may own no shard (more parts than files): it has nothing to do,
  // which is not an error; --finalize indexes none.
  const bool may_be_empty = finalize_ || (part_ && scope_ != PartScope::kAllFiles);
  if (absl::Status s = RequireShards(operands_, *result); !s.ok() && !may_be_empty) {
    return Fail(s);
  }
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
