#include "src/repack/upload.h"

#include <expat.h>
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
#include "tfrecordfs/objstore/sigv4.h"
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

// Replies we parse are small; anything larger is refused (HttpClient).
constexpr size_t kMaxReply = size_t{1} << 20;

// ---- S3 XML replies (expat) ----

// The root element's name and the text of the first element named `want`
// anywhere in the document.
struct XmlScan {
  std::string root;
  std::string want;
  std::string found;
  bool in_want = false, have = false;
  int depth = 0;
};

void XMLCALL ScanStart(void* user, const XML_Char* name, const XML_Char**) {
  auto* x = static_cast<XmlScan*>(user);
  if (x->depth++ == 0) x->root = name;
  if (!x->have && x->want == name) x->in_want = true;
}
void XMLCALL ScanText(void* user, const XML_Char* s, int len) {
  auto* x = static_cast<XmlScan*>(user);
  if (x->in_want && x->found.size() < 4096) x->found.append(s, static_cast<size_t>(len));
}
void XMLCALL ScanEnd(void* user, const XML_Char* name) {
  auto* x = static_cast<XmlScan*>(user);
  --x->depth;
  if (x->in_want && x->want == name) {
    x->in_want = false;
    x->have = true;
  }
}

absl::StatusOr<XmlScan> ScanXml(absl::string_view xml, absl::string_view want) {
  XmlScan x;
  x.want = std::string(want);
  XML_Parser p = XML_ParserCreate(nullptr);
  if (p == nullptr) return absl::ResourceExhaustedError("XML_ParserCreate failed");
  XML_SetUserData(p, &x);
  XML_SetElementHandler(p, ScanStart, ScanEnd);
  XML_SetCharacterDataHandler(p, ScanText);
  const bool ok = XML_Parse(p, xml.data(), static_cast<int>(xml.size()), 1) == XML_STATUS_OK;
  const std::string error = ok ? "" : XML_ErrorString(XML_GetErrorCode(p));
  XML_ParserFree(p);
  if (!ok) return absl::DataLossError(absl::StrCat("the reply is not XML: ", error));
  return x;
}

// ---- Requests ----

class Bucket {
 public:
  explicit Bucket(const UploadTarget& t) : t_(t) {}

  std::string Url(const std::string& key) const {
    return absl::StrCat(t_.base, "/", objstore::AwsUriEncode(key, false));
  }
  std::string Name(const std::string& key) const { return absl::StrCat(t_.name, "/", key); }

  absl::StatusOr<objstore::HttpResponse> Send(absl::string_view method, const std::string& url,
                                              absl::string_view what,
                                              std::vector<std::string> headers = {},
                                              absl::string_view body = {}) const {
    return t_.client->Send(method, url, headers, t_.signer.get(), kMaxReply, what, body);
  }

  // A write made with If-None-Match: * answered 412: someone else's object
  // took the name meanwhile.
  absl::Status Appeared(const std::string& key) const {
    return PosixError(EEXIST, absl::StrCat(Name(key),
                                           ": an object appeared under this name during "
                                           "the upload; not overwritten"));
  }

  absl::Status Failed(const std::string& key, absl::string_view what,
                      const objstore::HttpResponse& r) const {
    return absl::Status(
        r.status == 401 || r.status == 403 ? absl::StatusCode::kPermissionDenied
                                           : absl::StatusCode::kUnavailable,
        absl::StrCat(Name(key), ": ", what, ": ", objstore::DescribeHttpStatus(r.status, r.body)));
  }

  // -1: no object under `key`; else its size.
  absl::StatusOr<int64_t> Head(const std::string& key) const {
    auto r = Send("HEAD", Url(key), "HEAD");
    if (!r.ok()) return r.status();
    if (r->status == 404) return -1;
    if (r->status != 200) return Failed(key, "HEAD", *r);
    if (r->content_length < 0) {
      return absl::DataLossError(absl::StrCat(Name(key), ": HEAD gave no Content-Length"));
    }
    return r->content_length;
  }

  // True when the object under `key` holds exactly the bytes of `path`
  // (`size` bytes, which its HEAD said), compared part by part.
  absl::StatusOr<bool> SameBytes(const std::string& key, const std::string& path,
                                 uint64_t size) const {
    auto fd = OpenFile(path, O_RDONLY);
    if (!fd.ok()) return fd.status();
    std::string local;
    for (uint64_t at = 0; at < size; at += t_.part_size) {
      const uint64_t n = std::min<uint64_t>(t_.part_size, size - at);
      local.resize(n);
      if (auto s = PreadFull(fd->get(), local.data(), n, at, path); !s.ok()) return s;
      const std::string range = absl::StrCat("bytes=", at, "-", at + n - 1);
      auto r = t_.client->Send("GET", Url(key), {absl::StrCat("Range: ", range)}, t_.signer.get(),
                               n, range);
      if (!r.ok()) return r.status();
      if (r->status == 404 || r->status == 412 || r->status == 416) return false;
      if (r->status != 206 && !(r->status == 200 && at == 0 && n == size)) {
        return Failed(key, absl::StrCat("GET ", range), *r);
      }
      if (r->body != local) return false;
    }
    return true;
  }

  absl::Status PutWhole(const std::string& key, absl::string_view bytes) const {
    auto r = Send("PUT", Url(key), absl::StrCat("PUT of ", bytes.size(), " bytes"),
                  {"If-None-Match: *"}, bytes);
    if (!r.ok()) return r.status();
    if (r->status == 412) return Appeared(key);
    if (r->status != 200) return Failed(key, "PUT", *r);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> CreateMultipart(const std::string& key) const {
    auto r = Send("POST", Url(key) + "?uploads", "CreateMultipartUpload");
    if (!r.ok()) return r.status();
    if (r->status != 200) return Failed(key, "CreateMultipartUpload", *r);
    auto x = ScanXml(r->body, "UploadId");
    if (!x.ok() || x->root != "InitiateMultipartUploadResult" || x->found.empty()) {
      return absl::DataLossError(
          absl::StrCat(Name(key), ": CreateMultipartUpload answered no UploadId"));
    }
    return x->found;
  }

  std::string UploadUrl(const std::string& key, const std::string& id) const {
    return absl::StrCat(Url(key), "?uploadId=", objstore::AwsUriEncode(id, true));
  }

  // The part's ETag.
  absl::StatusOr<std::string> UploadPart(const std::string& key, const std::string& id, int number,
                                         absl::string_view bytes) const {
    auto r = Send("PUT",
                  absl::StrCat(Url(key), "?partNumber=", number,
                               "&uploadId=", objstore::AwsUriEncode(id, true)),
                  absl::StrCat("UploadPart ", number, " (", bytes.size(), " bytes)"), {}, bytes);
    if (!r.ok()) return r.status();
    if (r->status != 200) return Failed(key, absl::StrCat("UploadPart ", number), *r);
    if (r->etag.empty()) {
      return absl::DataLossError(
          absl::StrCat(Name(key), ": UploadPart ", number, " answered no ETag"));
    }
    return r->etag;
  }

  absl::Status Complete(const std::string& key, const std::string& id,
                        const std::vector<std::string>& etags) const {
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags.size(); ++i) {
      std::string etag = etags[i];
      absl::StrReplaceAll({{"&", "&amp;"}, {"<", "&lt;"}, {"\"", "&quot;"}}, &etag);
      absl::StrAppend(&xml, "<Part><PartNumber>", i + 1, "</PartNumber><ETag>", etag,
                      "</ETag></Part>");
    }
    xml += "</CompleteMultipartUpload>";
    // If-None-Match on the completion: S3 takes it since 2024; a store
    // that ignores it is covered by the HEAD before the upload.
    auto r = Send("POST", UploadUrl(key, id), "CompleteMultipartUpload", {"If-None-Match: *"}, xml);
    if (!r.ok()) return r.status();
    if (r->status == 412) return Appeared(key);
    if (r->status != 200) return Failed(key, "CompleteMultipartUpload", *r);
    // S3 may answer 200 and then an <Error> in the body.
    auto x = ScanXml(r->body, "Code");
    if (!x.ok() || x->root != "CompleteMultipartUploadResult") {
      return absl::UnavailableError(absl::StrCat(Name(key), ": CompleteMultipartUpload failed: ",
                                                 objstore::DescribeHttpStatus(200, r->body)));
    }
    return absl::OkStatus();
  }

  // OK when the upload is gone (aborted now, or completed or aborted before).
  absl::Status Abort(const std::string& key, const std::string& id) const {
    auto r = Send("DELETE", UploadUrl(key, id), "AbortMultipartUpload");
    if (!r.ok()) return r.status();
    if (r->status != 204 && r->status != 200 && r->status != 404) {
      return Failed(key, absl::StrCat("AbortMultipartUpload ", id), *r);
    }
    return absl::OkStatus();
  }

  // True when some key starts with `prefix`.
  absl::StatusOr<bool> AnyKeyWithPrefix(const std::string& prefix) const {
    auto r =
        Send("GET",
             absl::StrCat(t_.base,
                          "/?list-type=2&max-keys=1&prefix=", objstore::AwsUriEncode(prefix, true)),
             "ListObjectsV2");
    if (!r.ok()) return r.status();
    if (r->status != 200) return Failed(prefix, "ListObjectsV2", *r);
    auto x = ScanXml(r->body, "Key");
    if (!x.ok() || x->root != "ListBucketResult") {
      return absl::DataLossError(absl::StrCat(Name(prefix), ": the listing is not a listing"));
    }
    return x->have;
  }

  const UploadTarget& target() const { return t_; }

 private:
  const UploadTarget& t_;
};

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
  Bucket bucket_;
  const std::string journal_path_;
  UploadJournal j_;
  FaultPoints faults_;
  uint64_t completed_ = 0;
};

}  // namespace

uint64_t MultipartPartSize(uint64_t size, uint64_t wanted) {
  wanted = std::max<uint64_t>(wanted, 1);
  if ((size + wanted - 1) / wanted <= kMaxParts) return wanted;
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  const uint64_t least = (size + kMaxParts - 1) / kMaxParts;
  return (least + kMiB - 1) / kMiB * kMiB;
}

namespace {

absl::Status Uploader::UploadOne(size_t i) {
  PendingObject& o = j_.objects[i];
  const std::string path = JoinPath(o_.outgoing_dir, o.local);
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  const UploadTarget& t = o_.target;
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
  const uint64_t part_size = MultipartPartSize(o.size, t.part_size);
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
      return absl::Status(s.code(),
                          absl::StrCat("uploading ", path, " to ", name, ": ", s.message()));
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
    j_.objects.push_back({static_cast<uint64_t>(st.st_size), "", ObjectKey(o_.target, name), name});
  }
  if (j_.objects.empty()) return UnlinkIfExists(journal_path_).status();
  if (auto s = SaveJournal(); !s.ok()) return s;
  return UploadAll(lines, /*recovering=*/true);
}

absl::Status Uploader::UploadNew(const std::vector<std::pair<std::string, uint64_t>>& names) {
  j_.target = o_.target.name;
  j_.objects.clear();
  for (const auto& [name, size] : names) {
    j_.objects.push_back({size, "", ObjectKey(o_.target, name), name});
  }
  if (auto s = SaveJournal(); !s.ok()) return s;
  faults_.At("upload_after_journal");
  std::vector<std::string> lines;
  return UploadAll(&lines, /*recovering=*/false);
}

}  // namespace

std::string ObjectKey(const UploadTarget& target, const std::string& name) {
  return absl::StrCat(target.key_prefix, name);
}

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
    report.status =
        absl::Status(s.code(), absl::StrCat("recovering an interrupted pack: ", s.message()));
    return report;
  }
  std::vector<std::string> lines;
  absl::Status finished = FinishUploads(options, &lines);
  for (const std::string& line : lines) log::Info(line);
  if (!finished.ok()) {
    report.status = absl::Status(
        finished.code(),
        absl::StrCat(
            "finishing the uploads an earlier unmount left in ", options.outgoing_dir,
            " failed (nothing new was packed; every record stays staged): ", finished.message()));
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
  Bucket bucket(options.target);
  const bool generated = pack.prefix.empty();
  const std::string base_prefix = generated ? DefaultPrefix() : pack.prefix;
  pack.prefix = base_prefix;
  for (int k = 1; any_staged; ++k) {
    const std::string first = ObjectKey(options.target, pack.prefix + "-");
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
    report.status = absl::Status(
        up.code(), absl::StrCat(up.message(),
                                "; the records are packed: the shards not uploaded "
                                "wait in ",
                                options.outgoing_dir, " for the next unmount of this mount"));
    return report;
  }
  for (ShardWritten& s : report.shards) {
    s.path = bucket.Name(ObjectKey(options.target, Basename(s.path)));
    log::Info("upload: ", s.path, " (", s.file_bytes, " bytes)");
  }
  return report;
}

}  // namespace tfrecordfs::repack
