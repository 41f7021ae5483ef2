#include "tfrecordfs/staging/staged_file_checker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/staging/record_folder.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"

namespace tfrecordfs::staging {

namespace {

// Bytes of a refusal reason kept in kErrorXattr (a reason is a line or two;
// the cap keeps every mark readable with one small buffer).
constexpr size_t kMaxMark = 1000;

// Up to `n` bytes at `offset` of the file open as `fd` (which may be
// write-only: read through a fresh read-only open of it).
absl::StatusOr<std::string> ReadAt(int fd, uint64_t offset, uint64_t n) {
  auto own = OpenFile(ProcFdPath(fd), O_RDONLY | O_CLOEXEC);
  if (!own.ok()) return own.status();
  std::string out(n, '\0');
  auto got = PreadUpTo(own->get(), out.data(), out.size(), offset, "staging");
  if (!got.ok()) return got.status();
  out.resize(*got);
  return out;
}

}  // namespace

void StagedFileChecker::NoteWritten(uint64_t node, naming::FeatureTypes& types, int fd) {
  {
    MutexLock lock(&mu_);
    written_.insert(node);
  }
  if (fd < 0) return;
  // A file that looks whole now is checked now, so that its kind is
  // remembered even if the daemon dies before the kernel forgets it.
  auto rel = nodes_.RelativePath(node);
  if (!rel.ok()) return;
  if (ClassifyStagedFile(*rel, true).role == StagedFile::Role::kOther &&
      ClassifyStagedFile(*rel, false).role == StagedFile::Role::kOther) {
    return;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const Placed placed = Place(*rel, types);
  bool whole = false;
  if (placed.file.role == StagedFile::Role::kNumeric) {
    auto tail = size == 0 ? absl::StatusOr<std::string>("\n") : ReadAt(fd, size - 1, 1);
    whole = size <= kMaxCheckedOnWrite && tail.ok() && *tail == "\n";
  } else if (placed.file.role == StagedFile::Role::kArray) {
    const uint64_t trailer = tensor::kPngTrailer.size();
    if (placed.file.extension == naming::kPngExtension && size >= trailer) {
      auto tail = ReadAt(fd, size - trailer, trailer);
      whole = tail.ok() && *tail == tensor::kPngTrailer;
    } else if (placed.file.extension == naming::kNpyExtension && size >= 12) {
      auto head = ReadAt(fd, 0, 12);  // up to the header length, then the header
      const uint64_t need = head.ok() ? tensor::NpyDataOffset(*head) : 0;
      if (need > 12) head = ReadAt(fd, 0, std::min<uint64_t>(need, kMaxCheckedOnWrite));
      if (head.ok()) {
        auto header = tensor::ParseNpyHeader(*head);
        whole = header.ok() && header->has_value() &&
                (*header)->data_offset + (*header)->data_bytes == size;
      }
    }
  }
  if (whole) (void)ValidateOnClose(node, fd, types);
}

bool StagedFileChecker::IsWritten(uint64_t node) {
  MutexLock lock(&mu_);
  return written_.contains(node);
}

absl::Status StagedFileChecker::CheckWritten(uint64_t node, naming::FeatureTypes& types) {
  {
    MutexLock lock(&mu_);
    if (written_.erase(node) == 0) return absl::OkStatus();
  }
  auto fd = nodes_.Open(node, O_RDONLY);
  if (!fd.ok()) return absl::OkStatus();  // removed meanwhile: nothing to check
  UniqueFd own(*fd);
  return ValidateOnClose(node, own.get(), types);
}

void StagedFileChecker::CheckAllWritten(naming::FeatureTypes& types) {
  std::vector<uint64_t> nodes;
  {
    MutexLock lock(&mu_);
    nodes.assign(written_.begin(), written_.end());
  }
  for (uint64_t node : nodes) (void)CheckWritten(node, types);
}

StagedFileChecker::Placed StagedFileChecker::Place(const std::string& rel,
                                                   naming::FeatureTypes& types) {
  const std::string record = rel.substr(0, rel.find('/'));
  struct stat st;
  const bool sequence =
      ::stat(absl::StrCat(records_dir_, "/", record, "/", naming::kFeatureListsDir).c_str(), &st) ==
          0 &&
      S_ISDIR(st.st_mode);
  Placed p{ClassifyStagedFile(rel, sequence), {}};
  if (p.file.role == StagedFile::Role::kOther) return p;
  p.type = types.Lookup(p.file.feature);
  if (!sequence && p.type.kind == example::Kind::kNone &&
      absl::StartsWith(rel, absl::StrCat(record, "/", naming::kContextDir, "/"))) {
    Placed as_context{ClassifyStagedFile(rel, /*sequence=*/true), {}};
    if (as_context.file.role != StagedFile::Role::kOther) {
      as_context.type = types.Lookup(as_context.file.feature);
      if (as_context.type.kind != example::Kind::kNone) return as_context;
    }
  }
  return p;
}

absl::Status StagedFileChecker::ValidateOnWrite(uint64_t node, int fd, uint64_t offset,
                                                absl::string_view data,
                                                naming::FeatureTypes& types) {
  auto rel = nodes_.RelativePath(node);
  if (!rel.ok()) return absl::OkStatus();  // deleted meanwhile: nothing to check
  // Cheap test first: most writes are to files no check applies to.
  if (ClassifyStagedFile(*rel, true).role == StagedFile::Role::kOther &&
      ClassifyStagedFile(*rel, false).role == StagedFile::Role::kOther) {
    return absl::OkStatus();
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return absl::OkStatus();  // ValidateOnClose will say
  const uint64_t old_size = static_cast<uint64_t>(st.st_size);
  const uint64_t end = offset + data.size();
  const Placed placed = Place(*rel, types);
  auto refuse = [&](absl::string_view why) {
    // The bytes never land: mark the file so that its record stays staged
    // until it is written again (kErrorXattr), with a reason a user can read.
    std::string mark = absl::StrCat("write refused: ", why);
    if (mark.size() > kMaxMark) mark.resize(kMaxMark);
    if (::fsetxattr(fd, kErrorXattr, mark.data(), mark.size(), 0) != 0) {
      log::Warning(nodes_.Shown(*rel), ": cannot mark the file as refused (", std::strerror(errno),
                   "); its record may be packed with what the file held before the write");
    }
    {
      MutexLock lock(&mu_);
      refused_.insert(node);
    }
    LogRefusal(absl::StrCat(nodes_.Shown(*rel), ": write refused: ", why));
    return PosixError(EINVAL, absl::StrCat(nodes_.Shown(*rel), ": ", why));
  };
  // The first `n` bytes of the file as they would be after this write.
  auto after_write = [&](uint64_t n) -> absl::StatusOr<std::string> {
    std::string after;
    if (old_size > 0) {
      auto content = ReadAt(fd, 0, std::min(n, old_size));
      if (!content.ok()) return content.status();
      after = std::move(*content);
    }
    if (offset < n) {
      if (after.size() < std::min(end, n)) after.resize(std::min(end, n), '\0');
      const size_t k = static_cast<size_t>(std::min<uint64_t>(data.size(), n - offset));
      after.replace(offset, k, data.data(), k);
    }
    return after;
  };
  if (placed.file.role == StagedFile::Role::kArray) {
    // The shards' types, else (a name they do not know) the file's tag: a
    // file checked as a tensor before. A new file under a temporary name
    // has neither and is judged at its rename.
    std::vector<tensor::TensorType> want = placed.type.tensors;
    if (placed.type.kind == example::Kind::kNone) want = KindTagOf(fd).tensors;
    if (want.empty()) return absl::OkStatus();
    if (placed.file.extension == naming::kPngExtension && offset >= tensor::kPngHeaderBytes) {
      return absl::OkStatus();
    }
    // Only a write that lands in the header (or before its end is known)
    // can change what is decided there.
    uint64_t header_end = 0;
    auto head = after_write(std::min<uint64_t>(std::max(old_size, end), 16));
    if (!head.ok()) return absl::OkStatus();  // ValidateOnClose will say
    (void)CheckTensorFilePrefix(placed.file.extension, *head, want, &header_end);
    uint64_t need = header_end;
    if (need == 0 && placed.file.extension == naming::kNpyExtension && head->size() >= 12) {
      need = tensor::NpyDataOffset(*head);  // the header's end, before the header is there
    }
    need = std::min(need != 0 ? need : kMaxCheckedOnWrite, kMaxCheckedOnWrite);
    if (offset >= need) return absl::OkStatus();
    auto prefix = after_write(need);
    if (!prefix.ok()) return absl::OkStatus();
    if (auto s = CheckTensorFilePrefix(placed.file.extension, *prefix, want, &header_end);
        !s.ok()) {
      return refuse(s.message());
    }
    return absl::OkStatus();
  }
  if (placed.file.role != StagedFile::Role::kNumeric) return absl::OkStatus();
  // A name the shards do not know may be a tool's temporary file (sed's
  // `sedXXXXXX` holding text): judged once its name is final.
  if (placed.type.kind == example::Kind::kNone) return absl::OkStatus();
  if (std::max(old_size, end) > kMaxCheckedOnWrite) return absl::OkStatus();
  auto content = after_write(std::max(old_size, end));
  if (!content.ok()) return absl::OkStatus();  // ValidateOnClose will say
  const std::string& after = *content;
  const size_t last_newline = after.rfind('\n');
  const size_t tail_start = last_newline == std::string::npos ? 0 : last_newline + 1;
  if (last_newline != std::string::npos) {
    const absl::string_view complete(after.data(), last_newline + 1);
    auto kind = ValidateNumeric(complete, placed.type.kind);
    if (!kind.ok()) return refuse(kind.status().message());
  }
  // The unterminated rest must still be able to become a value.
  if (auto s = CheckNumericPrefix(absl::string_view(after).substr(tail_start), placed.type.kind);
      !s.ok()) {
    return refuse(s.message());
  }
  return absl::OkStatus();
}

StagedFileChecker::Verdict StagedFileChecker::Judge(const Placed& placed, int fd,
                                                    bool unknown_too) {
  Verdict v;
  const naming::FeatureType& type = placed.type;
  switch (placed.file.role) {
    case StagedFile::Role::kOther:
      return v;
    case StagedFile::Role::kNumeric: {
      example::Kind kind = type.kind;
      if (kind == example::Kind::kNone) {
        // Only the pack's view (ErrorOf) judges a name the shards do not
        // know, with the kind the pack would take: the tag, else the content.
        v.tag = "";  // a rewrite under such a name: the content decides
        if (!unknown_too) return v;
        v.tag.reset();
        kind = KindTagOf(fd).kind;
      }
      v.judged = true;
      auto content = ReadFileToString(ProcFdPath(fd));
      if (!content.ok()) {
        v.status = content.status();
        return v;
      }
      auto parsed = ValidateNumeric(*content, kind);
      if (!parsed.ok()) {
        v.status = absl::InvalidArgumentError(parsed.status().message());
        return v;
      }
      // Remember the kind the mounted shards gave this feature, so that the
      // pack after a restart (when no shard record may be read again) keeps
      // it; with no such kind the content decides at pack time.
      if (type.kind == example::Kind::kInt64 || type.kind == example::Kind::kFloat) {
        v.tag = type.kind == example::Kind::kFloat ? "float" : "int64";
      } else if (type.kind != example::Kind::kNone) {
        v.tag = "";
      }
      return v;
    }
    case StagedFile::Role::kArray: {
      // As the pack decides (record_folder.h): the shards' type, else the
      // file's tag; neither makes the file exact bytes.
      std::vector<tensor::TensorType> want = type.tensors;
      if (type.kind == example::Kind::kNone) want = KindTagOf(fd).tensors;
      if (want.empty()) {
        if (type.kind != example::Kind::kNone) v.tag = "";
        return v;
      }
      v.judged = true;
      auto content = ReadFileToString(ProcFdPath(fd));
      if (!content.ok()) {
        v.status = content.status();
        return v;
      }
      auto matched = CheckTensorFile(placed.file.extension, *content, want);
      if (!matched.ok()) {
        v.status = absl::InvalidArgumentError(matched.status().message());
        return v;
      }
      // The type it matched: after a restart the file alone says what it is.
      v.tag = TensorTag(*matched);
      return v;
    }
  }
  return v;
}

namespace {

void SetTag(int fd, const std::optional<std::string>& tag) {
  if (!tag) return;
  if (tag->empty()) {
    ::fremovexattr(fd, kKindXattr);
  } else {
    ::fsetxattr(fd, kKindXattr, tag->data(), tag->size(), 0);  // best effort (tmpfs may refuse)
  }
}

// The refusal mark of the file open as `fd`, if any.
std::optional<std::string> MarkOf(int fd) {
  char buf[1024];
  const ssize_t n = ::fgetxattr(fd, kErrorXattr, buf, sizeof buf);
  if (n >= 0) return std::string(buf, static_cast<size_t>(n));
  if (errno == ERANGE) return std::string(buf, sizeof buf);
  return std::nullopt;
}

}  // namespace

void StagedFileChecker::LogRefusal(absl::string_view what) {
  // Info, not a warning: a refusal holds only until the file is written
  // again, and what still holds is said where it matters (the pack's and
  // the commit's reports, `status`, the file's `error` attribute); the
  // unmount repeats the log's warnings, which must be ones that hold.
  if (refusals_.fetch_add(1, std::memory_order_relaxed) == 0) {
    // The first of the mount: on the terminal of a foreground mount, say
    // where the reasons can be read again (the shell said only EINVAL).
    log::Info(what,
              " (the first refusal of this mount; `getfattr -n user.tfrecordfs.error FILE`"
              " gives a file's reason, `tfrecordfs status MOUNTPOINT` lists every staged"
              " record and why it would stay staged)");
    return;
  }
  log::Info(what);
}

void StagedFileChecker::NoteRewritten(uint64_t node) {
  MutexLock lock(&mu_);
  refused_.erase(node);
}

absl::Status StagedFileChecker::ValidateOnClose(uint64_t node, int fd,
                                                naming::FeatureTypes& types) {
  bool still_refused = false;
  {
    MutexLock lock(&mu_);
    written_.erase(node);  // checked now, whoever asked
    still_refused = refused_.contains(node);
  }
  auto rel = nodes_.RelativePath(node);
  if (!rel.ok()) return absl::OkStatus();  // deleted meanwhile: nothing to check
  if (still_refused) {
    // Not written since a write was refused: the mark stands (and was
    // logged when the write was refused).
    if (auto mark = MarkOf(fd)) {
      return PosixError(EINVAL, absl::StrCat(nodes_.Shown(*rel), ": ", *mark));
    }
  } else {
    ::fremovexattr(fd, kErrorXattr);  // written again: judged as it is now
  }
  const Verdict v = Judge(Place(*rel, types), fd, /*unknown_too=*/false);
  if (v.judged && !v.status.ok()) {
    if (!absl::IsInvalidArgument(v.status)) return v.status;
    LogRefusal(
        absl::StrCat(nodes_.Shown(*rel), ": ", v.status.message(),
                     "; the record stays staged and will not be packed until this is fixed"));
    return PosixError(EINVAL, absl::StrCat(nodes_.Shown(*rel), ": ", v.status.message()));
  }
  SetTag(fd, v.tag);
  return absl::OkStatus();
}

absl::Status StagedFileChecker::CheckRenamed(int parent_fd, const std::string& name,
                                             const std::string& to_rel,
                                             naming::FeatureTypes& types) {
  UniqueFd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  // Gone (renameat2 will say) or unreadable to the daemon: the pack judges.
  if (!fd.valid()) return absl::OkStatus();
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return absl::OkStatus();
  const Verdict v = Judge(Place(to_rel, types), fd.get(), /*unknown_too=*/false);
  if (!v.judged) return absl::OkStatus();
  if (!v.status.ok()) {
    if (!absl::IsInvalidArgument(v.status)) return v.status;
    LogRefusal(
        absl::StrCat(nodes_.Shown(to_rel), ": rename of ", name, " refused: ", v.status.message()));
    return PosixError(EINVAL, absl::StrCat(nodes_.Shown(to_rel), ": ", v.status.message()));
  }
  SetTag(fd.get(), v.tag);
  return absl::OkStatus();
}

bool StagedFileChecker::HasRefusalMark(uint64_t node) {
  auto nfd = nodes_.NodeFd(node);
  if (!nfd.ok()) return false;
  UniqueFd fd(::open(ProcFdPath((*nfd)->get()).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  return fd.valid() && MarkOf(fd.get()).has_value();
}

absl::StatusOr<std::string> StagedFileChecker::ErrorOf(uint64_t node, naming::FeatureTypes& types) {
  auto rel = nodes_.RelativePath(node);
  if (!rel.ok()) return rel.status();
  auto none = [] { return absl::NotFoundError("nothing refused"); };
  if (rel->empty()) return none();
  auto nfd = nodes_.NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  struct stat st;
  if (::fstatat((*nfd)->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(errno, nodes_.Shown(*rel));
  }
  const bool top = rel->find('/') == std::string::npos;
  if (S_ISDIR(st.st_mode)) {
    if (!top || naming::IsIgnoredName(*rel)) return none();
    auto payload = PayloadFromFolder(absl::StrCat(records_dir_, "/", *rel), types);
    if (payload.ok()) return none();
    return std::string(payload.status().message());
  }
  if (!S_ISREG(st.st_mode)) return none();
  if (top) {
    if (naming::IsIgnoredName(*rel)) return none();
    return std::string(kLooseFileReason);
  }
  UniqueFd fd(::open(ProcFdPath((*nfd)->get()).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, nodes_.Shown(*rel));
  if (auto mark = MarkOf(fd.get())) return *mark;
  const Verdict v = Judge(Place(*rel, types), fd.get(), /*unknown_too=*/true);
  if (v.judged && !v.status.ok()) return std::string(v.status.message());
  return none();
}

}  // namespace tfrecordfs::staging
