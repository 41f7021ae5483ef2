// The two-pass shuffle (shuffle.h).
//
// A run file is a sequence of entries sorted by (key, file, record):
//
//   +---------+----------+------------+-------------+-----------------+
//   | key u64 | file u64 | record u64 | length u64  | payload (length) |
//   +---------+----------+------------+-------------+-----------------+
//   (little-endian; 32 bytes of header)
//
// and run-NNNNN.idx holds M + 1 u64 LE: the offset in the run where each
// bucket's entries begin, then the run's size.
#include "tfrecordfs/reshape/shuffle.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "absl/numeric/int128.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/reshape/internal.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/repack/pack.h"

namespace tfrecordfs::reshape {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
constexpr size_t kEntryHeader = 32;
constexpr uint64_t kFramingBytes = 16;  // a TFRecord's header and footer
constexpr char kBucketsFile[] = "buckets.bin";

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint32_t BucketOf(uint64_t key, uint32_t buckets) {
  return static_cast<uint32_t>(absl::Uint128High64(absl::uint128(key) * buckets));
}

// The least key of bucket b: ceil(b * 2^64 / M) (2^64 for b = M).
absl::uint128 BucketStart(uint64_t b, uint32_t buckets) {
  const absl::uint128 num = absl::uint128(b) << 64;
  return (num + buckets - 1) / buckets;
}

void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string RunName(size_t n) { return absl::StrFormat("run-%05d", n); }

struct Entry {
  uint64_t key, file, record;
  uint64_t at;  // of the payload in the arena
  uint64_t length;
};

bool Before(const Entry& a, const Entry& b) {
  if (a.key != b.key) return a.key < b.key;
  if (a.file != b.file) return a.file < b.file;
  return a.record < b.record;
}

// Appends bytes to a file through `*buf` (the caller's, kept from file to
// file: a buffer allocated per file would be faulted in again each time).
class Out {
 public:
  Out(UniqueFd fd, std::string path, std::string* buf)
      : fd_(std::move(fd)), path_(std::move(path)), buf_(*buf) {
    buf_.clear();
  }
  absl::Status Write(const char* p, size_t n) {
    crc_ = crc32c::Extend(crc_, p, n);
    if (buf_.size() + n > kBuf) {
      if (auto s = Flush(); !s.ok()) return s;
      if (n > kBuf) {
        size_ += n;
        return WriteFull(fd_.get(), p, n, path_);
      }
    }
    buf_.append(p, n);
    size_ += n;
    return absl::OkStatus();
  }
  absl::Status Flush() {
    if (buf_.empty()) return absl::OkStatus();
    auto s = WriteFull(fd_.get(), buf_.data(), buf_.size(), path_);
    buf_.clear();
    return s;
  }
  absl::Status Close() {
    if (auto s = Flush(); !s.ok()) return s;
    if (::fsync(fd_.get()) != 0) return ErrnoError(errno, path_);
    fd_ = UniqueFd();
    return absl::OkStatus();
  }
  uint64_t size() const { return size_; }
  // CRC32C (unmasked) of every byte written: the manifest's, without
  // reading the file back.
  uint32_t crc() const { return crc_; }

 private:
  static constexpr size_t kBuf = 1 << 20;
  UniqueFd fd_;
  std::string path_;
  std::string& buf_;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

// Sorts `entries` and writes them as run `n` of `dir` with its table.
absl::Status WriteRun(const std::string& dir, size_t n, std::vector<Entry>* entries,
                      const std::string& arena, uint32_t buckets, std::string* buf,
                      MapReport* report) {
  std::sort(entries->begin(), entries->end(), Before);
  const std::string path = JoinPath(dir, RunName(n));
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!fd.ok()) return fd.status();
  std::optional<Out> out;
  out.emplace(std::move(*fd), path, buf);
  std::vector<uint64_t> table(buckets + 1, 0);
  size_t e = 0;
  for (uint32_t b = 0; b < buckets; ++b) {
    table[b] = out->size();
    for (; e < entries->size() && BucketOf((*entries)[e].key, buckets) == b; ++e) {
      const Entry& x = (*entries)[e];
      char h[kEntryHeader];
      PutU64(h, x.key);
      PutU64(h + 8, x.file);
      PutU64(h + 16, x.record);
      PutU64(h + 24, x.length);
      if (auto s = out->Write(h, sizeof(h)); !s.ok()) return s;
      if (auto s = out->Write(arena.data() + x.at, x.length); !s.ok()) return s;
    }
  }
  table[buckets] = out->size();
  if (auto s = out->Close(); !s.ok()) return s;
  report->run_bytes.push_back(out->size());
  report->run_crcs.push_back(out->crc());
  std::string bytes(table.size() * 8, '\0');
  for (size_t i = 0; i < table.size(); ++i) PutU64(bytes.data() + 8 * i, table[i]);
  return WriteFileAtomically(path + ".idx", bytes);
}

// Reads a run's entries in [begin, end) sequentially through `*buf` (the
// caller's, kept from reader to reader).
class RunReader {
 public:
  RunReader(int fd, const std::string& path, uint64_t begin, uint64_t end, std::string* buf)
      : fd_(fd), path_(path), pos_(begin), end_(end), buf_(*buf) {
    buf_.clear();
  }
  // The next entry's header (false at the end); then Payload or Skip.
  absl::StatusOr<bool> Next(Entry* e) {
    if (pos_ >= end_) return false;
    char h[kEntryHeader];
    if (auto s = Read(h, sizeof(h)); !s.ok()) return s;
    e->key = GetU64(h);
    e->file = GetU64(h + 8);
    e->record = GetU64(h + 16);
    e->length = GetU64(h + 24);
    if (e->length > end_ - pos_) {
      return absl::DataLossError(absl::StrCat(path_, ": the entry at byte offset ",
                                              pos_ - kEntryHeader, " runs past its bucket"));
    }
    return true;
  }
  absl::Status Payload(char* dst, uint64_t n) { return Read(dst, n); }
  void Skip(uint64_t n) { pos_ += n; }

 private:
  absl::Status Read(char* dst, uint64_t n) {
    if (n > end_ - pos_) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated at byte offset ", pos_));
    }
    while (n > 0) {
      if (pos_ < buf_at_ || pos_ >= buf_at_ + buf_.size()) {
        const uint64_t want = std::min<uint64_t>(kBuf, end_ - pos_);
        buf_.resize(want);
        if (auto s = PreadFull(fd_, buf_.data(), want, pos_, path_); !s.ok()) return s;
        buf_at_ = pos_;
      }
      const uint64_t off = pos_ - buf_at_;
      const uint64_t k = std::min<uint64_t>(n, buf_.size() - off);
      std::memcpy(dst, buf_.data() + off, k);
      dst += k;
      pos_ += k;
      n -= k;
    }
    return absl::OkStatus();
  }
  static constexpr uint64_t kBuf = 1 << 20;
  int fd_;
  const std::string& path_;
  uint64_t pos_, end_;
  std::string& buf_;
  uint64_t buf_at_ = 0;  // the file offset of buf_[0]
};

// The output shards of a reduce and where each record goes, from the
// buckets' totals over every map part: shards of `o.shards` (record
// counts as even as possible, earlier shards taking the remainder) or of
// about `o.shard_size` framed bytes; part `o.part` writes [first, last).
struct Layout {
  Layout(const std::vector<uint64_t>& counts, const std::vector<uint64_t>& bytes,
         const ReshardOptions& o)
      : by_count(o.shards > 0) {
    for (size_t b = 0; b < counts.size(); ++b) {
      n += counts[b];
      total_bytes += bytes[b];
    }
    if (o.shards > 0) {
      num_shards = o.shards;
    } else if (total_bytes > 0) {
      num_shards = (total_bytes + o.shard_size - 1) / o.shard_size;
    }
    base = num_shards ? n / num_shards : 0;
    extra = num_shards ? n % num_shards : 0;
    last = num_shards;
    if (o.part) {
      const std::vector<size_t> cuts =
          SplitByWeight(std::vector<uint64_t>(num_shards, 1), o.part->count);
      first = cuts[o.part->index];
      last = cuts[o.part->index + 1];
    }
  }
  // The shard of the record at position p with c framed bytes before it.
  uint64_t ShardOf(uint64_t p, uint64_t c) const {
    if (by_count) {
      // Shards [0, extra) hold base + 1 records, the rest base.
      const uint64_t big = extra * (base + 1);
      return p < big ? p / (base + 1) : extra + (p - big) / std::max<uint64_t>(base, 1);
    }
    return absl::Uint128Low64(absl::uint128(c) * num_shards / total_bytes);
  }
  // Whether bucket b (its first record at position bp with bc bytes
  // before, its own counts[b] records and bytes[b] bytes) holds records
  // of shards [first, last): -1 before them, 0 inside, 1 after.
  int Where(uint64_t bp, uint64_t bc, uint64_t count, uint64_t bytes) const {
    if (ShardOf(bp + count - 1, bc + bytes - 1) < first) return -1;
    if (ShardOf(bp, bc) >= last) return 1;
    return 0;
  }
  bool by_count;
  uint64_t n = 0, total_bytes = 0, num_shards = 0, base = 0, extra = 0, first = 0, last = 0;
};

}  // namespace

uint64_t ShuffleKey(uint64_t seed, uint64_t file, uint64_t record) {
  return Mix(Mix(seed ^ Mix(file + kGolden)) + (record + 1) * kGolden);
}

uint32_t ShuffleBuckets(uint64_t input_bytes, uint64_t memory) {
  memory = std::max(memory, kMinShuffleMemory);
  const absl::uint128 m = (absl::uint128(input_bytes) * 4 + memory - 1) / memory;
  return static_cast<uint32_t>(std::clamp<absl::uint128>(m, 1, uint64_t{1} << 20));
}

absl::StatusOr<MapReport> ShuffleMap(const std::vector<MapInput>& inputs, const std::string& dir,
                                     const ShuffleOptions& o, const Control& control) {
  const uint32_t m = std::max<uint32_t>(o.buckets, 1);
  if (!o.skip_damaged) {
    for (const MapInput& in : inputs) {
      if (!in.index->problems().empty()) {
        const record::WalkProblem& p = in.index->problems().front();
        return absl::DataLossError(absl::StrCat(in.index->path(), ": damaged at byte offset ",
                                                p.offset, ": ", p.message,
                                                " (--skip-damaged leaves damaged records out)"));
      }
    }
  }
  MapReport report;
  report.counts.assign(m, 0);
  report.bytes.assign(m, 0);
  // Half the budget for records and their entries; the sort and the
  // writer's buffer fit in the rest.
  const uint64_t cap = std::max(o.memory, kMinShuffleMemory) / 2;
  std::string arena, out_buf;
  std::vector<Entry> entries;
  record::RecordBuffer buf;
  const auto spill = [&]() -> absl::Status {
    if (entries.empty()) return absl::OkStatus();
    const size_t n = report.runs.size();
    if (auto s = WriteRun(dir, n, &entries, arena, m, &out_buf, &report); !s.ok()) return s;
    report.runs.push_back(RunName(n));
    entries.clear();
    arena.clear();
    // The test hook: once, with the first run on disk.
    if (n == 0 && control.mid_output) control.mid_output();
    return absl::OkStatus();
  };
  for (const MapInput& in : inputs) {
    std::vector<uint64_t> damaged;
    for (uint64_t r = in.first; r < in.last; ++r) {
      if (Cancelled(control)) {
        return absl::CancelledError(absl::StrCat("interrupted while reading ", in.index->path()));
      }
      const uint64_t begin = in.index->begin(r), end = in.index->end(r);
      auto data = record::ReadRecordInto(*in.source, r, begin, end, &buf);
      if (control.progress) control.progress(1, end - begin);
      if (!data.ok()) {
        if (!absl::IsDataLoss(data.status()) || !o.skip_damaged) {
          return SetMessage(data.status(),
                            absl::StrCat(data.status().message(),
                                         absl::IsDataLoss(data.status())
                                             ? " (--skip-damaged leaves damaged records out)"
                                             : ""));
        }
        report.skipped.push_back({in.index->path(), r, begin, DamageReason(data.status(), begin)});
        damaged.push_back(r);
        continue;
      }
      const uint64_t cost = data->size() + sizeof(Entry);
      if (!entries.empty() && arena.size() + entries.size() * sizeof(Entry) + cost > cap) {
        if (auto s = spill(); !s.ok()) return s;
      }
      const uint64_t key = ShuffleKey(o.seed, in.file, r);
      entries.push_back({key, in.file, r, arena.size(), data->size()});
      arena.append(data->data(), data->size());
      const uint32_t b = BucketOf(key, m);
      ++report.counts[b];
      report.bytes[b] += data->size() + kFramingBytes;
      ++report.records;
    }
    buf.held.reset();
    if (o.skip_damaged && in.first == 0 && in.last == in.index->num_records()) {
      auto outside = DamageOutsideRecords(*in.index, *in.source, damaged);
      if (!outside.ok()) return outside.status();
      for (Dropped& d : *outside) report.skipped.push_back(std::move(d));
    }
  }
  if (auto s = spill(); !s.ok()) return s;
  std::string totals(size_t{m} * 16, '\0');
  for (uint32_t b = 0; b < m; ++b) {
    PutU64(totals.data() + 16 * b, report.counts[b]);
    PutU64(totals.data() + 16 * b + 8, report.bytes[b]);
  }
  if (auto s = WriteFileAtomically(JoinPath(dir, kBucketsFile), totals); !s.ok()) return s;
  return report;
}

absl::StatusOr<ReshardReport> ShuffleReduce(const std::vector<std::string>& map_dirs,
                                            const ShuffleOptions& so, const ReshardOptions& o,
                                            const Control& control) {
  if ((o.shards > 0) == (o.shard_size > 0)) {
    return absl::InvalidArgumentError("give exactly one of a shard count and a shard size");
  }
  if (auto s = repack::ValidatePrefix(o.prefix); !s.ok()) return s;
  const uint32_t m = std::max<uint32_t>(so.buckets, 1);
  // The buckets' totals over every map part.
  std::vector<uint64_t> counts(m, 0), bytes(m, 0);
  struct Run {
    std::string path;
    UniqueFd fd;
    std::string table;  // M + 1 u64 LE
  };
  std::vector<Run> runs;
  for (const std::string& d : map_dirs) {
    const std::string totals_path = JoinPath(d, kBucketsFile);
    auto totals = ReadFileToString(totals_path);
    if (!totals.ok()) return totals.status();
    if (totals->size() != size_t{m} * 16) {
      return absl::FailedPreconditionError(
          absl::StrCat(totals_path, ": ", totals->size() / 16, " buckets, not ", m,
                       " (the map ran with another --memory or other inputs)"));
    }
    for (uint32_t b = 0; b < m; ++b) {
      counts[b] += GetU64(totals->data() + 16 * b);
      bytes[b] += GetU64(totals->data() + 16 * b + 8);
    }
    auto names = ListNames(d);
    if (!names.ok()) return names.status();
    std::sort(names->begin(), names->end());
    for (const std::string& name : *names) {
      if (!absl::StartsWith(name, "run-") || absl::EndsWith(name, ".idx")) continue;
      Run run;
      run.path = JoinPath(d, name);
      auto fd = OpenFile(run.path, O_RDONLY | O_CLOEXEC);
      if (!fd.ok()) return fd.status();
      run.fd = std::move(*fd);
      auto table = ReadFileToString(run.path + ".idx");
      if (!table.ok()) return table.status();
      if (table->size() != (size_t{m} + 1) * 8) {
        return absl::FailedPreconditionError(
            absl::StrCat(run.path, ".idx: not a table of ", m, " buckets"));
      }
      run.table = *std::move(table);
      runs.push_back(std::move(run));
    }
  }
  const Layout layout(counts, bytes, o);
  const uint64_t n = layout.n, num_shards = layout.num_shards, base = layout.base,
                 extra = layout.extra, first = layout.first, last = layout.last;
  const auto shard_of = [&](uint64_t p, uint64_t c) { return layout.ShardOf(p, c); };

  ReshardReport report;
  auto prepared = PrepareOutputNames(o, num_shards, first, last, &report.stale_removed);
  if (!prepared.ok()) return prepared.status();
  const std::vector<std::string> names = *std::move(prepared);
  ShardSyncer syncer(/*commit=*/false);
  std::unique_ptr<PendingShard> current;
  uint64_t current_shard = first;  // the next shard to open
  std::optional<Midpoint> mid;
  // Opens shards up to and including `s` (those before it stay empty).
  const auto advance = [&](uint64_t s) -> absl::Status {
    while (!current || current_shard <= s) {
      if (current) {
        if (auto st = current->Seal(); !st.ok()) return st;
        report.records += current->records();
        syncer.Add(std::move(current));
        if (control.output_done) control.output_done();
        if (auto st = syncer.error(); !st.ok()) return st;
      }
      if (current_shard >= last) return absl::OkStatus();
      auto out = PendingShard::Create(names[current_shard], o.codec, o.array_record);
      if (!out.ok()) return out.status();
      current = *std::move(out);
      if (current_shard == first) {
        const uint64_t planned =
            o.shards > 0 ? base + (current_shard < extra) : std::max<uint64_t>(n / num_shards, 1);
        mid.emplace(control.mid_output, planned);
      } else {
        mid.reset();
      }
      ++current_shard;
    }
    return absl::OkStatus();
  };

  const uint64_t cap = std::max(so.memory, kMinShuffleMemory) / 2;
  std::string arena, read_buf;
  std::vector<Entry> entries;
  uint64_t p = 0, c = 0;  // position and framed bytes before bucket b
  for (uint32_t b = 0; b < m && first < last; ++b) {
    const uint64_t bp = p, bc = c;
    p += counts[b];
    c += bytes[b];
    if (counts[b] == 0) continue;
    // Shards its records may go to: [shard_of(first record), shard_of(last)].
    const int where = layout.Where(bp, bc, counts[b], bytes[b]);
    if (where < 0) continue;
    if (where > 0) break;
    // The bucket in slices of its key range, each within the budget.
    const uint64_t in_memory = bytes[b] + counts[b] * sizeof(Entry);
    const uint64_t slices = std::max<uint64_t>(1, (in_memory + cap - 1) / cap);
    const absl::uint128 k0 = BucketStart(b, m), k1 = BucketStart(uint64_t{b} + 1, m);
    uint64_t pos = bp, cum = bc;
    for (uint64_t slice = 0; slice < slices; ++slice) {
      const absl::uint128 s0 = k0 + (k1 - k0) * slice / slices;
      const absl::uint128 s1 = k0 + (k1 - k0) * (slice + 1) / slices;
      entries.clear();
      arena.clear();
      for (Run& run : runs) {
        const uint64_t begin = GetU64(run.table.data() + 8 * b);
        const uint64_t end = GetU64(run.table.data() + 8 * (b + 1));
        RunReader reader(run.fd.get(), run.path, begin, end, &read_buf);
        Entry e;
        for (;;) {
          if (Cancelled(control)) return absl::CancelledError("interrupted while shuffling");
          auto more = reader.Next(&e);
          if (!more.ok()) return more.status();
          if (!*more) break;
          if (absl::uint128(e.key) < s0 || absl::uint128(e.key) >= s1) {
            reader.Skip(e.length);
            continue;
          }
          e.at = arena.size();
          arena.resize(arena.size() + e.length);
          if (auto s = reader.Payload(arena.data() + e.at, e.length); !s.ok()) return s;
          entries.push_back(e);
        }
      }
      std::sort(entries.begin(), entries.end(), Before);
      for (const Entry& e : entries) {
        const uint64_t s = shard_of(pos, cum);
        ++pos;
        cum += e.length + kFramingBytes;
        if (control.progress) control.progress(1, e.length + kFramingBytes);
        if (s < first) continue;
        if (s >= last) break;
        if (auto st = advance(s); !st.ok()) return st;
        if (auto st = current->Append(absl::string_view(arena.data() + e.at, e.length)); !st.ok()) {
          return st;
        }
        if (mid) mid->Appended();
      }
    }
  }
  if (first < last) {
    if (auto st = advance(last); !st.ok()) return st;
  }
  if (Cancelled(control)) return absl::CancelledError("interrupted while shuffling");
  std::vector<std::unique_ptr<PendingShard>> pending;
  for (ShardSyncer::Synced& synced : syncer.Wait()) {
    if (!synced.status.ok()) return synced.status;
    const PendingShard& shard = *synced.shard;
    report.shards.push_back({shard.final_path(), shard.records(), shard.bytes(), shard.file_bytes(),
                             shard.file_crc32c()});
    pending.push_back(std::move(synced.shard));
  }
  if (Cancelled(control)) return absl::CancelledError("interrupted before the rename");
  if (auto st = CommitAll(pending, o.output_dir); !st.ok()) return st;
  return report;
}

namespace {
// The codec a map part's shards share ("" when it has none, "none" when
// they differ), beside its runs.
constexpr char kCodecFile[] = "codec";
}  // namespace

absl::StatusOr<MapReport> ShuffleMapPart(const std::vector<MapInput>& inputs,
                                         const std::string& dir, PartManifest manifest,
                                         const ShuffleOptions& options, const Control& control) {
  auto out = PartOutput::Begin(dir, manifest.plan, manifest.part, "map");
  if (!out.ok()) return out.status();
  auto report = ShuffleMap(inputs, (*out)->work_dir(), options, control);
  if (!report.ok()) return report.status();
  std::set<std::string> codecs;
  for (const MapInput& in : inputs)
    codecs.insert(std::string(source::CodecName(in.index->codec())));
  const std::string codec = codecs.size() == 1 ? *codecs.begin() : codecs.empty() ? "" : "none";
  if (auto s = WriteFileAtomically(JoinPath((*out)->work_dir(), kCodecFile), codec); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < report->runs.size(); ++i) {
    const std::string& run = report->runs[i];
    ManifestOutput out{run, 0, 0, report->run_bytes[i], report->run_crcs[i]};
    out.crc_known = true;  // computed as it was written
    manifest.outputs.push_back(out);
    manifest.outputs.push_back({run + ".idx", 0, 0, 0, 0});
  }
  manifest.outputs.push_back({kBucketsFile, report->records, 0, 0, 0});
  manifest.outputs.push_back({kCodecFile, 0, 0, 0, 0});
  if (auto s = (*out)->Publish(std::move(manifest)); !s.ok()) return s;
  return report;
}

absl::StatusOr<MappedParts> FindMapParts(const std::string& dir, const std::string& plan,
                                         uint32_t parts) {
  MappedParts out;
  std::vector<std::string> missing;
  std::set<std::string> codecs;
  for (uint32_t k = 0; k < parts; ++k) {
    out.dirs.push_back(PublishedPartDir(dir, plan, k, "map"));
    auto m = ReadManifest(out.dirs.back());
    if (!m.ok()) {
      missing.push_back(absl::StrCat(k));
      continue;
    }
    for (ManifestInput& in : m->inputs) out.inputs.push_back(std::move(in));
    auto codec = ReadFileToString(JoinPath(out.dirs.back(), kCodecFile));
    if (codec.ok() && !codec->empty()) codecs.insert(*codec);
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the first pass (--pass map) of part(s) ", absl::StrJoin(missing, ", "), " of ", parts,
        " (plan ", plan, ") is not there; run it, then this part again"));
  }
  if (codecs.size() == 1) out.codec = source::ParseCodecName(*codecs.begin());
  return out;
}

absl::StatusOr<std::pair<uint32_t, uint32_t>> ReduceBuckets(const std::vector<std::string>& totals,
                                                            uint32_t buckets,
                                                            const ReshardOptions& o) {
  const uint32_t m = std::max<uint32_t>(buckets, 1);
  std::vector<uint64_t> counts(m, 0), bytes(m, 0);
  for (const std::string& t : totals) {
    if (t.size() != size_t{m} * 16) {
      return absl::FailedPreconditionError(
          absl::StrCat(kBucketsFile, ": ", t.size() / 16, " buckets, not ", m,
                       " (the map ran with another --memory or other inputs)"));
    }
    for (uint32_t b = 0; b < m; ++b) {
      counts[b] += GetU64(t.data() + 16 * b);
      bytes[b] += GetU64(t.data() + 16 * b + 8);
    }
  }
  const Layout layout(counts, bytes, o);
  uint32_t lo = m, hi = 0;
  uint64_t p = 0, c = 0;
  for (uint32_t b = 0; b < m && layout.first < layout.last; ++b) {
    const uint64_t bp = p, bc = c;
    p += counts[b];
    c += bytes[b];
    if (counts[b] == 0) continue;
    const int where = layout.Where(bp, bc, counts[b], bytes[b]);
    if (where > 0) break;
    if (where < 0) continue;
    lo = std::min(lo, b);
    hi = b + 1;
  }
  if (lo >= hi) return std::pair<uint32_t, uint32_t>(0, 0);
  return std::pair<uint32_t, uint32_t>(lo, hi);
}

std::string ShuffleBucketsFileName() { return kBucketsFile; }

}  // namespace tfrecordfs::reshape
