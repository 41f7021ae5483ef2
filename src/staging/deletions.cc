#include "tfrecordfs/staging/deletions.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/hash.h"

namespace tfrecordfs::staging {
namespace {

std::string FingerprintText(const Fingerprint& fp) {
  return absl::StrCat(fp.size, " ", fp.mtime_ns, " ", fp.inode);
}

bool ParseFingerprint(const std::vector<absl::string_view>& f, size_t at, Fingerprint* fp) {
  return f.size() > at + 2 && absl::SimpleAtoi(f[at], &fp->size) &&
         absl::SimpleAtoi(f[at + 1], &fp->mtime_ns) && absl::SimpleAtoi(f[at + 2], &fp->inode);
}

}  // namespace

std::string DeletionsPath(absl::string_view store_dir) {
  return absl::StrCat(store_dir, "/deleted-records");
}

Fingerprint FingerprintOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_size),
          int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<uint64_t>(st.st_ino)};
}

Fingerprint ObjectFingerprint(uint64_t size, absl::string_view etag) {
  return {size, 0, Fnv1a64(etag)};
}

std::string EncodeDeletions(const Deletions& deletions) {
  std::string out = absl::StrCat(kDeletionsMagic, " ", kDeletionsVersion, "\n");
  for (const auto& [path, shard] : deletions) {
    absl::StrAppend(&out, "shard ", FingerprintText(shard.before), " ", absl::CEscape(path), "\n");
    if (shard.rewriting) {
      absl::StrAppend(&out, "rewriting ", FingerprintText(*shard.rewriting), "\n");
      if (shard.rewritten_records) {
        absl::StrAppend(&out, "records ", *shard.rewritten_records, "\n");
      }
    }
    for (uint64_t r : shard.records) absl::StrAppend(&out, "delete ", r, "\n");
  }
  absl::StrAppend(&out, "crc32c ", absl::StrFormat("%08x", crc32c::Value(out)), "\n");
  return out;
}

absl::StatusOr<Deletions> ParseDeletions(absl::string_view contents, absl::string_view path) {
  auto bad = [&](size_t line, absl::string_view why) {
    return absl::DataLossError(absl::StrCat(path, ": line ", line, ": ", why,
                                            " (a damaged deletion list: the deletions it held "
                                            "are not applied; remove it to drop them)"));
  };
  if (contents.empty() || contents.back() != '\n') return bad(1, "torn (no final newline)");
  const size_t crc_line = contents.rfind('\n', contents.size() - 2);
  if (crc_line == absl::string_view::npos) return bad(1, "no checksum line");
  const absl::string_view body = contents.substr(0, crc_line + 1);
  absl::string_view last = contents.substr(crc_line + 1, contents.size() - crc_line - 2);
  uint32_t stored = 0;
  if (!absl::ConsumePrefix(&last, "crc32c ") || last.size() != 8 ||
      !absl::SimpleHexAtoi(last, &stored)) {
    return bad(1, "no checksum line");
  }
  if (stored != crc32c::Value(body)) return bad(1, "checksum mismatch");
  std::vector<absl::string_view> lines = absl::StrSplit(body.substr(0, body.size() - 1), '\n');
  const std::string magic = absl::StrCat(kDeletionsMagic, " ", kDeletionsVersion);
  if (lines.empty() || lines[0] != magic) {
    if (!lines.empty() && absl::StartsWith(lines[0], kDeletionsMagic)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": written by a newer tfrecordfs (", lines[0], ")"));
    }
    return bad(1, "not a tfrecordfs deletion list");
  }
  Deletions out;
  DeletedShard* cur = nullptr;
  for (size_t i = 1; i < lines.size(); ++i) {
    // The path, last, may hold spaces (CEscape leaves them).
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], absl::MaxSplits(' ', 4));
    if (f[0] == "shard" && f.size() == 5) {
      Fingerprint fp;
      std::string shard;
      if (!ParseFingerprint(f, 1, &fp) || !absl::CUnescape(f[4], &shard) || shard.empty() ||
          !(shard[0] == '/' || absl::StartsWith(shard, "s3://") ||
            absl::StartsWith(shard, "gs://")) ||
          out.count(shard)) {
        return bad(i + 1, "bad shard line");
      }
      cur = &out[shard];
      cur->before = fp;
    } else if (f[0] == "rewriting" && f.size() == 4 && cur != nullptr && !cur->rewriting) {
      Fingerprint fp;
      if (!ParseFingerprint(f, 1, &fp)) return bad(i + 1, "bad rewriting line");
      cur->rewriting = fp;
    } else if (f[0] == "records" && f.size() == 2 && cur != nullptr && cur->rewriting &&
               !cur->rewritten_records) {
      uint64_t n;
      if (!absl::SimpleAtoi(f[1], &n)) return bad(i + 1, "bad records line");
      cur->rewritten_records = n;
    } else if (f[0] == "delete" && f.size() == 2 && cur != nullptr) {
      uint64_t r;
      if (!absl::SimpleAtoi(f[1], &r) || !cur->records.insert(r).second) {
        return bad(i + 1, "bad delete line");
      }
    } else {
      return bad(i + 1, "unknown line");
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<DeletionList>> DeletionList::Load(std::string path, bool read_only) {
  Deletions d;
  auto contents = ReadFileToString(path);
  if (contents.ok()) {
    auto parsed = ParseDeletions(*contents, path);
    if (!parsed.ok()) return parsed.status();
    d = *std::move(parsed);
  } else if (!absl::IsNotFound(contents.status()) && ErrnoOf(contents.status()) != ENOENT) {
    return contents.status();
  }
  return std::unique_ptr<DeletionList>(new DeletionList(std::move(path), read_only, std::move(d)));
}

absl::Status DeletionList::Save(Deletions next) {
  if (read_only_) return PosixError(EROFS, absl::StrCat(path_, ": opened read-only"));
  if (next.empty()) {
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return ErrnoError(errno, path_);
    const size_t slash = path_.rfind('/');
    if (auto s = FsyncDir(slash == std::string::npos ? "." : path_.substr(0, slash)); !s.ok()) {
      return s;
    }
  } else if (auto s = WriteFileAtomically(path_, EncodeDeletions(next)); !s.ok()) {
    return s;
  }
  d_ = std::move(next);
  return absl::OkStatus();
}

absl::Status DeletionList::Delete(const std::string& shard, const Fingerprint& fp,
                                  uint64_t record) {
  MutexLock lock(&mu_);
  Deletions next = d_;
  auto [it, added] = next.try_emplace(shard);
  if (added) {
    it->second.before = fp;
  } else if (!(it->second.before == fp)) {
    return absl::FailedPreconditionError(
        absl::StrCat(shard, ": changed since its first deletion; record ", record, " not deleted"));
  }
  if (!it->second.records.insert(record).second) return absl::OkStatus();
  return Save(std::move(next));
}

absl::Status DeletionList::SetRewriting(const std::string& shard, std::optional<Fingerprint> fp,
                                        std::optional<uint64_t> records) {
  MutexLock lock(&mu_);
  Deletions next = d_;
  auto it = next.find(shard);
  if (it == next.end()) return absl::NotFoundError(absl::StrCat(shard, ": no deletions"));
  it->second.rewriting = fp;
  it->second.rewritten_records = fp ? records : std::nullopt;
  return Save(std::move(next));
}

absl::Status DeletionList::Register(const std::string& shard, const Fingerprint& fp) {
  MutexLock lock(&mu_);
  auto it = d_.find(shard);
  if (it != d_.end()) {
    if (it->second.before == fp) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(shard, ": changed since its first edit; not edited"));
  }
  Deletions next = d_;
  next[shard].before = fp;
  return Save(std::move(next));
}

absl::Status DeletionList::Forget(const std::string& shard) {
  MutexLock lock(&mu_);
  Deletions next = d_;
  if (next.erase(shard) == 0) return absl::OkStatus();
  return Save(std::move(next));
}

absl::Status DeletionList::Replace(const std::string& shard, const DeletedShard& next_entry) {
  MutexLock lock(&mu_);
  Deletions next = d_;
  next[shard] = next_entry;
  return Save(std::move(next));
}

Deletions DeletionList::Snapshot() const {
  MutexLock lock(&mu_);
  return d_;
}

bool DeletionList::Contains(const std::string& shard, uint64_t record) const {
  MutexLock lock(&mu_);
  auto it = d_.find(shard);
  return it != d_.end() && it->second.records.count(record) > 0;
}

std::string RecordKeysPath(absl::string_view list_path) {
  const size_t slash = list_path.rfind('/');
  return absl::StrCat(slash == absl::string_view::npos ? "." : list_path.substr(0, slash),
                      "/record-keys");
}

namespace {

std::string KeyLine(const std::string& shard, uint64_t record, ContentKey key) {
  return absl::StrCat(key.length, " ", key.crc, " ", record, " ", absl::CEscape(shard), "\n");
}

// Calls `each` with every well-formed line's fields.
void ForEachKeyLine(const std::string& path,
                    const std::function<void(const std::string& shard, uint64_t, ContentKey,
                                             absl::string_view)>& each) {
  auto contents = ReadFileToString(path);
  if (!contents.ok()) return;
  for (absl::string_view line : absl::StrSplit(*contents, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    ContentKey key;
    uint64_t record = 0;
    std::string shard;
    if (f.size() != 4 || !absl::SimpleAtoi(f[0], &key.length) ||
        !absl::SimpleAtoi(f[1], &key.crc) || !absl::SimpleAtoi(f[2], &record) ||
        !absl::CUnescape(f[3], &shard)) {
      continue;
    }
    each(shard, record, key, line);
  }
}

}  // namespace

absl::Status AppendContentKey(const std::string& path, const std::string& shard, uint64_t record,
                              ContentKey key) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (!fd.ok()) return fd.status();
  const std::string line = KeyLine(shard, record, key);
  if (auto s = WriteFull(fd->get(), line.data(), line.size(), path); !s.ok()) return s;
  if (::fdatasync(fd->get()) != 0) return ErrnoError(errno, absl::StrCat("fdatasync ", path));
  return absl::OkStatus();
}

std::map<uint64_t, ContentKey> LoadContentKeys(const std::string& path, const std::string& shard) {
  std::map<uint64_t, ContentKey> out;
  ForEachKeyLine(path,
                 [&](const std::string& s, uint64_t record, ContentKey key, absl::string_view) {
                   if (s == shard) out[record] = key;
                 });
  return out;
}

absl::Status ReplaceContentKeys(const std::string& path, const std::string& shard,
                                const std::map<uint64_t, ContentKey>& keys) {
  std::string next;
  ForEachKeyLine(path, [&](const std::string& s, uint64_t, ContentKey, absl::string_view line) {
    if (s != shard) absl::StrAppend(&next, line, "\n");
  });
  for (const auto& [record, key] : keys) next += KeyLine(shard, record, key);
  if (next.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError(errno, path);
    return absl::OkStatus();
  }
  return WriteFileAtomically(path, next);
}

}  // namespace tfrecordfs::staging
