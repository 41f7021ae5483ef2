// fuzz-seeds (commands.h): seeds for tests/fuzz/corpus/<target>/: the small
// hostile shards (walker), their payloads (example), those payloads behind
// the naming and staging targets' mode bytes, structured programs for the
// naming and staging targets, and small compressed shards and their index
// files (inflate, index_file). See tests/fuzz/*_fuzzer.cc for the input
// formats.
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "hostile_corpus.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/reference/zlib_codec.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::gen {
namespace {

// A small shard of text-like records: compresses well, so its checkpoint
// windows stay small.
std::string SmallTextShard(int records) {
  std::string out;
  for (int i = 0; i < records; ++i) {
    std::string payload;
    for (int k = 0; k < 4 + i % 7; ++k) absl::StrAppend(&payload, "feature ", i, " value ", k, ";");
    record::AppendFramed(&out, payload);
  }
  return out;
}

// `data` (any bytes, damaged framing included) as one `codec` stream, by
// zlib at level 1 with a full flush every KiB (byte-aligned boundaries).
std::string Compressed(absl::string_view data, source::Codec codec) {
  return reference::zlib::Deflate(
      data,
      codec == source::Codec::kGzip ? reference::zlib::Wrap::kGzip : reference::zlib::Wrap::kZlib,
      /*level=*/1, Z_DEFAULT_STRATEGY, /*flush_every=*/1024);
}

// An index file of a compressed shard with checkpoints every `span`
// compressed bytes, as the index store would save it.
std::string CompressedIndexFile(const std::string& file, source::Codec codec, uint64_t span) {
  const int raw = memfd_create("gen", MFD_CLOEXEC);
  if (raw < 0) return "";
  UniqueFd fd(raw);
  if (!WriteFull(fd.get(), file.data(), file.size(), "memfd").ok()) return "";
  auto walked = index::WalkShard(fd.get(), "/data/seed.tfrecord.gz", file.size(), codec, span);
  if (!walked.ok()) return "";
  index::IndexFile f;
  f.file_size = file.size();
  f.mtime_ns = 1700000000000000000;
  std::memcpy(f.first_header.data(), file.data(), std::min<size_t>(12, file.size()));
  if (file.size() >= 12) std::memcpy(f.last_header.data(), file.data() + file.size() - 12, 12);
  f.path = "/data/seed.tfrecord.gz";
  f.walk = walked->walk;
  f.codec = codec;
  f.data_size = walked->checkpoints->data_size;
  f.checkpoints = walked->checkpoints->points;
  f.windows = walked->windows_blob;
  return index::EncodeIndexFile(f);
}

// Seeds for the compressed-shard and index-file targets (tests/fuzz/
// inflate_fuzzer.cc, index_file_fuzzer.cc).
bool CompressedFuzzSeeds(
    const std::function<bool(absl::string_view, absl::string_view, absl::string_view)>& put) {
  bool ok = true;
  const std::string shard = SmallTextShard(12);
  const std::string gz = Compressed(shard, source::Codec::kGzip);
  const std::string zz = Compressed(shard, source::Codec::kZlib);
  auto seed = [](uint8_t mode, uint8_t a, uint8_t b, absl::string_view rest) {
    return absl::StrCat(
        std::string({static_cast<char>(mode), static_cast<char>(a), static_cast<char>(b)}), rest);
  };
  // [mode][a][b]: see inflate_fuzzer.cc.
  ok &= put("inflate", "gzip-file", seed(0x00, 0, 0, gz));
  ok &= put("inflate", "zlib-file", seed(0x01, 0, 0, zz));
  ok &= put("inflate", "gzip-two-members", seed(0x00, 0, 0, gz + gz));
  ok &= put("inflate", "gzip-then-garbage", seed(0x00, 0, 0, gz + "garbage"));
  ok &= put("inflate", "zlib-then-bytes", seed(0x01, 0, 0, zz + zz));
  ok &= put("inflate", "gzip-truncated", seed(0x00, 0, 0, gz.substr(0, gz.size() / 2)));
  ok &= put("inflate", "plain-shard-as-gzip", seed(0x00, 0, 0, shard));
  ok &= put("inflate", "compress-gzip", seed(0x02, 6, 255, shard));
  ok &= put("inflate", "compress-zlib-stored", seed(0x03, 0, 255, shard));
  ok &= put("inflate", "compress-gzip-cut", seed(0x02, 9, 140, shard));
  ok &= put("inflate", "compress-gzip-flip", seed(0x06, 77, 255, shard));
  ok &= put("inflate", "compress-gzip-2-members-span-1", seed(0x1a, 1, 255, shard));
  ok &= put("inflate", "compress-zlib-span-100", seed(0x23, 5, 255, shard));
  ok &= put("inflate", "empty-gzip", seed(0x02, 6, 255, ""));
  // Index files: a compressed shard with many checkpoints, one with only
  // the stream start, a ZLIB one, and a damaged shard's (problems).
  const std::string big = SmallTextShard(150);
  ok &= put("index_file", "gzip-checkpoints",
            CompressedIndexFile(Compressed(big, source::Codec::kGzip), source::Codec::kGzip, 1500));
  ok &= put("index_file", "gzip-start-only",
            CompressedIndexFile(gz, source::Codec::kGzip, source::kDefaultSpan));
  ok &= put("index_file", "zlib-checkpoints",
            CompressedIndexFile(Compressed(big, source::Codec::kZlib), source::Codec::kZlib, 2500));
  ok &= put("index_file", "gzip-truncated",
            CompressedIndexFile(gz.substr(0, gz.size() - 30), source::Codec::kGzip, 64));
  std::string damaged = SmallTextShard(20);
  damaged[200] ^= 1;
  damaged[5] ^= 1;
  ok &= put("index_file", "zlib-damaged-records",
            CompressedIndexFile(Compressed(damaged, source::Codec::kZlib) + "x",
                                source::Codec::kZlib, 128));
  return ok;
}

}  // namespace

int FuzzSeeds(const std::string& dir) {
  const HostileCorpus c = BuildHostileCorpus();
  for (const char* t : {"walker", "example", "naming", "staging", "inflate", "index_file"}) {
    ::mkdir(dir.c_str(), 0755);
    ::mkdir(absl::StrCat(dir, "/", t).c_str(), 0755);
  }
  auto put = [&](absl::string_view target, absl::string_view name, absl::string_view bytes) {
    absl::Status st = WriteFileAtomically(absl::StrCat(dir, "/", target, "/", name), bytes);
    if (!st.ok()) std::cerr << "tfrecordfs-gen: " << st.message() << "\n";
    return st.ok();
  };
  constexpr size_t kMaxSeed = 4096;
  bool ok = true;
  for (const HostileShard& s : c.shards) {
    std::string stem = s.name;
    if (const size_t dot = stem.find('.'); dot != std::string::npos) stem.resize(dot);
    if (s.bytes.size() <= kMaxSeed) ok &= put("walker", stem, s.bytes);
    for (size_t i = 0; i < s.records.size(); ++i) {
      const std::string& p = s.records[i].payload;
      if (p.size() > kMaxSeed) continue;
      const std::string name = absl::StrCat(stem, "-", i);
      ok &= put("example", name, p);
      // naming: mode 1 (decode the rest as an Example), no escape bytes.
      ok &= put("naming", name, std::string("\x01\x00", 2) + p);
    }
  }
  // Structured programs (table_gen.h): mode byte, then features of
  // [how=0 (dictionary), word, kind, count, values...].
  const std::string table =
      std::string("\x03", 1) +                                        // 3 features
      std::string("\x00\x09\x03\x02", 4) + std::string(16, '\x01') +  // "image" int64 x2
      std::string("\x00\x0a\x01\x01\x00\x08", 6) + "\xff\xd8\xff" +   // image/encoded bytes
      std::string("\x00\x0c\x02\x01", 4) + std::string(4, '\x3f');    // "record" float
  ok &= put("naming", "table-image", std::string("\x00\x00", 2) + table);
  ok &= put("staging", "table-image", std::string("\x01", 1) + table);
  // staging mode 0: [ops, (op, component...)...]: mkdir "a", create files.
  const std::string folder = std::string("\x06", 1) + std::string("\x00\x01\x06", 3) +  // mkdir "a"
                             std::string("\x01\x01\x01\x03", 4) + "1\n2" +  // a/0 = "1\n2"
                             std::string("\x01\x01\x02\x02", 4) + "x\n" +   // a/1
                             std::string("\x05", 1) +                       // up
                             std::string("\x02\x01\x00\x04", 4) + "raw!" +  // record.bin
                             std::string("\x04\x01\x0e", 3);                // symlink "label"
  ok &= put("staging", "folder-basic", std::string("\x00", 1) + folder);
  ok &= put("staging", "folder-raw",
            std::string("\x00\x01\x02\x01\x00\x05", 6) + "bytes");  // only record.bin
  ok &= CompressedFuzzSeeds(put);
  return ok ? 0 : 1;
}

}  // namespace tfrecordfs::gen
