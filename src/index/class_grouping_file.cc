#include "tfrecordfs/index/class_grouping_file.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/index/index_file.h"

namespace tfrecordfs::index {

namespace {

constexpr char kMagic[] = "TFRC";
// 2: a whole float value's folder keeps its decimal point ("1.0", as its
// file reads; version 1 wrote "1"), and folders keep their whole values
// beside cut names. 3: both of those (two branches each called theirs 2),
// so a grouping saved by either is rebuilt.
constexpr uint32_t kVersion = 3;
constexpr char kSuffix[] = ".tfrc";
void PutString(std::string* out, absl::string_view s) {
  PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

// A cursor over the stored bytes; every read checks the bounds.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  bool U32(uint32_t* v) {
    if (rest_.size() < 4) return false;
    *v = DecodeFixed32(rest_.data());
    rest_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t* v) {
    if (rest_.size() < 8) return false;
    *v = DecodeFixed64(rest_.data());
    rest_.remove_prefix(8);
    return true;
  }
  bool U8(uint8_t* v) {
    if (rest_.empty()) return false;
    *v = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return true;
  }
  bool String(std::string* s) {
    uint32_t n;
    if (!U32(&n) || rest_.size() < n) return false;
    s->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }
  size_t left() const { return rest_.size(); }

 private:
  absl::string_view rest_;
};

absl::Status Corrupt(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("not a valid class grouping file: ", why));
}

}  // namespace

std::string EncodeGrouping(const ShardGrouping& g) {
  std::string out(kMagic, 4);
  PutFixed32(&out, kVersion);
  PutString(&out, g.feature);
  PutString(&out, g.real_path);
  PutFixed64(&out, g.file_size);
  PutFixed64(&out, static_cast<uint64_t>(g.mtime_ns));
  PutFixed64(&out, static_cast<uint64_t>(g.ctime_ns));
  PutFixed64(&out, g.inode);
  PutFixed64(&out, g.index_digest);
  PutFixed32(&out, static_cast<uint32_t>(g.folders.size()));
  for (size_t f = 0; f < g.folders.size(); ++f) {
    PutString(&out, g.folders[f]);
    const std::optional<std::string>& value = f < g.values.size() ? g.values[f] : std::nullopt;
    out.push_back(value ? 1 : 0);
    PutString(&out, value ? *value : "");
  }
  PutFixed64(&out, g.folder_of.size());
  for (uint32_t f : g.folder_of) PutFixed32(&out, f);
  PutFixed32(&out, crc32c::Mask(crc32c::Value(out)));
  return out;
}

absl::StatusOr<ShardGrouping> DecodeGrouping(absl::string_view bytes) {
  if (bytes.size() < 12 || !absl::StartsWith(bytes, absl::string_view(kMagic, 4))) {
    return Corrupt("no TFRC header");
  }
  const absl::string_view body = bytes.substr(0, bytes.size() - 4);
  if (crc32c::Unmask(DecodeFixed32(bytes.data() + body.size())) != crc32c::Value(body)) {
    return Corrupt("CRC mismatch");
  }
  Reader r(body.substr(4));
  ShardGrouping g;
  uint32_t version, folders;
  uint64_t mtime, ctime, records;
  if (!r.U32(&version)) return Corrupt("cut short");
  if (version != kVersion) return Corrupt(absl::StrCat("version ", version));
  if (!r.String(&g.feature) || !r.String(&g.real_path) || !r.U64(&g.file_size) || !r.U64(&mtime) ||
      !r.U64(&ctime) || !r.U64(&g.inode) || !r.U64(&g.index_digest) || !r.U32(&folders)) {
    return Corrupt("cut short");
  }
  g.mtime_ns = static_cast<int64_t>(mtime);
  g.ctime_ns = static_cast<int64_t>(ctime);
  if (folders > r.left() / 9) return Corrupt("more folders than bytes");
  g.folders.resize(folders);
  g.values.resize(folders);
  for (uint32_t f = 0; f < folders; ++f) {
    uint8_t has_value;
    std::string value;
    if (!r.String(&g.folders[f]) || !r.U8(&has_value) || !r.String(&value)) {
      return Corrupt("cut short");
    }
    if (has_value > 1) return Corrupt("bad value flag");
    if (has_value) g.values[f] = std::move(value);
  }
  if (!r.U64(&records) || records != r.left() / 4 || r.left() % 4 != 0) {
    return Corrupt("record count does not match the file size");
  }
  g.folder_of.resize(records);
  for (uint32_t& f : g.folder_of) {
    r.U32(&f);
    if (f != kNotGrouped && f >= folders) return Corrupt("folder index out of range");
  }
  return g;
}

uint64_t IndexDigest(const ShardIndex& idx) {
  const std::vector<uint64_t>& offsets = idx.offsets();
  return Fnv1a64(absl::string_view(reinterpret_cast<const char*>(offsets.data()),
                                   offsets.size() * sizeof(uint64_t)));
}

std::string GroupingPath(const IndexStore& store, const std::string& real_path,
                         absl::string_view feature) {
  if (store.options().cache_dir.empty()) return "";
  return absl::StrFormat("%s.%016x%s", absl::StripSuffix(store.CachePath(real_path), kIndexSuffix),
                         Fnv1a64(feature), kSuffix);
}

}  // namespace tfrecordfs::index
