// Parts in a bucket prefix (bucket_parts.h).
#include "tfrecordfs/reshape/bucket_parts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/reshape/shuffle.h"

namespace tfrecordfs::reshape {
namespace {

constexpr char kManifestName[] = "manifest.json";
constexpr char kLockName[] = ".lock";
constexpr char kJournalSuffix[] = ".finalizing";
// Manifests, tables and totals are small; a run's table of 2^20 buckets
// is 8 MiB, a totals file 16 MiB.
constexpr size_t kMaxSmall = size_t{64} << 20;

// The files below `dir`, as paths relative to it, sorted.
absl::StatusOr<std::vector<std::string>> FilesBelow(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) {
      out.push_back(std::filesystem::relative(it->path(), dir, ec).string());
    }
  }
  if (ec) return ErrnoError(ec.value(), dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool IsBucketOutput(absl::string_view output) {
  return absl::StartsWith(output, "s3://") || absl::StartsWith(output, "gs://");
}

absl::StatusOr<ScratchDir> ScratchDir::Make(const std::string& what) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = JoinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                              absl::StrCat("tfrecordfs-", what, "-XXXXXX"));
  if (::mkdtemp(path.data()) == nullptr) return ErrnoError(errno, path);
  return ScratchDir(std::move(path));
}

ScratchDir::~ScratchDir() {
  if (!path_.empty()) (void)RemoveTree(path_);
}

absl::StatusOr<std::unique_ptr<BucketParts>> BucketParts::Open(const std::string& url) {
  auto target =
      objstore::ResolveUploadTarget(url, objstore::DefaultObjectOptions(), objstore::ProcessEnv);
  if (!target.ok()) return target.status();
  return std::make_unique<BucketParts>(*std::move(target));
}

BucketParts::BucketParts(objstore::UploadTarget target)
    : target_(std::move(target)), writer_(target_) {}

std::string BucketParts::Name() const {
  return absl::StrCat(target_.name, "/", target_.key_prefix);
}

std::string BucketParts::ObjectName(const std::string& relative) const {
  return writer_.Name(objstore::ObjectKey(target_, relative));
}

std::string BucketParts::PartsKey() const {
  return objstore::ObjectKey(target_, absl::StrCat(kPartsDirName, "/"));
}

absl::Status BucketParts::PutFile(const std::string& path, const std::string& key,
                                  bool same_ok) const {
  auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  absl::Status status;
  if (size <= target_.multipart_threshold) {
    std::string bytes(size, '\0');
    if (auto s = PreadFull(fd->get(), bytes.data(), size, 0, path); !s.ok()) return s;
    status = writer_.PutWhole(key, bytes);
  } else {
    auto id = writer_.CreateMultipart(key);
    if (!id.ok()) return id.status();
    std::vector<std::string> etags;
    std::string part;
    const uint64_t part_size = objstore::MultipartPartSize(size, target_.part_size);
    for (uint64_t at = 0; at < size && status.ok(); at += part_size) {
      part.resize(std::min<uint64_t>(part_size, size - at));
      status = PreadFull(fd->get(), part.data(), part.size(), at, path);
      if (!status.ok()) break;
      auto etag = writer_.UploadPart(key, *id, static_cast<int>(etags.size() + 1), part);
      if (!etag.ok()) {
        status = etag.status();
        break;
      }
      etags.push_back(*etag);
    }
    if (status.ok()) status = writer_.Complete(key, *id, etags);
    if (!status.ok()) (void)writer_.Abort(key, *id);
  }
  if (status.ok() || ErrnoOf(status) != EEXIST || !same_ok) return status;
  // Another run of the same part put this key meanwhile: the same bytes
  // are the same output.
  auto same = writer_.SameBytes(key, path, size);
  if (!same.ok()) return same.status();
  if (*same) return absl::OkStatus();
  return absl::AlreadyExistsError(
      absl::StrCat(writer_.Name(key),
                   ": another run of the same part put other bytes here at the same time (were "
                   "its inputs or options different?); not overwritten"));
}

absl::Status BucketParts::UploadNew(const std::string& path, const std::string& relative) const {
  const std::string key = objstore::ObjectKey(target_, relative);
  auto there = writer_.Head(key);
  if (!there.ok()) return there.status();
  if (*there >= 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(writer_.Name(key), ": already exists (never replaced)"));
  }
  return PutFile(path, key, /*same_ok=*/false);
}

absl::StatusOr<std::optional<std::string>> BucketParts::ReadObject(
    const std::string& relative) const {
  auto text = writer_.GetSmall(objstore::ObjectKey(target_, relative), kMaxSmall);
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  return *std::move(text);
}

absl::Status BucketParts::PutObject(const std::string& relative, const std::string& bytes) const {
  const std::string key = objstore::ObjectKey(target_, relative);
  auto listed = writer_.ListKeys(key);
  if (!listed.ok()) return listed.status();
  std::string etag;
  for (const objstore::ListedObject& o : *listed) {
    if (o.key == key) etag = o.etag;
  }
  return writer_.PutWhole(key, bytes, etag);
}

absl::Status BucketParts::UploadPart(const std::string& local_dir) const {
  const std::string prefix = absl::StrCat(PartsKey(), Basename(local_dir), "/");
  auto files = FilesBelow(local_dir);
  if (!files.ok()) return files.status();
  // Unpublish an earlier run's (its manifest first), then its objects.
  if (auto s = writer_.Delete(prefix + kManifestName); !s.ok()) return s;
  auto earlier = writer_.ListKeys(prefix);
  if (!earlier.ok()) return earlier.status();
  for (const objstore::ListedObject& o : *earlier) {
    if (auto s = writer_.Delete(o.key); !s.ok()) return s;
  }
  bool manifest = false;
  for (const std::string& f : *files) {
    if (f == kLockName) continue;
    if (f == kManifestName) {
      manifest = true;
      continue;
    }
    if (auto s = PutFile(JoinPath(local_dir, f), prefix + f, /*same_ok=*/true); !s.ok()) return s;
  }
  if (!manifest) {
    return absl::FailedPreconditionError(absl::StrCat(local_dir, ": no ", kManifestName));
  }
  return PutFile(JoinPath(local_dir, kManifestName), prefix + kManifestName, /*same_ok=*/true);
}

absl::Status BucketParts::FetchMapParts(
    const std::string& plan, uint32_t parts, const std::string& local_dir,
    const std::function<absl::StatusOr<std::pair<uint32_t, uint32_t>>(
        const std::vector<std::string>& totals)>& buckets) const {
  std::vector<std::string> missing, totals;
  std::vector<PartManifest> manifests(parts);
  std::vector<std::string> dirs(parts);
  for (uint32_t k = 0; k < parts; ++k) {
    const std::string name = absl::StrCat(plan, "-map-", k);
    const std::string prefix = absl::StrCat(PartsKey(), name, "/");
    auto text = writer_.GetSmall(prefix + kManifestName, kMaxSmall);
    if (absl::IsNotFound(text.status())) {
      missing.push_back(absl::StrCat(k));
      continue;
    }
    if (!text.ok()) return text.status();
    auto m = ParseManifest(*text, writer_.Name(prefix + kManifestName));
    if (!m.ok()) return m.status();
    manifests[k] = *std::move(m);
    dirs[k] = PublishedPartDir(local_dir, plan, k, "map");
    if (auto s = MakeDirs(dirs[k], 0755); !s.ok()) return s;
    // Everything but the runs, whole.
    for (const ManifestOutput& out : manifests[k].outputs) {
      if (absl::StartsWith(out.path, "run-") && !absl::EndsWith(out.path, ".idx")) continue;
      auto bytes = writer_.GetSmall(prefix + out.path, kMaxSmall);
      if (!bytes.ok()) return bytes.status();
      if (auto s = WriteFileAtomically(JoinPath(dirs[k], out.path), *bytes); !s.ok()) return s;
      if (out.path == ShuffleBucketsFileName()) totals.push_back(*std::move(bytes));
    }
    if (auto s = WriteFileAtomically(JoinPath(dirs[k], kManifestName), *text); !s.ok()) return s;
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the first pass (--pass map) of part(s) ", absl::StrJoin(missing, ", "), " of ", parts,
        " (plan ", plan, ") is not in ", Name(), "; run it, then this part again"));
  }
  auto range = buckets(totals);
  if (!range.ok()) return range.status();
  const auto [lo, hi] = *range;
  // Each run: a sparse file of its size holding buckets [lo, hi).
  for (uint32_t k = 0; k < parts; ++k) {
    const std::string prefix = absl::StrCat(PartsKey(), plan, "-map-", k, "/");
    for (const ManifestOutput& out : manifests[k].outputs) {
      if (!absl::StartsWith(out.path, "run-") || absl::EndsWith(out.path, ".idx")) continue;
      const std::string local = JoinPath(dirs[k], out.path);
      auto table = ReadFileToString(local + ".idx");
      if (!table.ok()) return table.status();
      const size_t entries = table->size() / 8;
      const auto at = [&](size_t i) {
        uint64_t v = 0;
        for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>((*table)[8 * i + b]);
        return v;
      };
      if (entries < 1 || hi >= entries) {
        return absl::FailedPreconditionError(
            absl::StrCat(local, ".idx: not a table of the map's buckets"));
      }
      const uint64_t size = at(entries - 1);
      const uint64_t begin = hi > lo ? at(lo) : 0, end = hi > lo ? at(hi) : 0;
      auto fd = OpenFile(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (!fd.ok()) return fd.status();
      if (::ftruncate(fd->get(), static_cast<off_t>(size)) != 0) return ErrnoError(errno, local);
      const uint64_t chunk = std::max<uint64_t>(target_.part_size, 1 << 20);
      for (uint64_t from = begin; from < end; from += chunk) {
        const uint64_t to = std::min(end, from + chunk);
        auto bytes = writer_.GetRange(prefix + out.path, from, to - 1);
        if (!bytes.ok()) return bytes.status();
        if (::lseek(fd->get(), static_cast<off_t>(from), SEEK_SET) < 0) {
          return ErrnoError(errno, local);
        }
        if (auto s = WriteFull(fd->get(), bytes->data(), bytes->size(), local); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FinalizeReport> BucketParts::Finalize(
    const std::string& command, const std::function<std::string(uint32_t parts)>& plan_for,
    const std::vector<ManifestInput>& current) const {
  const std::string parts_key = PartsKey();
  auto listed = writer_.ListKeys(parts_key);
  if (!listed.ok()) return listed.status();
  if (listed->empty()) {
    return absl::FailedPreconditionError(absl::StrCat(Name(), ": no part has run (no object under ",
                                                      kPartsDirName, "/); nothing finalized"));
  }
  // The listing by its first path component below .tfrecordfs-parts/.
  std::map<std::string, std::map<std::string, const objstore::ListedObject*>> groups;
  std::set<std::string> journals;  // plans with a finalize under way
  for (const objstore::ListedObject& o : *listed) {
    const std::string rest = o.key.substr(parts_key.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos) {
      if (absl::EndsWith(rest, kJournalSuffix)) {
        journals.insert(rest.substr(0, rest.size() - strlen(kJournalSuffix)));
      } else {
        groups[rest];  // a stray object: foreign
      }
      continue;
    }
    groups[rest.substr(0, slash)][rest.substr(slash + 1)] = &o;
  }
  if (journals.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(Name(), kPartsDirName, ": the journals of two finalizes (",
                     absl::StrJoin(journals, ", "), "); remove the one not wanted"));
  }
  if (!journals.empty()) return FinishFinalize(*journals.begin(), *listed);
  std::vector<FoundPart> found;
  for (const auto& [name, objects] : groups) {
    FoundPart f;
    f.name = name;
    if (absl::StrContains(name, "-part-")) {
      if (!objects.contains(kManifestName)) {
        f.problem = "no manifest.json: its upload did not finish (run the part again)";
      } else {
        const std::string key = absl::StrCat(parts_key, name, "/", kManifestName);
        auto text = writer_.GetSmall(key, kMaxSmall);
        if (!text.ok()) return text.status();
        auto m = ParseManifest(*text, writer_.Name(key));
        if (m.ok()) {
          f.manifest = *std::move(m);
        } else {
          f.problem = std::string(m.status().message());
        }
      }
    }
    found.push_back(std::move(f));
  }
  auto checked = CheckParts(Name(), Name() + kPartsDirName, found, command, plan_for, current);
  if (!checked.ok()) return checked.status();

  // Every output: in its part's folder, not yet under its final name.
  // Checked before anything is copied; then the journal names them all.
  std::set<std::string> names_seen;
  std::string journal;
  for (uint32_t k = 0; k < checked->parts; ++k) {
    const std::string group = absl::StrCat(checked->plan, "-part-", k);
    const auto& objects = groups[group];
    for (const ManifestOutput& out : checked->manifests[k].outputs) {
      if (!names_seen.insert(out.path).second) {
        return absl::FailedPreconditionError(
            absl::StrCat(Name(), ": two parts name the output ", out.path, "; nothing copied"));
      }
      const std::string from = absl::StrCat(parts_key, group, "/", out.path);
      const std::string to = objstore::ObjectKey(target_, out.path);
      auto it = objects.find(out.path);
      if (it == objects.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat(writer_.Name(from), ": the part's output is missing; nothing copied"));
      }
      if (it->second->size != out.file_bytes) {
        return absl::FailedPreconditionError(
            absl::StrCat(writer_.Name(from), ": ", it->second->size, " bytes, not the ",
                         out.file_bytes, " its manifest says; nothing copied"));
      }
      auto there = writer_.Head(to);
      if (!there.ok()) return there.status();
      if (*there >= 0) {
        return absl::AlreadyExistsError(
            absl::StrCat(writer_.Name(to), ": already exists (never replaced); nothing copied"));
      }
      absl::StrAppend(&journal, out.records, "\t", out.bytes, "\t", out.file_bytes, "\t",
                      it->second->etag, "\t", out.path, "\t", from, "\n");
    }
  }
  if (auto s = writer_.PutWhole(absl::StrCat(parts_key, checked->plan, kJournalSuffix), journal);
      !s.ok()) {
    return s;
  }
  return FinishFinalize(checked->plan, *listed);
}

absl::StatusOr<FinalizeReport> BucketParts::FinishFinalize(
    const std::string& plan, const std::vector<objstore::ListedObject>& listed) const {
  const std::string journal_key = absl::StrCat(PartsKey(), plan, kJournalSuffix);
  auto journal = writer_.GetSmall(journal_key, kMaxSmall);
  if (!journal.ok()) return journal.status();
  FinalizeReport report;
  report.plan = plan;
  std::set<uint32_t> parts;
  for (absl::string_view line : absl::StrSplit(*journal, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    ManifestOutput out;
    if (f.size() != 6 || !absl::SimpleAtoi(f[0], &out.records) ||
        !absl::SimpleAtoi(f[1], &out.bytes) || !absl::SimpleAtoi(f[2], &out.file_bytes)) {
      return absl::DataLossError(
          absl::StrCat(writer_.Name(journal_key), ": not a finalize journal; line '", line, "'"));
    }
    out.path = f[4];
    const std::string& etag = f[3];
    const std::string& from = f[5];
    const std::string to = objstore::ObjectKey(target_, out.path);
    // Copied already by a finalize interrupted after the copy: skipped.
    auto there = writer_.Head(to);
    if (!there.ok()) return there.status();
    if (*there < 0) {
      if (auto s = writer_.CopyWhole(from, out.file_bytes, etag, to); !s.ok()) return s;
    }
    if (const size_t at = from.rfind("-part-"); at != std::string::npos) {
      uint32_t k = 0;
      if (absl::SimpleAtoi(from.substr(at + 6, from.find('/', at) - at - 6), &k)) parts.insert(k);
    }
    report.outputs.push_back(std::move(out));
  }
  report.parts = static_cast<uint32_t>(parts.size());
  // The intermediates, then the journal.
  for (const objstore::ListedObject& o : listed) {
    if (o.key == journal_key) continue;
    if (auto s = writer_.Delete(o.key); !s.ok()) return s;
  }
  if (auto s = writer_.Delete(journal_key); !s.ok()) return s;
  return report;
}

}  // namespace tfrecordfs::reshape
