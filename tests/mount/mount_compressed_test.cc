// Compressed twins: tfrecordfs-gen writes the same dataset plain, as GZIP
// (several members per shard) and as ZLIB; each is mounted and every file of
// every compressed shard must equal its plain twin's (mode, size, bytes),
// with the shard directory keeping the compressed file's name.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::mount_test {
namespace {

std::string GenPath() {
  const char* root = std::getenv("TFRECORDFS_BUILD_ROOT");
  return root ? std::string(root) + "/src/gen/tfrecordfs-gen" : "";
}

// Generates `mode` (sample or synthetic) into dir with extra flags.
void Generate(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GenPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.begin() + 2, dir);
  CommandResult r = RunCommand(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// The walk of a mount with each compressed shard's name mapped to its plain
// twin's (`suffix` dropped from the first path component).
std::map<std::string, WalkedNode> Renamed(std::map<std::string, WalkedNode> walked,
                                          const std::string& suffix) {
  std::map<std::string, WalkedNode> out;
  for (auto& [rel, node] : walked) {
    const size_t slash = rel.find('/');
    std::string top = rel.substr(0, slash);
    if (absl::EndsWith(top, suffix)) top.resize(top.size() - suffix.size());
    out[slash == std::string::npos ? top : top + rel.substr(slash)] = std::move(node);
  }
  return out;
}

class CompressedTwinTest : public ::testing::TestWithParam<std::vector<std::string>> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    struct stat st;
    if (GenPath().empty() || ::stat(GenPath().c_str(), &st) != 0) {
      GTEST_SKIP() << "tfrecordfs-gen not built at '" << GenPath() << "'";
    }
  }
  TempDir tmp_;
};

TEST_P(CompressedTwinTest, EveryFileEqualsItsPlainTwin) {
  const std::vector<std::string>& gen = GetParam();
  const std::string plain = tmp_.path() + "/plain";
  Generate(plain, gen);
  ASSERT_FALSE(HasFatalFailure());
  Mount pm;
  ASSERT_EQ(pm.Start({plain}), absl::OkStatus());
  auto expected = WalkTree(pm.mountpoint());
  RemoveEmptyStaging(&expected);
  size_t shards = 0;
  for (const auto& [rel, node] : expected) {
    if (rel.find('/') == std::string::npos && absl::EndsWith(rel, ".tfrecord")) ++shards;
  }
  ASSERT_GE(shards, 2u);

  struct Variant {
    std::string name;
    std::vector<std::string> flags;
    std::string suffix;  // added to ".tfrecord"
  };
  const std::vector<Variant> variants = {
      {"gzip", {"--compression", "gzip"}, ".gz"},
      {"gzip3", {"--compression", "gzip", "--members", "3"}, ".gz"},
      {"zlib", {"--compression", "zlib"}, ".zlib"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const std::string dir = tmp_.path() + "/" + v.name;
    std::vector<std::string> args = gen;
    args.insert(args.end(), v.flags.begin(), v.flags.end());
    Generate(dir, args);
    ASSERT_FALSE(HasFatalFailure());
    Mount m;
    // A small span: many checkpoints, so reads resume mid-stream.
    ASSERT_EQ(m.Start({dir}, {"-o", "gz_span=64K,inflate_cache_mb=1"}), absl::OkStatus());
    auto raw = WalkTree(m.mountpoint());
    RemoveEmptyStaging(&raw);
    size_t compressed_shards = 0;
    for (const auto& [rel, node] : raw) {
      if (rel.find('/') == std::string::npos && absl::EndsWith(rel, ".tfrecord" + v.suffix)) {
        ++compressed_shards;
        EXPECT_TRUE(S_ISDIR(node.mode)) << rel << " is not shown as a directory";
      }
    }
    EXPECT_EQ(compressed_shards, shards);
    const auto got = Renamed(std::move(raw), v.suffix);
    ASSERT_EQ(got.size(), expected.size());
    size_t files = 0;
    for (const auto& [rel, want] : expected) {
      auto it = got.find(rel);
      ASSERT_NE(it, got.end()) << rel << " missing";
      const WalkedNode& have = it->second;
      EXPECT_EQ(have.error, want.error) << rel;
      EXPECT_EQ(have.mode, want.mode) << rel;
      if (S_ISREG(want.mode)) {
        ++files;
        EXPECT_EQ(have.size, want.size) << rel;
        EXPECT_TRUE(have.content == want.content) << rel << ": contents differ";
      }
    }
    EXPECT_GT(files, 100u);
    std::string err;
    EXPECT_EQ(m.Stop(&err), 0) << err << m.Stderr();
    EXPECT_EQ(m.Stderr().find("warning"), std::string::npos) << m.Stderr();
  }
  std::string err;
  EXPECT_EQ(pm.Stop(&err), 0) << err;
}

// Parallel random readers over more compressed shards than the mount keeps
// open (-o max_open=2): every read goes through a descriptor lease that may
// have been closed and reopened since the shard's inflate cursor last ran,
// and a cursor restarted at a checkpoint must read through the current
// lease. Each read is compared with Python's own gzip / zlib decoding of the
// shard file (an independent decoder of both the compression and the
// framing). Payloads start with 0xff (no Example parses), so each record
// shows its payload as record.bin.
constexpr char kRandomReader[] = R"PY(
import gzip, os, random, struct, sys, threading, zlib
src, mnt, threads, reads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
shards = {}
for name in sorted(os.listdir(src)):
    raw = open(os.path.join(src, name), 'rb').read()
    data = gzip.decompress(raw) if name.endswith('.gz') else zlib.decompress(raw)
    recs, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from('<Q', data, pos)
        recs.append(data[pos + 12:pos + 12 + n])
        pos += 16 + n
    shards[name] = recs
names = sorted(shards)
bad, errors, done = [], [], [0]
lock = threading.Lock()
def reader(seed):
    rng = random.Random(seed)
    for _ in range(reads):
        name = rng.choice(names)
        recs = shards[name]
        i = rng.randrange(len(recs))
        want = recs[i]
        off = rng.randrange(len(want))
        n = rng.choice([1, 100, 4096, 70000, len(want)])
        path = '%s/%s/%0*d/record.bin' % (mnt, name, len(str(len(recs) - 1)), i)
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                got = os.pread(fd, n, off)
            finally:
                os.close(fd)
        except OSError as e:
            with lock:
                errors.append('%s: %s' % (path, e))
            continue
        if got != want[off:off + n]:
            with lock:
                bad.append('%s at %d: %d bytes, expected %d' % (path, off, len(got), len(want[off:off + n])))
        with lock:
            done[0] += 1
ts = [threading.Thread(target=reader, args=(k,)) for k in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print('reads', done[0], 'errors', len(errors), 'mismatches', len(bad))
for line in (errors + bad)[:10]:
    print(line)
sys.exit(1 if errors or bad else 0)
)PY";

TEST(CompressedReads, ParallelRandomReadsWithFewerDescriptorsThanShards) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 not found";
  TempDir tmp;
  const std::string src = tmp.path() + "/src";
  ASSERT_EQ(::mkdir(src.c_str(), 0755), 0);
  static const char* kWords[] = {"tensor", "record", "feature", "image",   "label",      "shard ",
                                 "\n",     "0.25",   "bbox",    "encoded", "float_list", "int64"};
  std::mt19937_64 rng(2024);
  for (int s = 0; s < 12; ++s) {
    const bool gzip = s % 2 == 0;
    const std::string path =
        absl::StrCat(src, "/part-", s, gzip ? ".tfrecord.gz" : ".tfrecord.zlib");
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_TRUE(fd.ok()) << fd.status();
    record::ShardWriter w(std::move(*fd), path,
                          {gzip ? source::Codec::kGzip : source::Codec::kZlib, 6});
    for (int r = 0; r < 40; ++r) {
      std::string payload = "\xff";  // field 31, wire type 7: never an Example
      const size_t size = 1000 + rng() % 40000;
      while (payload.size() < size) {
        payload += kWords[rng() % 12];
        payload += static_cast<char>('a' + rng() % 26);
      }
      ASSERT_TRUE(w.Append(payload).ok());
    }
    ASSERT_TRUE(w.Close(false).ok());
  }
  Mount m;
  // Two descriptors for twelve shards, a checkpoint every 64 KiB and a
  // 1 MiB block cache: most reads restart a cursor whose descriptor was
  // closed (and its number reused) since it last ran.
  ASSERT_EQ(m.Start({src}, {"-o", "max_open=2,gz_span=64K,inflate_cache_mb=1"}), absl::OkStatus());
  CommandResult r =
      RunCommand({"/usr/bin/python3", "-c", kRandomReader, src, m.mountpoint(), "8", "150"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reads 1200 errors 0 mismatches 0"), std::string::npos) << r.out;
  std::string err;
  EXPECT_EQ(m.Stop(&err), 0) << err;
  EXPECT_EQ(m.Stderr().find("changed under the mount"), std::string::npos) << m.Stderr();
}

// A GZIP shard of `records` records of 200-3200 bytes of words, each never
// an Example (shown as record.bin), at zlib level 6; *data_size gets its
// uncompressed size.
void WriteWordsShard(const std::string& path, int records, uint64_t* data_size) {
  static const char* kWords[] = {"tensor", "record", "feature", "image",   "label",      "shard ",
                                 "\n",     "0.25",   "bbox",    "encoded", "float_list", "int64"};
  std::mt19937_64 rng(2026);
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status();
  record::ShardWriter w(std::move(*fd), path, {source::Codec::kGzip, 6});
  for (int r = 0; r < records; ++r) {
    std::string payload = "\xff";  // never an Example: shown as record.bin
    const size_t size = 200 + rng() % 3000;
    while (payload.size() < size) {
      payload += kWords[rng() % 12];
      payload += static_cast<char>('a' + rng() % 26);
      payload += static_cast<char>(rng());  // a byte no later record repeats
    }
    *data_size += payload.size() + 16;
    ASSERT_TRUE(w.Append(payload).ok());
  }
  ASSERT_TRUE(w.Close(false).ok());
}

// A 6,000-record GZIP shard of words in TMP/src, indexed into TMP/idx by
// `tfrecordfs index --index-dir` (the setup of the index_dir tests below).
void IndexedWordsShard(const TempDir& tmp, std::string* src, std::string* idx,
                       uint64_t* data_size) {
  *src = tmp.path() + "/src";
  *idx = tmp.path() + "/idx";
  ASSERT_EQ(::mkdir(src->c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(idx->c_str(), 0755), 0);
  WriteWordsShard(*src + "/part-0.tfrecord.gz", 6000, data_size);
  if (::testing::Test::HasFatalFailure()) return;
  CommandResult built = RunCommand({BinaryPath(), "index", "-q", "--index-dir", *idx, *src});
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
}

// The index `tfrecordfs index` builds for a GZIP shard at the default span
// lays checkpoints closer than the span (their windows sparse: only the
// bytes the data after each refers back to; the same index every time), in a shared index_dir (an
// index others may write: the daemon checks every checkpoint, sparse
// windows included, against the stream before a read resumes at it), and
// random reads through the mount equal Python's own gzip decoding.
TEST(CompressedReads, DenseCheckpointsWithSparseWindowsReadLikePythonsGzip) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 not found";
  TempDir tmp;
  std::string src, idx;
  uint64_t data_size = 0;
  IndexedWordsShard(tmp, &src, &idx, &data_size);
  if (HasFatalFailure()) return;
  // The checkpoint count (u32 at byte 80 of the index file, index/index_file.h).
  CommandResult found = RunCommand({"/usr/bin/find", idx, "-name", "*.tfri"});
  ASSERT_EQ(found.exit_code, 0) << found.err;
  const std::string tfri = found.out.substr(0, found.out.find('\n'));
  auto bytes = ReadFileToString(tfri);
  ASSERT_TRUE(bytes.ok()) << bytes.status() << " " << found.out;
  ASSERT_GT(bytes->size(), 84u);
  uint32_t checkpoints = 0;
  for (int i = 3; i >= 0; --i)
    checkpoints = checkpoints << 8 | static_cast<uint8_t>((*bytes)[80 + i]);
  // One a span (1 MiB) apart would give data_size / 1 MiB + 1.
  EXPECT_GT(checkpoints, 2 * (data_size >> 20) + 2) << data_size << " bytes";
  // The windows are made on a thread beside the inflate (source/
  // scan_output.h), yet where checkpoints go depends on the stream alone:
  // a second build writes the same index, byte for byte.
  const std::string idx2 = tmp.path() + "/idx2";
  ASSERT_EQ(::mkdir(idx2.c_str(), 0755), 0);
  CommandResult again = RunCommand({BinaryPath(), "index", "-q", "--index-dir", idx2, src});
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  auto bytes2 = ReadFileToString(idx2 + tfri.substr(idx.size()));
  ASSERT_TRUE(bytes2.ok()) << bytes2.status();
  EXPECT_TRUE(*bytes2 == *bytes) << bytes2->size() << " bytes against " << bytes->size();

  Mount m;
  ASSERT_EQ(m.Start({src}, {"-o", "ro,index_dir=" + idx + ",inflate_cache_mb=1"}),
            absl::OkStatus());
  CommandResult r =
      RunCommand({"/usr/bin/python3", "-c", kRandomReader, src, m.mountpoint(), "2", "400"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reads 800 errors 0 mismatches 0"), std::string::npos) << r.out;
  std::string err;
  EXPECT_EQ(m.Stop(&err), 0) << err;
  EXPECT_EQ(m.Stderr().find("does not match the stream"), std::string::npos) << m.Stderr();
  EXPECT_EQ(m.Stderr().find("error"), std::string::npos) << m.Stderr();
}

// A random read resumes at a checkpoint and loads its window from the index
// file: the file is opened once and kept open (Windows::InFile), not opened
// per window (issue 36: 59 opens of the index file for one deep read; one
// per read that resumed at a checkpoint). Counted with strace around the
// daemon: every openat of the index file, over a mount that serves 300
// random reads of a GZIP shard whose index lies in an index_dir; the bytes
// still equal Python's gzip decoding.
TEST(CompressedReads, WindowsComeFromOneOpenOfTheIndexFile) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 not found";
  if (::access("/usr/bin/strace", X_OK) != 0) GTEST_SKIP() << "/usr/bin/strace not found";
  TempDir tmp;
  std::string src, idx;
  uint64_t data_size = 0;
  IndexedWordsShard(tmp, &src, &idx, &data_size);
  if (HasFatalFailure()) return;

  const std::string trace = tmp.path() + "/strace.log";
  MountConfig config;
  config.sources = {src};
  config.options = {"ro", "index_dir=" + idx, "inflate_cache_mb=1"};
  config.wrapper = {"/usr/bin/strace", "-f", "-qq", "-e", "trace=open,openat", "-o", trace};
  Mount m(config);
  // LeakSanitizer cannot run under ptrace: in the ASan build the traced
  // daemon starts with its leak check off (its environment is copied at
  // start, so the test's own is restored at once).
  const char* asan = ::getenv("ASAN_OPTIONS");
  const std::string saved = asan != nullptr ? asan : "";
  ::setenv("ASAN_OPTIONS", (saved.empty() ? "" : saved + ":").append("detect_leaks=0").c_str(), 1);
  const absl::Status started = m.Start();
  if (asan != nullptr) {
    ::setenv("ASAN_OPTIONS", saved.c_str(), 1);
  } else {
    ::unsetenv("ASAN_OPTIONS");
  }
  ASSERT_EQ(started, absl::OkStatus());
  CommandResult r =
      RunCommand({"/usr/bin/python3", "-c", kRandomReader, src, m.mountpoint(), "1", "300"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reads 300 errors 0 mismatches 0"), std::string::npos) << r.out;
  std::string err;
  EXPECT_EQ(m.Stop(&err), 0) << err;
  auto log = ReadFileToString(trace);
  ASSERT_TRUE(log.ok()) << log.status();
  int opens = 0, errors = 0;
  for (absl::string_view line : absl::StrSplit(*log, '\n')) {
    if (absl::StrContains(line, ".tfri") && absl::StrContains(line, "open")) ++opens;
  }
  // The mount reads the index whole once (and may check it once more
  // against the shard); every window after that comes from one open.
  for (absl::string_view line : absl::StrSplit(m.Stderr(), '\n')) {
    if (absl::StrContains(line, "error")) ++errors;
  }
  EXPECT_EQ(errors, 0) << m.Stderr();
  EXPECT_LE(opens, 3) << *log;
}

INSTANTIATE_TEST_SUITE_P(Datasets, CompressedTwinTest,
                         ::testing::Values(
                             // JPEG records with every feature kind.
                             std::vector<std::string>{"sample", "--records", "60", "--shards", "3"},
                             // Incompressible 40 KiB images: stored blocks, several MiB per shard.
                             std::vector<std::string>{"synthetic", "--records", "300", "--shards",
                                                      "2", "--bytes", "40000"}),
                         [](const ::testing::TestParamInfo<std::vector<std::string>>& info) {
                           return info.param[0];
                         });

}  // namespace
}  // namespace tfrecordfs::mount_test
