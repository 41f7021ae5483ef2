#include "tfrecordfs/index/shard_index.h"

#include <fcntl.h>

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/arrayrecord/file.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/source/readahead.h"
#include "tfrecordfs/source/snappy_source.h"

namespace tfrecordfs::index {

ShardIndex::ShardIndex(std::string path, uint64_t file_size, int64_t mtime_ns,
                       record::WalkResult walk,
                       std::shared_ptr<const source::CheckpointTable> checkpoints)
    : path_(std::move(path)),
      file_size_(file_size),
      mtime_ns_(mtime_ns),
      offsets_(std::move(walk.offsets)),
      problems_(std::move(walk.problems)),
      checkpoints_(std::move(checkpoints)) {
  // Spare capacity given back only when it is worth a copy (a walk that
  // predicted its record count reserved about 1/32 more).
  if (offsets_.capacity() - offsets_.size() > offsets_.size() / 16) offsets_.shrink_to_fit();
  if (offsets_.empty()) offsets_.push_back(0);
}

std::vector<std::string> FormatProblems(absl::string_view path,
                                        const std::vector<record::WalkProblem>& problems,
                                        size_t max_lines) {
  std::vector<std::string> lines;
  const std::string shown_path = EscapeForLog(path);
  const size_t shown = std::min(problems.size(), max_lines);
  lines.reserve(shown + 1);
  for (size_t i = 0; i < shown; ++i) {
    lines.push_back(absl::StrCat(shown_path, ": byte offset ", problems[i].offset, ": ",
                                 EscapeForLog(problems[i].message)));
  }
  if (problems.size() > shown) {
    lines.push_back(
        absl::StrCat(shown_path, ": ... and ", problems.size() - shown, " more problem(s)"));
  }
  return lines;
}

namespace {

// Strips at least three trailing ASCII digits; false if there are fewer.
bool ConsumeDigits(absl::string_view* s) {
  size_t n = 0;
  while (n < s->size() && (*s)[s->size() - 1 - n] >= '0' && (*s)[s->size() - 1 - n] <= '9') ++n;
  s->remove_suffix(n);
  return n >= 3;
}

// An ArrayRecord file's records, framed (arrayrecord/file.h), walked as
// they are made; its damaged chunks become problems at the framed offset of
// their first record, naming the file byte offset.
absl::StatusOr<WalkedShard> WalkArrayRecord(source::StoredBytes fd, const std::string& path,
                                            uint64_t size,
                                            const std::function<void(uint64_t)>& progress,
                                            uint64_t max_records) {
  record::StreamWalker walker(path, max_records);
  // The footer (at the end) read directly; the chunks, front to back,
  // through parts read ahead on remote storage.
  auto layout = arrayrecord::ReadLayout(fd, path, size);
  if (!layout.ok()) return layout.status();
  std::optional<source::PrefetchReader> ahead;
  source::StoredBytes in = fd;
  if (fd.object() != nullptr || source::OnRemoteStorage(fd.fd())) {
    in = &ahead.emplace(fd, path, size);
  }
  auto scan = arrayrecord::Scan(
      in, path, size, [&](absl::string_view bytes) { return walker.Feed(bytes); }, progress,
      std::move(*layout));
  if (!scan.ok()) return scan.status();
  WalkedShard out;
  if (!walker.Finish(scan->table.data_size)) {
    return absl::InternalError(absl::StrCat(path,
                                            ": the framed records of an ArrayRecord file "
                                            "do not walk (a bug)"));
  }
  out.walk = walker.TakeResult();
  auto table = std::make_shared<source::CheckpointTable>(std::move(scan->table));
  for (const arrayrecord::Problem& p : scan->problems) {
    // The first chunk at or after the problem: its records follow it.
    uint64_t at = table->data_size;
    for (const auto& cp : table->points) {
      if (cp.in >= p.offset && cp.in != 0) {
        at = cp.out;
        break;
      }
    }
    std::string message = p.message;
    // FormatProblems names the path.
    if (absl::StartsWith(message, absl::StrCat(path, ": "))) message.erase(0, path.size() + 2);
    if (message.size() > 4000) message.resize(4000);
    out.walk.problems.push_back({at, std::move(message)});
  }
  std::stable_sort(out.walk.problems.begin(), out.walk.problems.end(),
                   [](const record::WalkProblem& a, const record::WalkProblem& b) {
                     return a.offset < b.offset;
                   });
  out.checkpoints = std::move(table);
  return out;
}

}  // namespace

bool LooksLikeShardName(absl::string_view name) {
  for (absl::string_view ext : {".tfrecord", ".tfrecords", ".record", ".records", ".tfr"}) {
    if (absl::EndsWith(name, ext)) return true;
  }
  if (absl::StrContains(name, "tfrecord")) return true;
  // "...-DDD-of-DDD" (three or more digits each), matched by hand: a
  // std::regex here cost more than the rest of probing a cached shard.
  absl::string_view s = name;
  return ConsumeDigits(&s) && absl::ConsumeSuffix(&s, "-of-") && ConsumeDigits(&s) &&
         absl::EndsWith(s, "-");
}

absl::StatusOr<Probe> ProbeFile(source::StoredBytes fd, absl::string_view path, uint64_t size,
                                source::Codec* codec) {
  if (codec != nullptr) *codec = source::Codec::kNone;
  const bool named = LooksLikeShardName(Basename(path));
  if (size == 0) return named ? Probe::kShard : Probe::kNotShard;
  // One read of the first bytes: a record header (12), or an ArrayRecord
  // (riegeli) file's fixed first 64.
  char first[arrayrecord::kSignatureSize] = {};
  const size_t first_size = static_cast<size_t>(std::min<uint64_t>(size, sizeof first));
  if (absl::Status s = PreadFull(fd, first, first_size, 0, path); !s.ok()) return s;
  if (arrayrecord::HasSignature(absl::string_view(first, first_size))) {
    if (codec != nullptr) *codec = source::Codec::kArrayRecord;
    return Probe::kShard;
  }
  const char* const head = first;
  const size_t head_size = std::min<size_t>(first_size, record::kHeaderSize);
  if (size >= record::kFramingOverhead && record::IsPlausibleHeader(head, 0, size)) {
    return Probe::kShard;
  }
  const source::Codec detected = source::DetectCodec(absl::string_view(head, head_size));
  if (detected != source::Codec::kNone) {
    auto prefix = source::InflatePrefix(fd, path, size, detected, record::kHeaderSize);
    if (!prefix.ok()) return prefix.status();
    const bool header =
        prefix->size() == record::kHeaderSize && record::ParseHeader(prefix->data()).ok();
    // An empty stream: an empty shard if named like one (TensorFlow writes
    // those for empty splits), else some other compressed file.
    bool empty = false;
    if (prefix->empty() && named) {
      auto scan = source::ScanCompressed(fd, path, size, detected, source::kDefaultSpan,
                                         [](absl::string_view) { return absl::OkStatus(); });
      if (!scan.ok()) return scan.status();
      empty = !scan->problem && scan->table.data_size == 0;
    }
    if (header || empty) {
      if (codec != nullptr) *codec = detected;
      return Probe::kShard;
    }
    if (codec != nullptr) *codec = detected;
    return Probe::kNotShard;
  }
  // SNAPPY has no magic: a file whose first block decompresses to a record
  // header is one (a plain shard was ruled out above).
  std::string snappy_head;
  auto snappy = source::SnappyPrefix(fd, path, size, record::kHeaderSize, &snappy_head);
  if (!snappy.ok()) return snappy.status();
  if (*snappy && record::ParseHeader(snappy_head.data()).ok()) {
    if (codec != nullptr) *codec = source::Codec::kSnappy;
    return Probe::kShard;
  }
  if (named) {
    // A shard-like name with a damaged first header: a shard if the walk
    // resynchronises onto a record.
    auto walk = record::WalkHeaders(fd, path, size);
    if (!walk.ok()) return walk.status();
    if (walk->offsets.size() > 1) return Probe::kShard;
  }
  return Probe::kNotShard;
}

absl::StatusOr<WalkedShard> WalkShard(source::StoredBytes fd, const std::string& path,
                                      uint64_t size, source::Codec codec, uint64_t span,
                                      const std::function<void(uint64_t)>& progress, WalkMode mode,
                                      uint64_t max_records) {
  WalkedShard out;
  if (codec == source::Codec::kArrayRecord)
    return WalkArrayRecord(fd, path, size, progress, max_records);
  if (codec == source::Codec::kNone) {
    const bool blocks =
        mode == WalkMode::kBlocks ||
        (mode == WalkMode::kAuto && (fd.object() != nullptr || source::OnRemoteStorage(fd.fd())));
    if (!blocks) {
      auto walk = record::WalkHeaders(source::PlainSource::Borrowing(fd, path, size), 0, 0,
                                      max_records, progress);
      if (!walk.ok()) return walk.status();
      if (progress) progress(size);
      out.walk = std::move(*walk);
      return out;
    }
    // Every byte is read, front to back: several parts in flight ahead of
    // the walk, which then reads them from memory in small blocks.
    source::PrefetchReader ahead(fd, path, size);
    auto walk = record::WalkHeaders(source::PlainSource::Borrowing(&ahead, path, size), 0,
                                    kPrefetchedWalkBlock, max_records, progress);
    if (!walk.ok()) return walk.status();
    if (progress) progress(size);
    out.walk = std::move(*walk);
    return out;
  }
  record::StreamWalker walker(path, max_records);
  // After the first block or chunk, the ratio of the bytes it held to the
  // compressed bytes it took predicts the stream's size (the walker's hint).
  uint64_t compressed_done = 0;  // progress so far (sink and progress share a thread)
  bool hinted = false;
  const auto sink = [&](absl::string_view bytes) {
    if (!hinted && compressed_done > 0) {
      hinted = true;
      const double ratio =
          static_cast<double>(walker.bytes_fed()) / static_cast<double>(compressed_done);
      // The reservation stops at a record per 8 compressed bytes (distinct
      // records' two masked CRCs hardly compress), so a first block that
      // compresses far better than the rest cannot reserve a fortune; a
      // stream of repeated records can hold more, and grows past it.
      walker.ExpectBytes(static_cast<uint64_t>(std::min(ratio * static_cast<double>(size), 1e18)),
                         size / 8);
    }
    return walker.Feed(bytes);
  };
  const auto on_progress = [&](uint64_t compressed) {
    compressed_done = compressed;
    if (progress) progress(compressed);
  };
  // The stream is read front to back once: on remote storage, through
  // parts read ahead (as a plain shard's block walk).
  std::optional<source::PrefetchReader> ahead;
  source::StoredBytes in = fd;
  if (mode != WalkMode::kHeaders && (fd.object() != nullptr || source::OnRemoteStorage(fd.fd()))) {
    in = &ahead.emplace(fd, path, size);
  }
  auto scan = codec == source::Codec::kSnappy
                  ? source::ScanSnappy(in, path, size, sink, on_progress)
                  : source::ScanCompressed(in, path, size, codec, span, sink, on_progress,
                                           /*isal=*/true, [&] {
                                             // The scan starts over (see ScanCompressed).
                                             walker = record::StreamWalker(path, max_records);
                                             hinted = false;
                                           });
  if (!scan.ok()) return scan.status();
  auto table = std::make_shared<source::CheckpointTable>(std::move(scan->table));
  out.windows_blob = std::move(scan->windows_blob);
  if (walker.Finish(table->data_size)) {
    out.walk = walker.TakeResult();
  } else {
    // Damaged records inside the stream: walk the decompressed bytes again,
    // resynchronising as on a plain shard.
    source::BlockCache cache(size_t{8} << 20);
    std::optional<source::ShardFile> file;
    if (fd.object() != nullptr) {
      file.emplace(source::ShardFile::Borrowed(fd, path));
    } else {
      auto dup = OpenFile(absl::StrCat("/proc/self/fd/", fd.fd()), O_RDONLY | O_CLOEXEC);
      if (!dup.ok()) return dup.status();
      file.emplace(std::move(*dup), path);
    }
    std::unique_ptr<source::ShardSource> src;
    if (codec == source::Codec::kSnappy) {
      src = std::make_unique<source::SnappySource>(std::move(*file), size, table, &cache);
    } else {
      src = std::make_unique<source::InflateSource>(std::move(*file), size, table, &cache);
    }
    auto walk = record::WalkHeaders(*src, 0, 0, max_records);
    if (!walk.ok()) return walk.status();
    out.walk = std::move(*walk);
  }
  if (scan->problem) {
    out.walk.problems.push_back(
        {scan->problem->offset,
         absl::StrCat("the ", source::CodecName(codec), " stream ends at compressed byte offset ",
                      scan->problem->compressed_offset, ": ", scan->problem->message,
                      "; records after it are not shown")});
  }
  out.checkpoints = std::move(table);
  return out;
}

absl::StatusOr<std::shared_ptr<const ShardIndex>> BuildShardIndex(source::StoredBytes fd,
                                                                  const std::string& path,
                                                                  const struct stat& st,
                                                                  source::Codec codec,
                                                                  uint64_t max_records) {
  auto walked = WalkShard(fd, path, static_cast<uint64_t>(st.st_size), codec, source::kDefaultSpan,
                          nullptr, WalkMode::kAuto, max_records);
  if (!walked.ok()) return walked.status();
  const int64_t mtime_ns = MtimeNs(st);
  return std::make_shared<const ShardIndex>(path, static_cast<uint64_t>(st.st_size), mtime_ns,
                                            std::move(walked->walk),
                                            std::move(walked->checkpoints));
}

}  // namespace tfrecordfs::index
