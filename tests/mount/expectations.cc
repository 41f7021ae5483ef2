#include "expectations.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "testing/canon.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/record/reader.h"

namespace tfrecordfs::mount_test {

namespace {

std::string Printable(const std::string& s, size_t limit = 120) {
  std::string e = absl::CEscape(absl::string_view(s.data(), std::min(s.size(), limit)));
  if (s.size() > limit) e += "...";
  return std::string(e.data(), e.size());
}

using test::Bits;

constexpr size_t kMaxReports = 25;

}  // namespace

std::string RecordDirName(uint64_t index, uint64_t count) {
  uint64_t last = count == 0 ? 0 : count - 1;
  size_t width = 1;
  while (last >= 10) {
    last /= 10;
    ++width;
  }
  std::string digits = std::to_string(index);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

void AddRecordLayout(const std::string& dir, const std::string& payload, ExpectedTree* out) {
  (*out)[dir] = ExpectedNode{true, ""};
  absl::string_view view(payload.data(), payload.size());
  naming::Layout layout;
  const example::DecodedRecord decoded = example::DecodeRecord(view);
  switch (decoded.kind) {
    case example::PayloadKind::kExample:
      layout = naming::LayoutExample(decoded.example, view);
      break;
    case example::PayloadKind::kSequenceExample:
      layout = naming::LayoutSequence(decoded.sequence, view);
      break;
    case example::PayloadKind::kExampleList:
    case example::PayloadKind::kExampleInExample:
      layout = naming::LayoutExampleList(decoded.list, view,
                                         decoded.kind == example::PayloadKind::kExampleInExample);
      break;
    case example::PayloadKind::kRaw:
      layout = naming::LayoutRaw(payload.size());
      break;
  }
  // Full paths of entries, parents before children (Flatten's order).
  std::vector<std::string> paths(layout.entries.size());
  paths[0] = dir;
  for (uint32_t i = 0; i < layout.entries.size(); ++i) {
    const naming::Entry& e = layout.entries[i];
    if (!e.is_dir) continue;
    for (uint32_t c = e.first_child; c < e.first_child + e.num_children; ++c) {
      const naming::Entry& child = layout.entries[c];
      paths[c] = paths[i] + "/" + child.name;
      ExpectedNode node;
      node.is_dir = child.is_dir;
      if (!child.is_dir) {
        auto content = naming::FileContent(child, view);
        EXPECT_TRUE(content.ok()) << paths[c] << ": " << content.status();
        if (content.ok()) node.content = std::move(*content);
      }
      (*out)[paths[c]] = std::move(node);
    }
  }
}

namespace {

// The whole decompressed stream of a GZIP (any number of members) or ZLIB
// file, with zlib's own header detection: independent of src/source.
std::optional<std::string> DecompressWhole(const std::string& bytes) {
  std::string out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    z_stream z;
    std::memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return std::nullopt;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + pos));
    z.avail_in = static_cast<uInt>(bytes.size() - pos);
    int ret;
    do {
      char buf[65536];
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      ret = inflate(&z, Z_NO_FLUSH);
      out.append(buf, sizeof buf - z.avail_out);
    } while (ret == Z_OK);
    pos = bytes.size() - z.avail_in;
    inflateEnd(&z);
    if (ret != Z_STREAM_END) return std::nullopt;
    if (static_cast<unsigned char>(bytes[0]) != 0x1f) break;  // ZLIB: one stream
  }
  return out;
}

}  // namespace

DirectShard ReadShardDirectly(const std::string& path) {
  DirectShard out;
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) {
    out.error = std::string(fd.status().message());
    return out;
  }
  {
    // A compressed shard: its decompressed bytes, in an anonymous file.
    const std::string raw = ReadWholeFile(path);
    const bool gzip = raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f &&
                      static_cast<unsigned char>(raw[1]) == 0x8b;
    const bool zlib =
        raw.size() >= 2 && (static_cast<unsigned char>(raw[0]) & 0x0f) == 8 &&
        ((static_cast<unsigned char>(raw[0]) << 8) | static_cast<unsigned char>(raw[1])) % 31 ==
            0 &&
        !(raw.size() >= 12 && record::IsPlausibleHeader(raw.data(), 0, raw.size()));
    if (gzip || zlib) {
      auto data = DecompressWhole(raw);
      if (!data) {
        out.error = "does not decompress";
        return out;
      }
      const int mfd = ::memfd_create("shard", MFD_CLOEXEC);
      if (mfd < 0 || !WriteFull(mfd, data->data(), data->size(), "memfd").ok()) {
        out.error = "memfd";
        return out;
      }
      *fd = UniqueFd(mfd);
    }
  }
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) {
    out.error = "fstat failed";
    return out;
  }
  auto walk = record::WalkHeaders(fd->get(), path, static_cast<uint64_t>(st.st_size));
  if (!walk.ok()) {
    out.error = std::string(walk.status().message());
    return out;
  }
  out.offsets = walk->offsets;
  for (size_t i = 0; i + 1 < walk->offsets.size(); ++i) {
    auto data = record::ReadRecord(fd->get(), path, i, walk->offsets[i], walk->offsets[i + 1]);
    if (data.ok()) {
      out.payloads.emplace_back(std::move(*data));
      out.record_errors.emplace_back();
    } else {
      out.payloads.emplace_back(std::nullopt);
      out.record_errors.emplace_back(data.status().message());
    }
  }
  return out;
}

size_t CompareTrees(const ExpectedTree& expected, const std::map<std::string, WalkedNode>& walked,
                    const std::string& prefix) {
  size_t diffs = 0;
  auto report = [&](const std::string& msg) {
    if (++diffs <= kMaxReports) ADD_FAILURE() << msg;
  };
  std::set<std::string> seen;
  for (const auto& [rel, node] : walked) {
    const std::string key = prefix.empty() ? rel : prefix + "/" + rel;
    seen.insert(key);
    auto it = expected.find(key);
    if (it == expected.end()) {
      report("unexpected entry in the mount: " + Printable(key));
      continue;
    }
    const ExpectedNode& want = it->second;
    if (node.error != 0) {
      report(Printable(key) + ": " + std::strerror(node.error));
      continue;
    }
    // A read-write mount's records (and shard folders) take edits: the
    // owner's write bit (0755, 0644); the rest of a mount is read-only.
    // (mount_shell_test and record_edit_test check which shows where.)
    const mode_t want_mode = want.is_dir ? (S_IFDIR | 0555) : (S_IFREG | 0444);
    if (node.mode != want_mode && node.mode != (want_mode | 0200)) {
      std::ostringstream m;
      m << Printable(key) << ": mode 0" << std::oct << node.mode << ", want 0" << want_mode;
      report(m.str());
      continue;
    }
    if (want.is_dir) continue;
    if (node.size != want.content.size() || node.content.size() != want.content.size()) {
      report(Printable(key) + ": stat size " + std::to_string(node.size) + ", read " +
             std::to_string(node.content.size()) + " bytes, want " +
             std::to_string(want.content.size()));
      continue;
    }
    if (node.content != want.content) {
      size_t at = 0;
      while (at < node.content.size() && node.content[at] == want.content[at]) ++at;
      report(Printable(key) + ": content differs from byte " + std::to_string(at) + " (got '" +
             Printable(node.content.substr(at, 40)) + "', want '" +
             Printable(want.content.substr(at, 40)) + "')");
    }
  }
  for (const auto& [key, node] : expected) {
    if (!prefix.empty() && key != prefix && key.rfind(prefix + "/", 0) != 0) continue;
    if (key == prefix) continue;
    if (!seen.count(key)) report("missing from the mount: " + Printable(key));
  }
  if (diffs > kMaxReports) {
    ADD_FAILURE() << diffs << " differences in all (first " << kMaxReports << " shown)";
  }
  return diffs;
}

bool SameFeature(const OwnedFeature& a, const OwnedFeature& b) {
  if (a.name != b.name || a.kind != b.kind) return false;
  switch (a.kind) {
    case example::Kind::kBytes:
      return a.bytes == b.bytes;
    case example::Kind::kInt64:
      return a.int64s == b.int64s;
    case example::Kind::kFloat:
      if (a.floats.size() != b.floats.size()) return false;
      for (size_t i = 0; i < a.floats.size(); ++i) {
        if (Bits(a.floats[i]) != Bits(b.floats[i])) return false;
      }
      return true;
    case example::Kind::kNone:
      return true;
  }
  return false;
}

std::string Describe(const OwnedFeature& f) {
  std::ostringstream o;
  o << "'" << Printable(f.name, 60) << "' " << example::KindName(f.kind) << "[";
  switch (f.kind) {
    case example::Kind::kBytes:
      for (size_t i = 0; i < f.bytes.size() && i < 4; ++i) {
        o << (i ? ", " : "") << "'" << Printable(f.bytes[i], 24) << "'";
      }
      o << "] (" << f.bytes.size() << " values)";
      break;
    case example::Kind::kInt64:
      for (size_t i = 0; i < f.int64s.size() && i < 8; ++i) o << (i ? ", " : "") << f.int64s[i];
      o << "] (" << f.int64s.size() << " values)";
      break;
    case example::Kind::kFloat:
      for (size_t i = 0; i < f.floats.size() && i < 8; ++i) {
        o << (i ? ", " : "") << "0x" << std::hex << Bits(f.floats[i]) << std::dec;
      }
      o << "] (" << f.floats.size() << " values)";
      break;
    case example::Kind::kNone:
      o << "]";
      break;
  }
  return o.str();
}

example::FeatureTable ToTable(const std::vector<OwnedFeature>& features) {
  example::FeatureTable t;
  for (const OwnedFeature& f : features) {
    example::Feature x;
    x.name = f.name;
    x.kind = f.kind;
    for (const std::string& b : f.bytes) x.bytes.emplace_back(b.data(), b.size());
    x.floats = f.floats;
    x.int64s = f.int64s;
    t.features.push_back(std::move(x));
  }
  std::sort(t.features.begin(), t.features.end(),
            [](const example::Feature& a, const example::Feature& b) { return a.name < b.name; });
  return t;
}

std::map<std::string, WalkedNode> Subtree(const std::map<std::string, WalkedNode>& walked,
                                          const std::string& dir) {
  std::map<std::string, WalkedNode> out;
  const std::string p = dir + "/";
  for (auto it = walked.lower_bound(p); it != walked.end() && it->first.rfind(p, 0) == 0; ++it) {
    out[it->first.substr(p.size())] = it->second;
  }
  return out;
}

std::map<std::string, OwnedFeature> ReconstructRecord(
    const std::map<std::string, WalkedNode>& files,
    const std::map<std::string, example::Kind>& kinds, std::vector<std::string>* errors) {
  // Children of each directory ("" is the record directory).
  std::map<std::string, std::vector<std::pair<std::string, bool>>> children;
  for (const auto& [rel, node] : files) {
    const size_t slash = rel.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : rel.substr(0, slash);
    const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
    children[parent].emplace_back(name, S_ISREG(node.mode));
  }
  std::map<std::string, OwnedFeature> out;
  auto add = [&](OwnedFeature f) {
    if (out.count(f.name)) {
      errors->push_back("two files map back to feature '" + Printable(f.name) + "'");
      return;
    }
    std::string key = f.name;
    out.emplace(std::move(key), std::move(f));
  };
  auto hint = [&](const std::string& name) {
    auto it = kinds.find(name);
    return it == kinds.end() ? example::Kind::kNone : it->second;
  };

  // Iterative walk with the escaped directory components leading to a dir.
  struct Pending {
    std::string rel;
    std::vector<std::string> dirs;
  };
  std::vector<Pending> stack = {{"", {}}};
  while (!stack.empty()) {
    Pending cur = std::move(stack.back());
    stack.pop_back();
    for (const auto& [name, is_file] : children[cur.rel]) {
      const std::string rel = cur.rel.empty() ? name : cur.rel + "/" + name;
      const WalkedNode& node = files.at(rel);
      if (!is_file) {
        const auto& entries = children[rel];
        if (!naming::IsContinuation(name) && naming::IsListDirectory(entries)) {
          OwnedFeature f;
          f.name = naming::FeatureNameFromPath(cur.dirs, name);
          f.kind = example::Kind::kBytes;
          f.bytes.resize(entries.size());
          for (const auto& [item, unused] : entries) {
            f.bytes[*naming::ListItemIndex(item)] = files.at(rel + "/" + item).content;
          }
          add(std::move(f));
        } else {
          Pending next{rel, cur.dirs};
          next.dirs.push_back(name);
          stack.push_back(std::move(next));
        }
        continue;
      }
      const naming::LeafName leaf = naming::ParseLeafName(name);
      OwnedFeature f;
      f.name = naming::FeatureNameFromPath(cur.dirs, leaf.stem_escaped);
      absl::string_view content(node.content.data(), node.content.size());
      switch (leaf.role) {
        case naming::FileRole::kNumeric: {
          auto parsed = naming::ParseNumeric(content, hint(f.name));
          if (!parsed.ok()) {
            errors->push_back(Printable(rel) + ": " + std::string(parsed.status().message()));
            continue;
          }
          f.kind = parsed->kind;
          f.int64s = parsed->int64s;
          f.floats = parsed->floats;
          break;
        }
        case naming::FileRole::kText:
          f.kind = example::Kind::kBytes;
          for (absl::string_view v : naming::ParseText(content))
            f.bytes.emplace_back(v.data(), v.size());
          break;
        case naming::FileRole::kSingleBytes:
          f.kind = example::Kind::kBytes;
          f.bytes.push_back(node.content);
          break;
        case naming::FileRole::kKindless:
          if (!node.content.empty()) {
            errors->push_back(Printable(rel) + ": a kindless feature's file holds bytes");
            continue;
          }
          f.kind = example::Kind::kNone;
          break;
      }
      add(std::move(f));
    }
  }
  return out;
}

}  // namespace tfrecordfs::mount_test
