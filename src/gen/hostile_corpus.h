// The hostile corpus: the damaged and strange inputs the mount must survive
// (truncations, stray bytes, CRC mismatches, a length near 2^64, empty and
// non-TFRecord files, non-Example payloads, malformed protobuf, wire-format
// variants, awkward feature names, a record too wide to show). Built in
// memory; `tfrecordfs-gen hostile` writes it with a manifest (hostile.cc),
// `fuzz-seeds` cuts seeds from it (fuzz_seeds.cc), and tests/mount/hostile
// checks the mount against the manifest.
//
// Every case is built with the project's writer (record::AppendFramed) and
// then damaged with byte edits, the way leveldb's log_test does; payloads no
// encoder would write come from reference::wire. Each record carries what the
// generator knows it wrote: intact or damaged, an Example or not, where its
// framing starts.
//
// Thread-safety: BuildHostileCorpus is a pure function; a HostileShard is a
// value.
#ifndef TFRECORDFS_SRC_GEN_HOSTILE_CORPUS_H_
#define TFRECORDFS_SRC_GEN_HOSTILE_CORPUS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tfrecordfs::gen {

struct HostileRecord {
  bool intact = true;
  bool example = true;  // the payload is a tf.train.Example the mount shows as files
  uint64_t offset = 0;  // byte offset of its framing
  std::string payload;
};

// One shard file: its bytes and what the records in it are.
struct HostileShard {
  std::string name;
  std::string bytes;
  std::vector<HostileRecord> records;

  // Appends a framed record; returns its index.
  size_t Add(std::string payload, bool example = true);
  // Appends n small intact Examples ({id, name} of their index).
  void AddGood(size_t n);
  uint64_t HeaderOf(size_t i) const;  // offset of record i's header
  uint64_t DataOf(size_t i) const;    // offset of record i's payload
  // Flips the low bit of the byte at `offset` (the caller marks the record).
  void Flip(uint64_t offset);
  // Sets record i's length field and gives it a matching length CRC, so the
  // header itself passes and only the length is wrong; marks it damaged.
  void SetLengthWithCrc(size_t i, uint64_t len);
};

struct HostileCorpus {
  std::vector<HostileShard> shards;
  std::vector<std::pair<std::string, std::string>> plain_files;  // name, bytes
};

// The whole corpus; the same bytes on every call.
HostileCorpus BuildHostileCorpus();

// Record k of the tiny-records shard: Example{"i": int64[k]}.
std::string TinyPayload(uint64_t k);

}  // namespace tfrecordfs::gen

#endif  // TFRECORDFS_SRC_GEN_HOSTILE_CORPUS_H_
