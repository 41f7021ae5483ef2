#include "staging_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "absl/base/casts.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "testing/files.h"
#include "testing/make_feature.h"
#include "testing/shard.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/example_list.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/reference/zlib_codec.h"

namespace tfrecordfs::mount_test::staging_test {

namespace {

std::string Short(const std::string& s) {
  const std::string e = absl::CEscape(s.substr(0, 80));
  return s.size() > 80 ? e + "..." : e;
}

}  // namespace

Scratch::Scratch() {
  src = tmp.Subdir("src");
  mnt = tmp.Subdir("mnt");
  store = tmp.path() + "/store";  // the daemon creates it
  out = tmp.Subdir("out");
  logs = tmp.Subdir("logs");
}

std::vector<std::string> PackOptions(const Scratch& s, const std::string& prefix,
                                     const std::string& shard_size) {
  std::vector<std::string> o = {"staging_dir=" + s.store, "output_dir=" + s.out};
  if (!prefix.empty()) o.push_back("prefix=" + prefix);
  if (!shard_size.empty()) o.push_back("shard_size=" + shard_size);
  return o;
}

MountConfig PackConfig(const Scratch& s, std::vector<std::string> sources,
                       const std::string& prefix, const std::string& shard_size) {
  MountConfig c;
  c.sources = std::move(sources);
  c.mountpoint = s.mnt;
  c.options = PackOptions(s, prefix, shard_size);
  c.log_dir = s.logs;
  return c;
}

WriteOutcome WriteAndClose(const std::string& path, const std::string& bytes) {
  WriteOutcome o;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    o.open_errno = errno;
    return o;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      o.write_errno = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) o.close_errno = errno;
  return o;
}

std::vector<std::string> ListDir(const std::string& dir) { return test::SortedNames(dir); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<std::string> InflateOneStream(absl::string_view file) {
  return reference::zlib::InflateOneStream(file);
}

std::vector<PackedShard> ReadPackedShards(const std::string& dir, const std::string& prefix) {
  std::vector<PackedShard> out;
  for (const std::string& name : ListDir(dir)) {
    if (!absl::StartsWith(name, prefix + "-")) continue;
    const bool compressed =
        absl::EndsWith(name, ".tfrecord.gz") || absl::EndsWith(name, ".tfrecord.zlib");
    if (!compressed && !absl::EndsWith(name, ".tfrecord")) continue;
    const std::string path = dir + "/" + name;
    auto bytes = ReadFileToString(path);
    if (!bytes.ok()) {
      ADD_FAILURE() << bytes.status();
      continue;
    }
    PackedShard s;
    s.name = name;
    s.file_size = bytes->size();
    if (compressed) {
      auto plain = InflateOneStream(*bytes);
      if (!plain) {
        ADD_FAILURE() << path << " is not one whole compressed stream";
        continue;
      }
      *bytes = std::move(*plain);
    }
    absl::Status st = record::ForEachRecordInBuffer(
        *bytes, [&](uint64_t, absl::string_view data) { s.payloads.emplace_back(data); });
    EXPECT_TRUE(st.ok()) << path << ": " << st;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> AllPayloads(const std::vector<PackedShard>& shards) {
  std::vector<std::string> out;
  for (const PackedShard& s : shards) out.insert(out.end(), s.payloads.begin(), s.payloads.end());
  return out;
}

DecodedRecord Decode(const std::string& payload) {
  DecodedRecord r;
  auto table = example::DecodeExample(payload);
  if (!table.ok()) return r;
  r.is_example = true;
  for (const example::Feature& f : table->features) {
    OwnedFeature o;
    o.name = f.name;
    o.kind = f.kind;
    for (absl::string_view b : f.bytes) o.bytes.emplace_back(b);
    o.floats = f.floats;
    o.int64s = f.int64s;
    r.features[o.name] = std::move(o);
  }
  return r;
}

void ExpectSameRecord(const std::string& original, const std::string& packed,
                      const std::string& what) {
  const DecodedRecord a = Decode(original);
  if (!a.is_example) {
    if (auto seq = example::DecodeSequenceExample(original); seq.ok()) {
      // Feature by feature (kindless ones too): the pack writes map entries
      // in name order, as any writer may differ.
      auto got = example::DecodeSequenceExample(packed);
      ASSERT_TRUE(got.ok()) << what
                            << ": the packed record is not a SequenceExample: " << got.status();
      EXPECT_EQ(SequenceText(*got), SequenceText(*seq)) << what;
      return;
    }
    if (auto list = example::DecodeExampleList(original); list.ok()) {
      // An ExampleListWithContext: example by example, then the context,
      // each feature by feature (the pack writes map entries in name order).
      auto got = example::DecodeExampleList(packed);
      ASSERT_TRUE(got.ok()) << what << ": the packed record is not an ExampleListWithContext: "
                            << got.status();
      const auto text = [](const example::FeatureTable& t) {
        example::SequenceTable as_context;
        as_context.context = t;
        return SequenceText(as_context);
      };
      ASSERT_EQ(got->examples.size(), list->examples.size()) << what;
      for (size_t i = 0; i < list->examples.size(); ++i) {
        EXPECT_EQ(text(got->examples[i]), text(list->examples[i])) << what << ": example " << i;
      }
      EXPECT_EQ(got->has_context, list->has_context) << what;
      EXPECT_EQ(text(got->context), text(list->context)) << what << ": context";
      return;
    }
    EXPECT_EQ(Short(packed), Short(original)) << what << ": raw payload differs";
    EXPECT_EQ(packed.size(), original.size()) << what;
    EXPECT_TRUE(packed == original) << what << ": raw payload bytes differ";
    return;
  }
  const DecodedRecord b = Decode(packed);
  ASSERT_TRUE(b.is_example) << what << ": the packed record is not an Example";
  size_t reported = 0;
  for (const auto& [name, fa] : a.features) {
    auto it = b.features.find(name);
    if (it == b.features.end()) {
      ADD_FAILURE() << what << ": feature missing after the pack: " << Describe(fa);
    } else if (!SameFeature(fa, it->second)) {
      ADD_FAILURE() << what << ": feature differs\n  original: " << Describe(fa)
                    << "\n  packed:   " << Describe(it->second);
    } else {
      continue;
    }
    if (++reported > 10) return;
  }
  for (const auto& [name, fb] : b.features) {
    if (!a.features.count(name)) {
      ADD_FAILURE() << what << ": extra feature after the pack: " << Describe(fb);
    }
  }
}

OwnedFeature Int64Feature(std::string name, std::vector<int64_t> values) {
  return test::MakeFeature<OwnedFeature>(std::move(name), std::move(values));
}

OwnedFeature FloatFeature(std::string name, std::vector<float> values) {
  return test::MakeFeature<OwnedFeature>(std::move(name), std::move(values));
}

OwnedFeature BytesFeature(std::string name, std::vector<std::string> values) {
  return test::MakeFeature<OwnedFeature>(std::move(name), std::move(values));
}

std::string ExamplePayload(std::vector<OwnedFeature> features) {
  std::sort(features.begin(), features.end(),
            [](const OwnedFeature& a, const OwnedFeature& b) { return a.name < b.name; });
  return example::EncodeExample(ToTable(features));
}

std::optional<int64_t> SingleInt(const DecodedRecord& r, const std::string& name) {
  auto it = r.features.find(name);
  if (it == r.features.end() || it->second.kind != example::Kind::kInt64 ||
      it->second.int64s.size() != 1) {
    return std::nullopt;
  }
  return it->second.int64s[0];
}

std::vector<std::string> CopyAndPack(const Scratch& s, const std::vector<std::string>& sources,
                                     const std::vector<std::string>& froms,
                                     const std::string& prefix) {
  Mount d(PackConfig(s, sources, prefix));
  const absl::Status started = d.Start();
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return {};
  // One shell for all the copies keeps process start-up cheap.
  std::string script = "set -e\n";
  for (size_t i = 0; i < froms.size(); ++i) {
    script += "cp -r " + ShellQuote(s.mnt + "/" + froms[i]) + " " +
              ShellQuote(absl::StrFormat("%s/staging/c%04d", s.mnt, i)) + "\n";
  }
  CommandResult cp = Shell(script);
  EXPECT_EQ(cp.exit_code, 0) << cp.err << "\ndaemon:\n" << d.Stderr();
  EXPECT_EQ(ListDir(s.mnt + "/staging").size(), froms.size());
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err << "\ndaemon:\n" << d.Stderr();
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status);
  std::vector<std::string> payloads = AllPayloads(ReadPackedShards(s.out, prefix));
  EXPECT_EQ(payloads.size(), froms.size()) << u.out;
  EXPECT_EQ(ListDir(s.records()), std::vector<std::string>{});
  return payloads;
}

std::vector<std::string> ReadIndependently(const std::string& shard,
                                           const std::string& per_record) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  EXPECT_NE(root, nullptr) << "TFRECORDFS_SOURCE_ROOT is not set";
  if (root == nullptr) return {};
  const std::string script = absl::StrCat(
      "import sys; sys.path.insert(0, sys.argv[1] + '/tests/cli'); import tfrecord_check as t\n",
      "raw = open(sys.argv[2], 'rb').read(); print(t.codec_of(raw))\n",
      "for p in t.read_records(sys.argv[2]): print(", per_record, ")\n");
  CommandResult r = Run({"/usr/bin/python3", "-c", script, root, shard});
  EXPECT_EQ(r.exit_code, 0) << shard << ": " << r.err;
  return absl::StrSplit(r.out, '\n', absl::SkipEmpty());
}

std::string WriteShardWithCodec(const std::string& dir, const std::string& base,
                                const std::vector<std::string>& payloads,
                                const std::string& codec) {
  const std::string plain = dir + "/" + base;
  test::WriteShard(plain, payloads);
  if (codec == "none") return base;
  const std::string name = base + (codec == "gzip" ? ".gz" : ".zlib");
  const std::string cmd =
      codec == "gzip"
          ? absl::StrCat("gzip -n ", ShellQuote(plain))
          : absl::StrCat(
                "/usr/bin/python3 -c 'import sys, zlib; d = open(sys.argv[1], \"rb\")"
                ".read(); open(sys.argv[2], \"wb\").write(zlib.compress(d))' ",
                ShellQuote(plain), " ", ShellQuote(dir + "/" + name), " && rm ", ShellQuote(plain));
  CommandResult r = Shell(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return name;
}

}  // namespace tfrecordfs::mount_test::staging_test
