#include "tfrecordfs/repack/bucket_rewrite.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/repack/check_shard.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/fault_points.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/repack/tfds_info.h"
#include "tfrecordfs/source/stored_bytes.h"
#include "tfrecordfs/staging/edits.h"

namespace tfrecordfs::repack {

using objstore::RewritePiece;

absl::StatusOr<ObjectLayout> LayoutAfterEdits(
    const std::vector<uint64_t>& offsets,
    const std::map<uint64_t, std::optional<std::string>>& changes,
    const std::vector<std::string>& appended) {
  if (offsets.empty()) return absl::InvalidArgumentError("no record offsets");
  const uint64_t records = offsets.size() - 1;
  ObjectLayout out;
  const auto add_new = [&](const std::string& bytes) {
    if (bytes.empty()) return;
    RewritePiece p{RewritePiece::From::kNew, out.new_bytes.size(), bytes.size()};
    out.new_bytes += bytes;
    if (!out.pieces.empty() && out.pieces.back().from == p.from &&
        out.pieces.back().offset + out.pieces.back().size == p.offset) {
      out.pieces.back().size += p.size;
    } else {
      out.pieces.push_back(p);
    }
  };
  const auto keep = [&](uint64_t from, uint64_t to) {
    if (to > from) out.pieces.push_back({RewritePiece::From::kOld, from, to - from});
  };
  uint64_t kept_from = offsets.front();
  for (const auto& [record, bytes] : changes) {
    if (record >= records) {
      return absl::InvalidArgumentError(
          absl::StrCat("record ", record, " changed, but the object has ", records));
    }
    keep(kept_from, offsets[record]);
    if (bytes) add_new(*bytes);
    kept_from = offsets[record + 1];
  }
  keep(kept_from, offsets.back());
  for (const std::string& a : appended) add_new(a);
  for (const RewritePiece& p : out.pieces) out.size += p.size;
  return out;
}

namespace {

// The bytes of an uploaded part: its new bytes and the kept ranges read back.
absl::StatusOr<std::string> PartBytes(const objstore::RewritePart& part, const ObjectLayout& layout,
                                      const ReadOldBytes& read_old, ObjectRewriteStats* stats) {
  std::string bytes;
  bytes.reserve(part.size);
  std::string old;
  for (const RewritePiece& p : part.pieces) {
    if (p.from == RewritePiece::From::kNew && layout.read_new) {
      old.clear();
      if (auto s = layout.read_new(p.offset, p.size, &old); !s.ok()) return s;
      if (old.size() != p.size) {
        return absl::DataLossError(
            absl::StrCat("read ", old.size(), " new bytes at ", p.offset, ", not ", p.size));
      }
      bytes += old;
      continue;
    }
    if (p.from == RewritePiece::From::kNew) {
      bytes.append(layout.new_bytes, p.offset, p.size);
      continue;
    }
    old.clear();
    if (auto s = read_old(p.offset, p.size, &old); !s.ok()) return s;
    if (old.size() != p.size) {
      return absl::DataLossError(absl::StrCat("read ", old.size(), " bytes of the object at ",
                                              p.offset, ", not ", p.size));
    }
    stats->read_back += p.size;
    bytes += old;
  }
  return bytes;
}

// A gs:// object's parts: the whole new object cut at upload_part bytes,
// every part uploaded (no ranged server-side copy to lean on).
absl::StatusOr<std::vector<objstore::RewritePart>> StreamedParts(
    const ObjectLayout& layout, const objstore::RewritePlanOptions& o) {
  std::vector<objstore::RewritePart> parts(1);
  for (RewritePiece p : layout.pieces) {
    while (p.size > 0) {
      if (parts.back().size == o.upload_part) parts.emplace_back();
      objstore::RewritePart& part = parts.back();
      const uint64_t take = std::min(o.upload_part - part.size, p.size);
      part.pieces.push_back(RewritePiece{p.from, p.offset, take});
      part.size += take;
      p.offset += take;
      p.size -= take;
    }
  }
  if (parts.size() > objstore::kMaxParts) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rewrite needs ", parts.size(), " parts; at most ", objstore::kMaxParts));
  }
  return parts;
}

}  // namespace

absl::StatusOr<ObjectRewriteStats> RewriteObject(
    const objstore::BucketWriter& writer, const ObjectRewrite& object, const ObjectLayout& layout,
    const ReadOldBytes& read_old, const objstore::RewritePlanOptions& options,
    const std::function<absl::Status()>& before_final) {
  const auto final_write = [&]() { return before_final ? before_final() : absl::OkStatus(); };
  if (object.etag.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        writer.Name(object.key), ": the store gave no ETag; cannot rewrite it conditionally"));
  }
  const std::string replaces =
      object.generation.empty() ? object.etag : objstore::GenerationCondition(object.generation);
  ObjectRewriteStats stats;
  if (layout.size == 0) {
    // Every record deleted: an empty object, conditionally.
    if (auto s = final_write(); !s.ok()) return s;
    if (auto s = writer.PutWhole(object.key, "", replaces, &stats.etag); !s.ok()) return s;
    return stats;
  }
  absl::StatusOr<std::vector<objstore::RewritePart>> parts;
  if (!object.generation.empty()) {
    parts = StreamedParts(layout, options);
  } else {
    parts = objstore::PlanRewriteParts(layout.pieces, options);
  }
  if (!parts.ok()) return parts.status();
  // A small object (ranged copies need a source larger than a part) or a
  // single uploaded part: one conditional PUT.
  const bool one_put = object.generation.empty() ? object.size <= options.min_part ||
                                                       (parts->size() == 1 && !(*parts)[0].copy)
                                                 : parts->size() == 1;
  if (one_put) {
    objstore::RewritePart whole;
    for (const RewritePiece& p : layout.pieces) whole.pieces.push_back(p);
    whole.size = layout.size;
    auto bytes = PartBytes(whole, layout, read_old, &stats);
    if (!bytes.ok()) return bytes.status();
    if (auto s = final_write(); !s.ok()) return s;
    if (auto s = writer.PutWhole(object.key, *bytes, replaces, &stats.etag); !s.ok()) return s;
    stats.uploaded = bytes->size();
    return stats;
  }
  auto id = writer.CreateMultipart(object.key);
  if (!id.ok()) return id.status();
  std::vector<std::string> etags;
  absl::Status status;
  for (const objstore::RewritePart& part : *parts) {
    const int number = static_cast<int>(etags.size()) + 1;
    absl::StatusOr<std::string> etag;
    if (part.copy) {
      const RewritePiece& p = part.pieces.front();
      etag = writer.UploadPartCopy(object.key, *id, number, object.key, p.offset,
                                   p.offset + p.size - 1, object.etag);
      if (etag.ok()) stats.copied += p.size;
    } else {
      auto bytes = PartBytes(part, layout, read_old, &stats);
      etag = bytes.ok() ? writer.UploadPart(object.key, *id, number, *bytes) : bytes.status();
      if (etag.ok()) stats.uploaded += bytes->size();
    }
    if (!etag.ok()) {
      status = etag.status();
      break;
    }
    etags.push_back(*std::move(etag));
  }
  if (status.ok()) status = final_write();
  if (status.ok()) status = writer.Complete(object.key, *id, etags, replaces, &stats.etag);
  if (!status.ok()) {
    // Nothing shows under the key until a completion: the parts go.
    if (auto a = writer.Abort(object.key, *id); !a.ok()) {
      log::Warning(a.message(),
                   " (the store removes it by its lifecycle rules, or the next "
                   "mount aborts it)");
    }
    return status;
  }
  stats.parts = etags.size();
  return stats;
}

absl::StatusOr<std::vector<std::string>> AbortLeftUploads(const objstore::BucketWriter& writer,
                                                          const std::string& prefix,
                                                          const std::vector<std::string>& keys) {
  auto uploads = writer.ListUploads(prefix);
  if (!uploads.ok()) return uploads.status();
  const absl::flat_hash_set<std::string> ours(keys.begin(), keys.end());
  std::vector<std::string> lines;
  for (const objstore::BucketWriter::InFlight& u : *uploads) {
    if (!ours.contains(u.key)) continue;
    if (auto s = writer.Abort(u.key, u.id); !s.ok()) {
      lines.push_back(absl::StrCat("cannot abort an interrupted rewrite of ", writer.Name(u.key),
                                   ": ", s.message()));
      continue;
    }
    lines.push_back(absl::StrCat("aborted an interrupted rewrite of ", writer.Name(u.key),
                                 " (upload ", u.id, "): the object is as it was"));
  }
  return lines;
}

namespace {

// The bucket's upload target and the object's key for an object's URL
// (s3://BUCKET/KEY), reached as the mount reaches its objects.
struct ObjectPlace {
  objstore::UploadTarget target;
  std::string key;
};

absl::StatusOr<std::unique_ptr<ObjectPlace>> PlaceOf(const std::string& url) {
  auto u = objstore::ParseObjectUrl(url);
  if (!u.ok()) return u.status();
  const bool s3 = u->scheme == objstore::ObjectUrl::Scheme::kS3;
  if (!(s3 || u->scheme == objstore::ObjectUrl::Scheme::kGcs) || u->key.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        url, ": not an object of an s3:// or gs:// bucket; its records are not rewritten"));
  }
  auto target =
      objstore::ResolveUploadTarget(absl::StrCat(s3 ? "s3://" : "gs://", u->bucket),
                                    objstore::DefaultObjectOptions(), objstore::ProcessEnv);
  if (!target.ok()) return target.status();
  auto out = std::make_unique<ObjectPlace>();
  out->target = *std::move(target);
  out->key = u->key;
  return out;
}

// Writes the object `from` after its edits in its own codec into `path`
// (record::ShardWriter: kept records inflated from the old object and
// deflated again, in one pass), checks it (CheckWrittenShard), and returns
// the layout that uploads it whole, its bytes read from *fd.
absl::StatusOr<ObjectLayout> WriteCompressed(const std::string& path, const ShardToRewrite& from,
                                             const staging::DeletedShard& d,
                                             const staging::ShardEdits& edits, UniqueFd* fd) {
  auto out = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (!out.ok()) return out.status();
  const std::vector<uint64_t>& offsets = *from.offsets;
  uint64_t records = 0;
  uint64_t framed = 0;
  {
    record::ShardWriter writer(*std::move(out), path, {.codec = from.codec});
    absl::Status s;
    for (uint64_t i = 0; i + 1 < offsets.size() && s.ok(); ++i) {
      if (d.records.count(i)) continue;
      if (auto e = edits.replaced.find(i); e != edits.replaced.end()) {
        s = writer.Append(e->second);
      } else {
        auto payload = record::ReadRecord(*from.source, i, offsets[i], offsets[i + 1]);
        s = payload.ok() ? writer.Append(*payload) : payload.status();
      }
      ++records;
    }
    for (const auto& [name, payload] : edits.added) {
      if (!s.ok()) break;
      s = writer.Append(payload);
      ++records;
    }
    if (s.ok()) s = writer.Close(/*sync=*/false);
    if (!s.ok()) return s;
    framed = writer.bytes();
  }
  if (auto s = CheckWrittenShard(path, framed, records, from.codec); !s.ok()) return s;
  auto in = OpenFile(path, O_RDONLY | O_CLOEXEC);
  if (!in.ok()) return in.status();
  struct stat st;
  if (::fstat(in->get(), &st) != 0) return ErrnoError(errno, path);
  *fd = *std::move(in);
  ObjectLayout layout;
  layout.size = static_cast<uint64_t>(st.st_size);
  if (layout.size > 0) layout.pieces.push_back({RewritePiece::From::kNew, 0, layout.size});
  const int raw = fd->get();
  layout.read_new = [raw, path](uint64_t offset, uint64_t size, std::string* bytes) {
    bytes->resize(size);
    return PreadFull(raw, bytes->data(), size, offset, path);
  };
  return layout;
}

// The record header bytes of the new object's first and last records (a
// plain object: each a kept record's, read from the old object before it
// is replaced, or a changed or appended record's framed bytes; zeros when
// no record is left).
struct EndHeaders {
  index::HeaderBytes first{}, last{};
};

absl::StatusOr<EndHeaders> NewEndHeaders(
    const source::ObjectReader& old, const std::vector<uint64_t>& offsets,
    const std::map<uint64_t, std::optional<std::string>>& changes,
    const std::vector<std::string>& appended) {
  EndHeaders out;
  const uint64_t n = offsets.size() - 1;
  // False for a deleted record.
  const auto header_of = [&](uint64_t i, index::HeaderBytes* h) -> absl::StatusOr<bool> {
    if (auto c = changes.find(i); c != changes.end()) {
      if (!c->second) return false;
      std::memcpy(h->data(), c->second->data(), h->size());
      return true;
    }
    if (auto s = source::PreadFull(&old, h->data(), h->size(), offsets[i], old.url()); !s.ok()) {
      return s;
    }
    return true;
  };
  bool first = false;
  for (uint64_t i = 0; i < n && !first; ++i) {
    auto f = header_of(i, &out.first);
    if (!f.ok()) return f.status();
    first = *f;
  }
  if (!first && !appended.empty()) {
    std::memcpy(out.first.data(), appended.front().data(), out.first.size());
  }
  if (!appended.empty()) {
    std::memcpy(out.last.data(), appended.back().data(), out.last.size());
    return out;
  }
  for (uint64_t i = n; i-- > 0;) {
    auto f = header_of(i, &out.last);
    if (!f.ok()) return f.status();
    if (*f) break;
  }
  return out;
}

// Once the store took the new object: the index stored beside it (`index
// --beside`: KEY.tfri, describing the old object), when there is one,
// follows it. For a plain object (`offsets`, `ends` set) it is replaced by
// the new object's index, made from the offsets the rewrite wrote (no
// walk) and tied to the new object as a HEAD shows it (size, Last-Modified,
// ETag: the one the final write answered, else another writer's object is
// there now and the index is not written), in one PUT conditional on the
// old index's ETag (or generation). Else (a compressed object, whose
// checkpoints need an inflate; a failure) it is deleted. A crash before
// this leaves the old index, which every reader refuses by the new
// object's ETag (index_store.cc CheckStored) and RecoverObjectRewrites
// removes. Returns what it did, for the commit's note ("" for nothing).
std::string FollowIndexBeside(const objstore::BucketWriter& writer, const std::string& key,
                              const std::string& url, const std::string& written_etag,
                              uint64_t size, const std::vector<uint64_t>* offsets,
                              const EndHeaders* ends) {
  const std::string beside = absl::StrCat(key, index::kIndexSuffix);
  std::string beside_etag, beside_generation;
  auto there = writer.Head(beside, &beside_etag, &beside_generation);
  if (there.ok() && *there < 0) return "";
  std::string why;
  if (!there.ok()) {
    why = std::string(there.status().message());
  } else if (offsets == nullptr || ends == nullptr) {
    why = "a compressed object's index needs a walk of its stream";
  } else {
    std::string etag;
    int64_t mtime = 0;
    auto now = writer.Head(key, &etag, nullptr, &mtime);
    if (!now.ok()) {
      why = std::string(now.status().message());
    } else if (*now != static_cast<int64_t>(size) || written_etag.empty() || etag != written_etag) {
      why = "the object there is not the one this commit wrote";
    } else {
      index::IndexFile f;
      f.file_size = size;
      f.data_size = size;
      f.mtime_ns = mtime * int64_t{1000000000};
      f.ctime_ns = TimespecNs(objstore::EtagStamp(etag));
      f.path = url;
      f.walk.offsets = *offsets;
      f.walk.file_size = size;
      f.first_header = ends->first;
      f.last_header = ends->last;
      const std::string replaces = beside_generation.empty()
                                       ? beside_etag
                                       : objstore::GenerationCondition(beside_generation);
      auto s = writer.PutWhole(beside, index::EncodeIndexFile(f), replaces);
      if (s.ok()) return absl::StrCat("rewrote ", writer.Name(beside), " for the new object");
      why = std::string(s.message());
    }
  }
  if (auto s = writer.Delete(beside); !s.ok()) {
    log::Warning("cannot rewrite ", writer.Name(beside), " (", why,
                 ") nor delete it: ", s.message(), " (it describes the old object of ", url,
                 "; readers refuse it by the new object's ETag)");
    return "";
  }
  return absl::StrCat("deleted ", writer.Name(beside), " (", why,
                      "; tfrecordfs index --beside writes the new object's)");
}

// Once the store took the new object: TFDS's dataset_info.json beside it
// (tfds_info.h), when the object is a TFDS shard that file counts, gets the
// shard's new record count and the split's new payload bytes
// (CommittedTfdsInfoJson, the local commit's builder), written in one PUT
// conditional on the ETag (or generation) a HEAD gave before the file was
// read: another writer's change to it meanwhile is never overwritten. A
// refusal or failure leaves the object's commit done; the returned note
// says so (and the log). "" when there is nothing to update.
std::string FollowTfdsInfo(const objstore::BucketWriter& writer, const std::string& key,
                           uint64_t records, std::optional<int64_t> bytes_delta) {
  const size_t slash = key.rfind('/');
  const std::string file = key.substr(slash == std::string::npos ? 0 : slash + 1);
  if (!ParseTfdsShardName(file)) return "";
  const std::string info_key =
      absl::StrCat(slash == std::string::npos ? "" : key.substr(0, slash + 1), "dataset_info.json");
  const std::string name = writer.Name(info_key);
  const auto failed = [&](absl::string_view why) {
    const std::string line = absl::StrCat(
        name, " NOT updated (", why, "); the object's commit is done: its split's shardLengths[",
        ParseTfdsShardName(file)->index, "] is now ", records, ", which tfds.load checks");
    log::Warning(line);
    return line;
  };
  std::string etag, generation;
  auto there = writer.Head(info_key, &etag, &generation);
  if (!there.ok()) return failed(there.status().message());
  if (*there < 0) return "";
  auto text = writer.GetSmall(info_key, size_t{64} << 20);
  if (!text.ok()) return failed(text.status().message());
  auto next = CommittedTfdsInfoJson(*text, file, records, bytes_delta, name);
  if (!next.ok()) return failed(next.status().message());
  if (!*next || **next == *text) return "";
  const std::string replaces =
      generation.empty() ? etag : objstore::GenerationCondition(generation);
  if (replaces.empty()) return failed("the store gave no ETag to write it conditionally on");
  if (FaultPoints().Is("bucket_tfds_info_raced")) {
    // Test hook: another writer changes the file between its read and
    // this write (its bytes and one space more).
    (void)writer.PutWhole(info_key, absl::StrCat(*text, " "), replaces);
  }
  if (auto s = writer.PutWhole(info_key, **next, replaces); !s.ok()) {
    return failed(ErrnoOf(s) == ESTALE ? "another writer changed it meanwhile; theirs is kept"
                                       : s.message());
  }
  return absl::StrCat("updated ", name);
}

bool IsBucketObject(const std::string& path) {
  return absl::StartsWith(path, "s3://") || absl::StartsWith(path, "gs://");
}

}  // namespace

absl::Status CommitObjectEdits(staging::DeletionList* list, const std::string& edits_dir,
                               const std::string& url, const staging::DeletedShard& d,
                               const ShardToRewrite& from, naming::FeatureTypes& types,
                               RewrittenShard* out) {
  const FaultPoints faults;
  const std::string& etag = from.object->etag();
  if (!(staging::ObjectFingerprint(from.object->size(), etag) == d.before)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the object is not the one its records were edited on (it was replaced before this "
        "mount listed it); its edits are kept pending: tfrecordfs commit --rebase re-applies "
        "them to it (or remove ",
        list->path(), " and the shard's folders in ", edits_dir, " to drop them)"));
  }
  auto edits = staging::ReadShardEdits(edits_dir, staging::ShardKey(url), types);
  if (!edits.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(edits.status().message(),
                     "; nothing of this object was written: fix that file through a "
                     "read-write mount and unmount again (its edits are kept pending)"));
  }
  KeepWhatEditsDidNotChange(from, &*edits);
  const std::vector<uint64_t>& offsets = *from.offsets;
  if (offsets.empty()) return absl::DataLossError(absl::StrCat(url, ": no record offsets"));
  // The records' new framed bytes (nullopt: deleted), and the new offsets.
  std::map<uint64_t, std::optional<std::string>> changes;
  std::vector<std::string> appended;
  std::vector<uint64_t>& next = out->offsets;
  next.clear();
  uint64_t at = 0;
  for (uint64_t i = 0; i + 1 < offsets.size(); ++i) {
    if (d.records.count(i)) {
      changes[i] = std::nullopt;
      ++out->deleted;
      continue;
    }
    next.push_back(at);
    if (auto e = edits->replaced.find(i); e != edits->replaced.end()) {
      std::string framed;
      record::AppendFramed(&framed, e->second);
      at += framed.size();
      changes[i] = std::move(framed);
      ++out->changed;
      continue;
    }
    at += offsets[i + 1] - offsets[i];
    ++out->kept;
  }
  for (const auto& [name, payload] : edits->added) {
    next.push_back(at);
    std::string framed;
    record::AppendFramed(&framed, payload);
    at += framed.size();
    appended.push_back(std::move(framed));
    ++out->added;
  }
  next.push_back(at);
  absl::StatusOr<ObjectLayout> layout;
  // A compressed object: the whole new stream, written locally first.
  std::optional<std::string> temp;
  UniqueFd temp_fd;
  if (from.codec != source::Codec::kNone) {
    const std::string& lp = list->path();
    temp = absl::StrCat(lp.substr(0, lp.rfind('/')), "/.rewrite-", staging::ShardKey(url));
    auto written = WriteCompressed(*temp, from, d, *edits, &temp_fd);
    if (!written.ok()) {
      ::unlink(temp->c_str());
      return written.status();
    }
    layout = std::move(*written);
  } else {
    layout = LayoutAfterEdits(offsets, changes, appended);
  }
  if (!layout.ok()) return layout.status();
  struct Unlink {
    const std::optional<std::string>& path;
    ~Unlink() {
      if (path) ::unlink(path->c_str());
    }
  } unlink_temp{temp};
  // The new object's first and last record headers, for its index
  // (read now: the old object's bytes are gone once it is replaced).
  std::optional<EndHeaders> ends;
  if (from.codec == source::Codec::kNone) {
    auto e = NewEndHeaders(*from.object, offsets, changes, appended);
    if (!e.ok()) return e.status();
    ends = *e;
  }
  auto place = PlaceOf(url);
  if (!place.ok()) return place.status();
  const objstore::BucketWriter writer((*place)->target);
  const uint64_t records = out->kept + out->changed + out->added;
  bool marked = false;
  const auto before_final = [&]() -> absl::Status {
    // Journaled first: a crash from here on is settled at the next mount
    // by what the store then holds (RecoverObjectRewrites).
    if (auto s = list->SetRewriting(url, staging::Fingerprint{layout->size, 0, 0}, records);
        !s.ok()) {
      return s;
    }
    marked = true;
    faults.At("rewrite_object_before_final");
    return absl::OkStatus();
  };
  // Straight from the object (a plain one's bytes are its records'): the
  // mount's readahead would fetch well past the few MiB a part merges in.
  const ReadOldBytes read_old = [&](uint64_t offset, uint64_t size,
                                    std::string* bytes) -> absl::Status {
    bytes->resize(size);
    for (uint64_t done = 0; done < size;) {
      auto n = from.object->ReadAt(offset + done, bytes->data() + done, size - done);
      if (!n.ok()) return n.status();
      if (*n == 0) {
        return absl::DataLossError(absl::StrCat(url, ": ends at byte offset ", offset + done));
      }
      done += *n;
    }
    return absl::OkStatus();
  };
  ObjectRewrite object{(*place)->key, etag, from.object->size(), ""};
  if (absl::StartsWith(url, "gs://")) {
    // The write is conditional on the generation, which the listing does
    // not give: the object's as it is now, if it is still the one listed
    // (same ETag, same size: the bytes the edits were made on).
    std::string now;
    auto size = writer.Head(object.key, &now, &object.generation);
    if (!size.ok()) return size.status();
    if (*size != static_cast<int64_t>(object.size) || now != etag) {
      return PosixError(
          ESTALE, absl::StrCat(url, " was replaced since this mount listed it (ETag ", etag,
                               "): another writer's object is kept and nothing of this commit "
                               "was written; the edits stay pending. To re-apply them to the "
                               "new object by record key: tfrecordfs commit --rebase MOUNTPOINT"));
    }
    if (object.generation.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          url,
          ": the store gave no x-goog-generation; cannot rewrite it conditionally (the "
          "edits are kept pending)"));
    }
  }
  auto stats = RewriteObject(writer, object, *layout, read_old, objstore::RewritePlanOptions{},
                             before_final);
  if (!stats.ok()) {
    if (marked) (void)list->SetRewriting(url, std::nullopt);
    // A read of the old object's bytes refused (pinned to the ETag) says
    // the same as a refused write: asked once more, by its ETag now.
    std::string now;
    auto size = writer.Head((*place)->key, &now);
    if (ErrnoOf(stats.status()) == ESTALE || (size.ok() && (*size < 0 || now != etag))) {
      return PosixError(
          ESTALE, absl::StrCat(url, " was replaced since this mount listed it (ETag ", etag,
                               "): another writer's object is kept and nothing of this commit "
                               "was written; the edits stay pending. To re-apply them to the "
                               "new object by record key: tfrecordfs commit --rebase MOUNTPOINT"));
    }
    return SetMessage(stats.status(),
                      absl::StrCat(stats.status().message(),
                                   "; the object is left as it was and its edits are kept "
                                   "pending (commit again, or unmount and mount again)"));
  }
  faults.At("rewrite_object_after_final");
  const std::string beside =
      FollowIndexBeside(writer, (*place)->key, url, stats->etag, layout->size,
                        ends ? &out->offsets : nullptr, ends ? &*ends : nullptr);
  // The payload bytes the rewrite added (TFRecord frames each with 16).
  const int64_t old_records = static_cast<int64_t>(offsets.size()) - 1;
  const int64_t bytes_delta = static_cast<int64_t>(out->offsets.back()) -
                              static_cast<int64_t>(offsets.back() - offsets.front()) -
                              16 * (static_cast<int64_t>(records) - old_records);
  const std::string info = FollowTfdsInfo(writer, (*place)->key, records, bytes_delta);
  out->note = absl::StrFormat(
      "%s: %d part(s), %d byte(s) copied by the store, %d uploaded (%d of them read back)%s%s%s%s",
      stats->parts == 0 ? "one conditional PUT" : "a conditional multipart upload", stats->parts,
      stats->copied, stats->uploaded, stats->read_back, beside.empty() ? "" : "; ", beside,
      info.empty() ? "" : "; ", info);
  if (auto f = list->Forget(url); !f.ok()) return f;
  (void)staging::ReplaceContentKeys(staging::RecordKeysPath(list->path()), url);
  faults.At("rewrite_after_forget");
  RemoveEditFolders(edits_dir, edits->folders);
  return absl::OkStatus();
}

namespace {

// A rebase's journal (`<store>/rebase-journal-SHARDKEY`, beside the list),
// written durably before its first rename and removed after the list and
// the record keys name the new object: the object it rebases onto (size,
// ETag), its renames in two phases (`aside`: every edit folder to a
// temporary name or to rebase-left/; `into_place`: the temporary names to
// the new records' folder names; a line "phase 2" appended once the first
// phase is done, since the second may take names the first freed) and the
// new record keys. A crash anywhere leaves the journal, settled by
// SettleRebaseJournal at the next mount.
struct RebaseJournal {
  std::string url;
  uint64_t after_size = 0;
  std::string after_etag;
  std::vector<std::pair<std::string, std::string>> aside, into_place;
  std::map<uint64_t, staging::ContentKey> keys;
  bool second_phase = false;
};

constexpr char kRebaseJournalPrefix[] = "rebase-journal-";
constexpr char kRebaseJournalMagic[] = "tfrecordfs rebase journal 1";

std::string RebaseJournalPath(const std::string& store, const std::string& url) {
  return absl::StrCat(store, "/", kRebaseJournalPrefix, staging::ShardKey(url));
}

std::string EncodeRebaseJournal(const RebaseJournal& j) {
  std::string out = absl::StrCat(kRebaseJournalMagic, "\nurl\t", j.url, "\nafter\t", j.after_size,
                                 "\t", j.after_etag, "\n");
  for (const auto& [from, to] : j.aside) absl::StrAppend(&out, "1\t", from, "\t", to, "\n");
  for (const auto& [from, to] : j.into_place) absl::StrAppend(&out, "2\t", from, "\t", to, "\n");
  for (const auto& [i, k] : j.keys)
    absl::StrAppend(&out, "key\t", i, "\t", k.length, "\t", k.crc, "\n");
  return out;
}

absl::StatusOr<RebaseJournal> ParseRebaseJournal(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  RebaseJournal j;
  std::vector<std::string> lines = absl::StrSplit(*text, '\n');
  if (lines.empty() || lines[0] != kRebaseJournalMagic) {
    return absl::DataLossError(absl::StrCat(path, ": not a rebase journal"));
  }
  for (size_t n = 1; n < lines.size(); ++n) {
    std::vector<std::string> f = absl::StrSplit(lines[n], '\t');
    bool ok = true;
    if (f[0] == "url" && f.size() == 2) {
      j.url = f[1];
    } else if (f[0] == "after" && f.size() == 3) {
      ok = absl::SimpleAtoi(f[1], &j.after_size);
      j.after_etag = f[2];
    } else if ((f[0] == "1" || f[0] == "2") && f.size() == 3) {
      (f[0] == "1" ? j.aside : j.into_place).emplace_back(f[1], f[2]);
    } else if (f[0] == "key" && f.size() == 4) {
      uint64_t i = 0;
      staging::ContentKey k;
      ok = absl::SimpleAtoi(f[1], &i) && absl::SimpleAtoi(f[2], &k.length) &&
           absl::SimpleAtoi(f[3], &k.crc);
      j.keys[i] = k;
    } else if (f[0] == "phase 2") {
      j.second_phase = true;
    } else if (n + 1 != lines.size()) {
      ok = false;  // (the last line may be a "phase 2" a crash cut short)
    }
    if (!ok)
      return absl::DataLossError(absl::StrCat(path, ": line ", n + 1, " is not a journal's"));
  }
  if (j.url.empty()) return absl::DataLossError(absl::StrCat(path, ": names no object"));
  return j;
}

absl::Status AppendRebasePhase(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path);
  UniqueFd owner(fd);
  constexpr char kLine[] = "phase 2\n";
  if (::write(fd, kLine, sizeof kLine - 1) != static_cast<ssize_t>(sizeof kLine - 1) ||
      ::fsync(fd) != 0) {
    return ErrnoError(errno, path);
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Settles the rebase journal at `path` (see RebaseJournal): if the list
// names the object it rebased onto, the rebase is finished (the record
// keys written, the journal removed); else its renames are undone and the
// edits stay pending on the object they were made on. Returns the log line.
std::string SettleRebaseJournal(staging::DeletionList* list, const std::string& path) {
  auto j = ParseRebaseJournal(path);
  if (!j.ok()) {
    return absl::StrCat("cannot settle an interrupted rebase: ", j.status().message(),
                        " (kept; its edit folders may be under temporary names)");
  }
  const staging::Deletions listed = list->Snapshot();
  const auto it = listed.find(j->url);
  if (it != listed.end() &&
      it->second.before == staging::ObjectFingerprint(j->after_size, j->after_etag)) {
    // The list names the new object: every rename was done.
    (void)staging::ReplaceContentKeys(staging::RecordKeysPath(list->path()), j->url, j->keys);
    ::unlink(path.c_str());
    return absl::StrCat("finished the interrupted rebase of ", j->url,
                        " (its edits name the new object's records)");
  }
  // Undone, newest rename first; a name is moved back only from where the
  // journal put it, and only when its old name is free.
  std::string failed;
  const auto back = [&](const std::string& from, const std::string& to) {
    if (Exists(to) && !Exists(from) && ::rename(to.c_str(), from.c_str()) != 0) {
      absl::StrAppend(&failed, failed.empty() ? "" : ", ", to);
    }
  };
  if (j->second_phase) {
    for (auto r = j->into_place.rbegin(); r != j->into_place.rend(); ++r) back(r->first, r->second);
  }
  for (auto r = j->aside.rbegin(); r != j->aside.rend(); ++r) back(r->first, r->second);
  if (!failed.empty()) {
    return absl::StrCat("cannot undo the interrupted rebase of ", j->url, ": cannot rename ",
                        failed, " back (", path, " kept)");
  }
  if (!j->aside.empty())
    (void)FsyncDir(j->aside.front().first.substr(0, j->aside.front().first.rfind('/')));
  ::unlink(path.c_str());
  return absl::StrCat("rolled back the interrupted rebase of ", j->url,
                      ": its edits are pending on the object they were made on, as before "
                      "(tfrecordfs commit --rebase re-applies them to the new object)");
}

// Every rebase journal beside the list, settled; the log lines.
std::vector<std::string> SettleRebaseJournals(staging::DeletionList* list) {
  std::vector<std::string> lines;
  const std::string store = list->path().substr(0, list->path().rfind('/'));
  DIR* dir = ::opendir(store.c_str());
  if (dir == nullptr) return lines;
  std::vector<std::string> journals;
  while (const dirent* e = ::readdir(dir)) {
    if (absl::StartsWith(e->d_name, kRebaseJournalPrefix)) {
      journals.push_back(absl::StrCat(store, "/", e->d_name));
    }
  }
  ::closedir(dir);
  for (const std::string& j : journals) lines.push_back(SettleRebaseJournal(list, j));
  return lines;
}

}  // namespace

absl::StatusOr<std::string> RebaseObjectEdits(staging::DeletionList* list,
                                              const std::string& edits_dir, const std::string& url,
                                              const staging::DeletedShard& d,
                                              const ShardToRewrite& now) {
  const std::string keys_path = staging::RecordKeysPath(list->path());
  const std::map<uint64_t, staging::ContentKey> keys = staging::LoadContentKeys(keys_path, url);
  // The new object's records by key (their data's length and CRC).
  const std::vector<uint64_t>& offsets = *now.offsets;
  std::map<std::pair<uint64_t, uint32_t>, std::vector<uint64_t>> by_key;
  std::map<uint64_t, staging::ContentKey> new_keys;
  for (uint64_t j = 0; j + 1 < offsets.size(); ++j) {
    char crc[4];
    if (auto s = now.source->ReadFull(offsets[j + 1] - 4, crc, sizeof crc); !s.ok()) return s;
    by_key[{offsets[j + 1] - offsets[j] - 16, DecodeFixed32(crc)}].push_back(j);
  }
  // Old record index -> new one, for the records edits or deletions name.
  const std::string key = staging::ShardKey(url);
  std::map<std::string, std::vector<std::string>> all = staging::ListEditFolders(edits_dir);
  const std::vector<std::string>& folders = all[key];
  std::set<uint64_t> named(d.records.begin(), d.records.end());
  for (const std::string& f : folders) {
    if (auto e = staging::ParseEditFolder(f); e && e->record) named.insert(*e->record);
  }
  std::map<uint64_t, uint64_t> moved;
  std::set<uint64_t> taken;
  std::vector<std::string> left;
  for (uint64_t i : named) {
    auto k = keys.find(i);
    auto m = k == keys.end() ? by_key.end() : by_key.find({k->second.length, k->second.crc});
    if (m == by_key.end() || m->second.size() != 1 || !taken.insert(m->second[0]).second) {
      left.push_back(absl::StrCat("record ", i,
                                  k == keys.end() ? " (no key kept for it)"
                                  : m == by_key.end()
                                      ? " (not in the new object)"
                                      : " (more than one record of the new object has its key)"));
      continue;
    }
    moved[i] = m->second[0];
    new_keys[m->second[0]] = k->second;
  }
  staging::DeletedShard next;
  next.before = staging::ObjectFingerprint(now.object->size(), now.object->etag());
  for (uint64_t i : d.records) {
    if (moved.count(i)) next.records.insert(moved[i]);
  }
  // The edit folders: renamed through temporary names (an old index may be
  // another record's new one), those not applied moved aside; every rename
  // journaled first (see SettleRebaseJournal).
  const std::string store = list->path().substr(0, list->path().rfind('/'));
  const std::string aside = absl::StrCat(store, "/rebase-left");
  RebaseJournal journal;
  journal.url = url;
  journal.after_size = now.object->size();
  journal.after_etag = now.object->etag();
  journal.keys = new_keys;
  uint64_t applied_edits = 0;
  for (const std::string& f : folders) {
    auto e = staging::ParseEditFolder(f);
    if (!e || !e->record) continue;
    const std::string from = absl::StrCat(edits_dir, "/", f);
    auto m = moved.find(*e->record);
    if (m == moved.end()) {
      // (Not over the edit of an earlier rebase kept there.)
      std::string to = absl::StrCat(aside, "/", f);
      for (int n = 1; Exists(to); ++n) to = absl::StrCat(aside, "/", f, ".", n);
      journal.aside.emplace_back(from, to);
      left.push_back(absl::StrCat("  its edit is kept, not applied, in ", to));
      continue;
    }
    const std::string temp = absl::StrCat(edits_dir, "/.rebase-", f);
    journal.aside.emplace_back(from, temp);
    journal.into_place.emplace_back(
        temp, absl::StrCat(edits_dir, "/", staging::EditedFolderName(key, m->second)));
    ++applied_edits;
  }
  const std::string journal_path = RebaseJournalPath(store, url);
  if (!journal.aside.empty()) (void)MakeDirs(aside, 0700);
  if (auto s = WriteFileAtomically(journal_path, EncodeRebaseJournal(journal)); !s.ok()) return s;
  const FaultPoints faults;
  const auto undo = [&](absl::Status s) {
    const std::string line = SettleRebaseJournal(list, journal_path);
    return SetMessage(s, absl::StrCat(s.message(), "; ", line));
  };
  for (const auto& [from, to] : journal.aside) {
    if (::rename(from.c_str(), to.c_str()) != 0) return undo(ErrnoError(errno, "rename " + from));
  }
  // The first renames done: the second ones may take names the first ones
  // freed (said in the journal, so an undo knows which names are whose).
  if (auto s = AppendRebasePhase(journal_path); !s.ok()) return undo(s);
  faults.At("rebase_mid_renames");
  for (const auto& [temp, to] : journal.into_place) {
    if (::rename(temp.c_str(), to.c_str()) != 0) return undo(ErrnoError(errno, "rename " + temp));
  }
  (void)FsyncDir(edits_dir);
  if (!journal.aside.empty()) (void)FsyncDir(aside);
  faults.At("rebase_before_list");
  if (auto s = list->Replace(url, next); !s.ok()) return undo(s);
  faults.At("rebase_after_list");
  if (auto s = staging::ReplaceContentKeys(keys_path, url, new_keys); !s.ok()) {
    log::Warning(s.message());
  }
  ::unlink(journal_path.c_str());
  std::string report = absl::StrCat(
      "rebased onto the object the store holds now (ETag ", now.object->etag(), "): re-applied ",
      applied_edits, " edit(s) and ", next.records.size(), " deletion(s) by record key");
  if (!left.empty()) absl::StrAppend(&report, "; not applied: ", absl::StrJoin(left, ", "));
  return report;
}

namespace {

// After a crash between an object's final write and FollowIndexBeside: the
// index beside the object (KEY.tfri), when it describes another object
// than the one under `key` now (ETag `etag`, `size` bytes), is deleted
// (every reader refuses it by that ETag; deleted, nobody fetches it for
// nothing). Returns the log line ("" for nothing done).
std::string DropStaleIndexBeside(const objstore::BucketWriter& writer, const std::string& key,
                                 const std::string& etag, int64_t size) {
  const std::string beside = absl::StrCat(key, index::kIndexSuffix);
  auto bytes = writer.GetSmall(beside, size_t{256} << 20);
  if (!bytes.ok()) {
    return absl::IsNotFound(bytes.status())
               ? ""
               : absl::StrCat("cannot check ", writer.Name(beside), ": ", bytes.status().message(),
                              " (readers refuse it when stale)");
  }
  auto f = index::DecodeIndexFile(*bytes);
  if (f.ok() && f->file_size == static_cast<uint64_t>(size) &&
      f->ctime_ns == TimespecNs(objstore::EtagStamp(etag))) {
    return "";  // written for the new object before the crash
  }
  if (auto s = writer.Delete(beside); !s.ok()) {
    return absl::StrCat("cannot delete ", writer.Name(beside), ", stale: ", s.message(),
                        " (readers refuse it by the object's ETag)");
  }
  return absl::StrCat("deleted ", writer.Name(beside),
                      ": it described the object before the interrupted rewrite (tfrecordfs "
                      "index --beside writes the new object's)");
}

}  // namespace

std::vector<std::string> RecoverObjectRewrites(staging::DeletionList* list) {
  std::vector<std::string> lines = SettleRebaseJournals(list);
  for (const auto& [url, d] : list->Snapshot()) {
    if (!IsBucketObject(url)) continue;
    auto place = PlaceOf(url);
    if (!place.ok()) {
      lines.push_back(
          absl::StrCat("cannot check the pending edits of ", url, ": ", place.status().message()));
      continue;
    }
    const objstore::BucketWriter writer((*place)->target);
    const std::string& key = (*place)->key;
    auto uploads = writer.ListUploads(key);
    if (!uploads.ok()) {
      lines.push_back(absl::StrCat("cannot list the uploads in flight of ", url, ": ",
                                   uploads.status().message()));
      continue;
    }
    bool in_flight = false;
    for (const auto& u : *uploads) in_flight |= u.key == key;
    if (d.rewriting) {
      std::string etag;
      auto size = writer.Head(key, &etag);
      if (!size.ok()) {
        lines.push_back(absl::StrCat("cannot tell whether the interrupted rewrite of ", url,
                                     " was written: ", size.status().message(),
                                     " (asked again at the next mount)"));
        continue;
      }
      const bool same =
          *size >= 0 && staging::ObjectFingerprint(static_cast<uint64_t>(*size), etag) == d.before;
      if (!same && !in_flight && *size >= 0 && static_cast<uint64_t>(*size) == d.rewriting->size) {
        auto s = list->Forget(url);
        lines.push_back(absl::StrCat("finished the interrupted rewrite of ", url,
                                     " (the store had taken it)",
                                     s.ok() ? "" : absl::StrCat(" (", s.message(), ")")));
        if (std::string line = DropStaleIndexBeside(writer, key, etag, *size); !line.empty()) {
          lines.push_back(std::move(line));
        }
        // The crash may have come before dataset_info.json's update: its
        // shard length set again (idempotent; its numBytes is left).
        if (d.rewritten_records) {
          if (std::string line = FollowTfdsInfo(writer, key, *d.rewritten_records, std::nullopt);
              !line.empty()) {
            lines.push_back(
                absl::StrCat(line, " (the shard's length; its split's numBytes left as it was)"));
          }
        }
        continue;
      }
      (void)list->SetRewriting(url, std::nullopt);
      lines.push_back(
          same ? absl::StrCat("rolled back the interrupted rewrite of ", url,
                              ": the object is as it was; its edits stay pending")
               : absl::StrCat("the interrupted rewrite of ", url,
                              " was not written, and the object was replaced meanwhile by "
                              "another writer; its edits stay pending (tfrecordfs commit "
                              "--rebase re-applies them)"));
    }
    if (in_flight) {
      auto aborted = AbortLeftUploads(writer, key, {key});
      if (aborted.ok()) {
        lines.insert(lines.end(), aborted->begin(), aborted->end());
      } else {
        lines.push_back(absl::StrCat("cannot abort the uploads left for ", url, ": ",
                                     aborted.status().message()));
      }
    }
  }
  return lines;
}

}  // namespace tfrecordfs::repack
