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

// Bytes of a reason kept in kErrorXattr (a reason is a line or two; the cap
// keeps every flag readable with one small buffer).
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
  // A SequenceExample or an ExampleListWithContext: context/ is a section.
  const auto has_dir = [&](absl::string_view name) {
    return ::stat(absl::StrCat(records_dir_, "/", record, "/", name).c_str(), &st) == 0 &&
           S_ISDIR(st.st_mode);
  };
  const bool sequence = has_dir(naming::kFeatureListsDir) || has_dir(naming::kExamplesDir) ||
                        has_dir(naming::kEieExamplesDir);
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
  // Info, not a warning: a flag holds only until the file is written again,
  // and what still holds is said where it matters (the pack's and the
  // commit's reports, `status`, the file's `error` attribute); the unmount
  // repeats the log's warnings, which must be ones that hold.
  if (refusals_.fetch_add(1, std::memory_order_relaxed) == 0) {
    // The first of the mount: on the terminal of a foreground mount, say
    // where the reasons can be read again (the write itself succeeded).
    log::Info(what,
              " (the first flag of this mount; `getfattr -n user.tfrecordfs.error FILE`"
              " gives a file's reason, `tfrecordfs status MOUNTPOINT` lists every staged"
              " record and why it would stay staged)");
    return;
  }
  log::Info(what);
}

void StagedFileChecker::Flag(int fd, const std::string& rel, absl::string_view why) {
  const std::string mark(why.substr(0, kMaxMark));
  if (::fsetxattr(fd, kErrorXattr, mark.data(), mark.size(), 0) != 0) {
    log::Warning(nodes_.Shown(rel), ": cannot flag the file (", std::strerror(errno),
                 "); the pack and the commit still refuse its record, with the same reason");
  }
  LogRefusal(absl::StrCat(nodes_.Shown(rel), ": ", why,
                          " (flagged: its record is not packed, nor its shard committed, until"
                          " the file is written again with content that passes)"));
}

absl::Status StagedFileChecker::ValidateOnClose(uint64_t node, int fd,
                                                naming::FeatureTypes& types) {
  {
    MutexLock lock(&mu_);
    written_.erase(node);  // checked now, whoever asked
  }
  auto rel = nodes_.RelativePath(node);
  if (!rel.ok()) return absl::OkStatus();  // deleted meanwhile: nothing to check
  const Verdict v = Judge(Place(*rel, types), fd, /*unknown_too=*/false);
  if (v.judged && !v.status.ok()) {
    if (!absl::IsInvalidArgument(v.status)) return v.status;
    Flag(fd, *rel, v.status.message());
    return absl::OkStatus();
  }
  ::fremovexattr(fd, kErrorXattr);  // judged as it is now: no flag stands
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
  if (v.judged && !v.status.ok()) {
    if (!absl::IsInvalidArgument(v.status)) return v.status;
    Flag(fd.get(), to_rel, v.status.message());
    return absl::OkStatus();
  }
  // Passes under its new name, or is not judged by it (the pack judges it
  // by its content): a flag from its old name no longer holds.
  ::fremovexattr(fd.get(), kErrorXattr);
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
