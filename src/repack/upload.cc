#include "src/repack/upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/fault_points.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/repack/journal.h"

namespace tfrecordfs::repack {

constexpr absl::string_view kUploadJournalName = "upload.journal";
constexpr absl::string_view kUploadMagic = "tfrecordfs-upload-journal 1";

std::string EncodeUploadJournal(const UploadJournal& j) {
  std::string out = absl::StrCat(kUploadMagic, "\ntarget ", absl::CEscape(j.target), "\n");
  for (const PendingObject& o : j.objects) {
    absl::StrAppend(&out, "object ", o.size, " ",
                    o.upload_id.empty() ? "-" : absl::CEscape(o.upload_id), "\nkey ",
                    absl::CEscape(o.key), "\nlocal ", absl::CEscape(o.local), "\n");
  }
  absl::StrAppend(&out, "crc32c ", absl::Hex(crc32c::Value(out), absl::kZeroPad8), "\n");
  return out;
}

absl::StatusOr<UploadJournal> ParseUploadJournal(absl::string_view text, const std::string& path) {
  const auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(path, ": damaged upload journal: ", why));
  };
  const size_t crc_at = text.rfind("crc32c ");
  if (crc_at == absl::string_view::npos || !absl::EndsWith(text, "\n")) return bad("no checksum");
  uint32_t want = 0;
  const absl::string_view hex = text.substr(crc_at + 7, text.size() - crc_at - 8);
  if (hex.size() != 8 || !absl::SimpleHexAtoi(hex, &want) ||
      crc32c::Value(text.substr(0, crc_at)) != want) {
    return bad("checksum mismatch");
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text.substr(0, crc_at), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty() || lines[0] != kUploadMagic) return bad("not an upload journal (version 1)");
  UploadJournal j;
  const auto unescape = [](absl::string_view v, std::string* out) {
    return absl::CUnescape(v, out);
  };
  if (lines.size() < 2 || !absl::ConsumePrefix(&lines[1], "target ") ||
      !unescape(lines[1], &j.target)) {
    return bad("no target");
  }
  if ((lines.size() - 2) % 3 != 0) return bad("a truncated object entry");
  for (size_t i = 2; i < lines.size(); i += 3) {
    PendingObject o;
    absl::string_view obj = lines[i], key = lines[i + 1], local = lines[i + 2];
    if (!absl::ConsumePrefix(&obj, "object ") || !absl::ConsumePrefix(&key, "key ") ||
        !absl::ConsumePrefix(&local, "local ")) {
      return bad(absl::StrCat("line ", i + 1));
    }
    std::pair<absl::string_view, absl::string_view> f =
        absl::StrSplit(obj, absl::MaxSplits(' ', 1));
    if (!absl::SimpleAtoi(f.first, &o.size)) return bad(absl::StrCat("line ", i + 1));
    if (f.second != "-" && !unescape(f.second, &o.upload_id)) return bad("bad upload id");
    if (!unescape(key, &o.key) || o.key.empty() || !unescape(local, &o.local) ||
        !IsJournalName(o.local)) {
      return bad(absl::StrCat("line ", i + 2));
    }
    j.objects.push_back(std::move(o));
  }
  return j;
}

namespace {

class Uploader {
 public:
  explicit Uploader(const UploadOptions& o)
      : o_(o), bucket_(o.target), journal_path_(JoinPath(o.outgoing_dir, kUploadJournalName)) {}

  absl::Status Finish(std::vector<std::string>* lines);
  // Uploads the files `names` of the outgoing folder (sizes known).
  absl::Status UploadNew(const std::vector<std::pair<std::string, uint64_t>>& names);

 private:
  absl::Status SaveJournal() { return WriteFileAtomically(journal_path_, EncodeUploadJournal(j_)); }
  // Uploads object i of the journal; the object is absent when called.
  absl::Status UploadOne(size_t i);
  // Object i is complete and verified: its local file goes, and the entry.
  absl::Status Done(size_t i);
  absl::Status UploadAll(std::vector<std::string>* lines, bool recovering);

  const UploadOptions& o_;
  objstore::BucketWriter bucket_;
  const std::string journal_path_;
  UploadJournal j_;
  FaultPoints faults_;
  uint64_t completed_ = 0;
};

absl::Status Uploader::UploadOne(size_t i) {
  PendingObject& o = j_.objects[i];
  const std::string path = JoinPath(o_.outgoing_dir, o.local);
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  const objstore::UploadTarget& t = o_.target;
  if (o.size <= t.multipart_threshold) {
    std::string bytes(o.size, '\0');
    if (auto s = PreadFull(fd->get(), bytes.data(), bytes.size(), 0, path); !s.ok()) return s;
    return bucket_.PutWhole(o.key, bytes);
  }
  auto id = bucket_.CreateMultipart(o.key);
  if (!id.ok()) return id.status();
  o.upload_id = *id;
  // The id is durable before any part is sent: a crash from here on
  // leaves an upload the next FinishUploads aborts.
  if (auto s = SaveJournal(); !s.ok()) {
    (void)bucket_.Abort(o.key, *id);
    return s;
  }
  std::vector<std::string> etags;
  std::string part;
  absl::Status status;
  const uint64_t part_size = objstore::MultipartPartSize(o.size, t.part_size);
  for (uint64_t at = 0; at < o.size && status.ok(); at += part_size) {
    part.resize(std::min<uint64_t>(part_size, o.size - at));
    status = PreadFull(fd->get(), part.data(), part.size(), at, path);
    if (!status.ok()) break;
    auto etag = bucket_.UploadPart(o.key, *id, static_cast<int>(etags.size() + 1), part);
    if (!etag.ok()) {
      status = etag.status();
      break;
    }
    etags.push_back(*etag);
    if (etags.size() == 1) faults_.At("mid_upload");
  }
  if (status.ok()) {
    faults_.At("before_complete");
    status = bucket_.Complete(o.key, *id, etags);
  }
  if (!status.ok()) {
    if (auto a = bucket_.Abort(o.key, *id); !a.ok()) {
      log::Warning("upload: aborting the failed multipart upload of ", bucket_.Name(o.key),
                   " failed too (the next unmount retries): ", a.message());
    } else {
      o.upload_id.clear();
      (void)SaveJournal();
    }
  }
  return status;
}

absl::Status Uploader::Done(size_t i) {
  const std::string path = JoinPath(o_.outgoing_dir, j_.objects[i].local);
  if (auto s = UnlinkIfExists(path); !s.ok()) return s.status();
  if (auto s = FsyncDir(o_.outgoing_dir); !s.ok()) return s;
  j_.objects.erase(j_.objects.begin() + static_cast<ptrdiff_t>(i));
  return j_.objects.empty() ? UnlinkDurably(journal_path_) : SaveJournal();
}

// Every object of the journal, in order: settled by a HEAD first (so a
// crash's complete object is never sent twice and nothing is overwritten).
absl::Status Uploader::UploadAll(std::vector<std::string>* lines, bool recovering) {
  while (!j_.objects.empty()) {
    const PendingObject o = j_.objects.front();
    const std::string name = bucket_.Name(o.key);
    const std::string path = JoinPath(o_.outgoing_dir, o.local);
    auto there = bucket_.Head(o.key);
    if (!there.ok()) return there.status();
    if (*there >= 0) {
      auto same = static_cast<uint64_t>(*there) == o.size ? bucket_.SameBytes(o.key, path, o.size)
                                                          : absl::StatusOr<bool>(false);
      if (!same.ok()) return same.status();
      if (!*same) {
        return PosixError(
            EEXIST, absl::StrCat(name, " already exists and is not the shard packed in ", path,
                                 "; not overwritten: the shard stays there"));
      }
      if (!o.upload_id.empty()) (void)bucket_.Abort(o.key, o.upload_id);
      lines->push_back(
          absl::StrCat("upload: ", name,
                       " was complete before the interruption; removed its local copy ", path));
      if (auto s = Done(0); !s.ok()) return s;
      continue;
    }
    if (!o.upload_id.empty()) {
      if (auto s = bucket_.Abort(o.key, o.upload_id); !s.ok()) return s;
      lines->push_back(absl::StrCat("upload: aborted the interrupted multipart upload ",
                                    o.upload_id, " of ", name, "; uploading it again"));
      j_.objects.front().upload_id.clear();
      if (auto s = SaveJournal(); !s.ok()) return s;
    } else if (recovering) {
      lines->push_back(absl::StrCat("upload: ", name, " was not uploaded; uploading it now"));
    }
    if (auto s = UploadOne(0); !s.ok()) {
      return Annotate(s, absl::StrCat("uploading ", path, " to ", name));
    }
    // Verified by a HEAD (the store's own size), then the local copy goes.
    auto size = bucket_.Head(o.key);
    if (!size.ok()) return size.status();
    if (*size != static_cast<int64_t>(o.size)) {
      return absl::DataLossError(absl::StrCat(name, ": uploaded ", o.size,
                                              " bytes but the store has ", *size,
                                              "; the shard stays in ", path));
    }
    faults_.At("after_upload", ++completed_);
    if (recovering) lines->push_back(absl::StrCat("upload: finished ", name));
    if (auto s = Done(0); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Uploader::Finish(std::vector<std::string>* lines) {
  auto exists = Exists(journal_path_);
  if (!exists.ok()) return exists.status();
  if (*exists) {
    auto text = ReadFileToString(journal_path_);
    if (!text.ok()) return text.status();
    auto j = ParseUploadJournal(*text, journal_path_);
    if (!j.ok()) return j.status();
    if (j->target != o_.target.name) {
      return absl::FailedPreconditionError(absl::StrCat(journal_path_, ": interrupted uploads to ",
                                                        j->target, ", not to this mount's ",
                                                        o_.target.name, "; left as they are"));
    }
    j_ = std::move(*j);
  }
  j_.target = o_.target.name;
  // A shard whose local file is gone was verified and removed before the
  // journal was rewritten; files not in the journal were packed but never
  // journaled (a crash between the two).
  std::erase_if(j_.objects, [&](const PendingObject& o) {
    return !Exists(JoinPath(o_.outgoing_dir, o.local)).value_or(true);
  });
  auto names = ListNames(o_.outgoing_dir);
  if (!names.ok()) return names.status();
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    if (naming::IsIgnoredName(name) || name == kUploadJournalName) continue;
    if (std::any_of(j_.objects.begin(), j_.objects.end(),
                    [&](const PendingObject& o) { return o.local == name; })) {
      continue;
    }
    struct stat st;
    const std::string path = JoinPath(o_.outgoing_dir, name);
    if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, path);
    if (!S_ISREG(st.st_mode)) continue;
    j_.objects.push_back(
        {static_cast<uint64_t>(st.st_size), "", objstore::ObjectKey(o_.target, name), name});
  }
  if (j_.objects.empty()) return UnlinkIfExists(journal_path_).status();
  if (auto s = SaveJournal(); !s.ok()) return s;
  return UploadAll(lines, /*recovering=*/true);
}

absl::Status Uploader::UploadNew(const std::vector<std::pair<std::string, uint64_t>>& names) {
  j_.target = o_.target.name;
  j_.objects.clear();
  for (const auto& [name, size] : names) {
    j_.objects.push_back({size, "", objstore::ObjectKey(o_.target, name), name});
  }
  if (auto s = SaveJournal(); !s.ok()) return s;
  faults_.At("upload_after_journal");
  std::vector<std::string> lines;
  return UploadAll(&lines, /*recovering=*/false);
}

}  // namespace

absl::Status FinishUploads(const UploadOptions& options, std::vector<std::string>* lines) {
  if (auto s = MakeDirs(options.outgoing_dir, 0700); !s.ok()) return s;
  Uploader u(options);
  return u.Finish(lines);
}

PackReport PackAndUpload(PackOptions pack, const UploadOptions& options) {
  PackReport report;
  // A pack a crash interrupted is settled first (its shards must not be
  // uploaded before it is committed), then what it left to upload.
  if (auto s = Recover(pack.journal_path, pack.records_dir); !s.ok()) {
    report.status = Annotate(s, "recovering an interrupted pack");
    return report;
  }
  std::vector<std::string> lines;
  absl::Status finished = FinishUploads(options, &lines);
  for (const std::string& line : lines) log::Info(line);
  if (!finished.ok()) {
    report.status = Annotate(
        finished,
        absl::StrCat("finishing the uploads an earlier unmount left in ", options.outgoing_dir,
                     " failed (nothing new was packed; every record stays staged)"));
    return report;
  }
  pack.output_dir = options.outgoing_dir;
  // Names already taken in the bucket are refused before anything is
  // packed (a generated prefix takes a "-K" suffix instead). Nothing
  // staged: nothing to ask.
  auto staged = ListNames(pack.records_dir);
  const bool any_staged =
      !staged.ok() || std::any_of(staged->begin(), staged->end(),
                                  [](const std::string& n) { return !naming::IsIgnoredName(n); });
  objstore::BucketWriter bucket(options.target);
  const bool generated = pack.prefix.empty();
  const std::string base_prefix = generated ? DefaultPrefix() : pack.prefix;
  pack.prefix = base_prefix;
  for (int k = 1; any_staged; ++k) {
    const std::string first = objstore::ObjectKey(options.target, pack.prefix + "-");
    auto taken = bucket.AnyKeyWithPrefix(first);
    if (!taken.ok()) {
      report.status = taken.status();
      return report;
    }
    if (!*taken) break;
    if (!generated || k > 100) {
      report.status = PosixError(EEXIST, absl::StrCat(bucket.Name(first),
                                                      "... exists in the bucket; nothing "
                                                      "packed (choose another prefix)"));
      return report;
    }
    pack.prefix = absl::StrCat(base_prefix, "-", k);
  }
  report = Pack(pack);
  if (!report.status.ok() || report.shards.empty()) return report;
  std::vector<std::pair<std::string, uint64_t>> names;
  for (const ShardWritten& s : report.shards) names.emplace_back(Basename(s.path), s.file_bytes);
  Uploader u(options);
  absl::Status up = u.UploadNew(names);
  if (!up.ok()) {
    report.status =
        SetMessage(up, absl::StrCat(up.message(),
                                    "; the records are packed: the shards not "
                                    "uploaded wait in ",
                                    options.outgoing_dir, " for the next unmount of this mount"));
    return report;
  }
  for (ShardWritten& s : report.shards) {
    s.path = bucket.Name(objstore::ObjectKey(options.target, Basename(s.path)));
    log::Info("upload: ", s.path, " (", s.file_bytes, " bytes)");
  }
  return report;
}

}  // namespace tfrecordfs::repack
