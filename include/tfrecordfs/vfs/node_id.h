// Node ids: the 64-bit inode numbers the mount hands to the kernel. They are
// computed, not stored, so no per-file tree exists in memory.
//
//   bit 63..62  space
//     0 = tree   bits 61..0: index of a node in the source tree, plus one
//                (FUSE_ROOT_ID == 1 is tree node 0, the mount root)
//     1 = record bit  61    : the shard's generation, mod 2 (one more after
//                             each commit that rewrites the shard while
//                             mounted: the new shard's records get other
//                             ids than the old one's, which the kernel may
//                             still hold with their sizes and pages)
//                bits 60..44: shard id (17 bits, 131,072 shards)
//                bits 43..16: record index (28 bits, 268M records per shard)
//                bits 15..0 : entry in the record's layout (16 bits; entry 0
//                             is the record directory itself)
//     2 = staging: bits 60..0 name a node of the staging store (see
//                staging/store.h); bit 61 (kEditNodeTag) set: a node of
//                the edit store instead (record_edits.h)
//     3 = class  bits 61..0: a class folder of -o view=classes, its index
//                in ClassView's sorted folder list plus one (class_view.h);
//                the images in it are record-space ids (the record view's
//                files under other names), as are the gallery's
//
// Record-space ids do not hold these fields as they are but through Mix62, a
// bijection of 62-bit values (ShardOf / RecordOf / EntryOf undo it). The
// kernel keeps FUSE inodes in a hash table keyed by node id, and its hash
// (fs/inode.c) barely looks at high bits: with the shard in bits 61..44, the
// 5M inodes of a 1M-record mount shared ~60k buckets of its ~2M, and `find`
// spent its time walking hash chains. Mixed ids spread over all buckets.
//
// Pure and thread-safe.
#ifndef TFRECORDFS_VFS_NODE_ID_H_
#define TFRECORDFS_VFS_NODE_ID_H_

#include <cstdint>

namespace tfrecordfs::vfs {

inline constexpr int kSpaceShift = 62;
inline constexpr int kGenerationBits = 1;
inline constexpr int kShardBits = 17;
inline constexpr int kRecordBits = 28;
inline constexpr int kEntryBits = 16;
static_assert(kGenerationBits + kShardBits + kRecordBits + kEntryBits == kSpaceShift,
              "record-space fields must fill the 62 bits below the space tag");
inline constexpr int kGenerationShift = kShardBits + kRecordBits + kEntryBits;

inline constexpr uint64_t kMaxShards = uint64_t{1} << kShardBits;
inline constexpr uint64_t kMaxRecordsPerShard = uint64_t{1} << kRecordBits;
inline constexpr uint64_t kMaxEntriesPerRecord = uint64_t{1} << kEntryBits;

enum class Space : uint8_t { kTree = 0, kRecord = 1, kStaging = 2, kClass = 3 };

constexpr Space SpaceOf(uint64_t id) { return static_cast<Space>(id >> kSpaceShift); }

constexpr uint64_t TreeId(uint64_t tree_index) { return tree_index + 1; }
constexpr uint64_t TreeIndex(uint64_t id) { return (id & ((uint64_t{1} << kSpaceShift) - 1)) - 1; }

inline constexpr uint64_t kMask62 = (uint64_t{1} << kSpaceShift) - 1;
inline constexpr uint64_t kMix1 = 0xbf58476d1ce4e5b9ull & kMask62;  // odd: invertible
inline constexpr uint64_t kMix2 = 0x94d049bb133111ebull & kMask62;

// The inverse of an odd number modulo 2^64 (Newton's iteration), hence also
// modulo 2^62.
constexpr uint64_t OddInverse(uint64_t a) {
  uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}

// xor-shift-multiply steps (splitmix64's finaliser cut to 62 bits); each
// step is invertible, so Mix62 is a bijection on [0, 2^62).
constexpr uint64_t Mix62(uint64_t x) {
  x ^= x >> 31;
  x = (x * kMix1) & kMask62;
  x ^= x >> 29;
  x = (x * kMix2) & kMask62;
  return x ^ (x >> 32);
}

constexpr uint64_t Unmix62(uint64_t y) {
  y ^= y >> 32;
  y = (y * OddInverse(kMix2)) & kMask62;
  y ^= (y >> 29) ^ (y >> 58);
  y = (y * OddInverse(kMix1)) & kMask62;
  return y ^ (y >> 31);
}

// `generation`: the shard's (MountedShard::generation), of which the id
// keeps the lowest bit.
constexpr uint64_t RecordId(uint64_t shard, uint64_t record, uint64_t entry,
                            uint64_t generation = 1) {
  return (uint64_t{1} << kSpaceShift) |
         Mix62(((generation & 1) << kGenerationShift) | (shard << (kRecordBits + kEntryBits)) |
               (record << kEntryBits) | entry);
}
// The lowest bit of the generation a record-space id was made in.
constexpr uint64_t GenerationBitOf(uint64_t id) {
  return (Unmix62(id & kMask62) >> kGenerationShift) & 1;
}
constexpr uint64_t ShardOf(uint64_t id) {
  return (Unmix62(id & kMask62) >> (kRecordBits + kEntryBits)) & (kMaxShards - 1);
}
constexpr uint64_t RecordOf(uint64_t id) {
  return (Unmix62(id & kMask62) >> kEntryBits) & (kMaxRecordsPerShard - 1);
}
constexpr uint64_t EntryOf(uint64_t id) {
  return Unmix62(id & kMask62) & (kMaxEntriesPerRecord - 1);
}

inline constexpr uint64_t kEditNodeTag = uint64_t{1} << 61;
// A node of the edit store's folders (a staging-space id with kEditNodeTag):
// the files of a checked-out record and of added records.
constexpr bool IsEditId(uint64_t id) {
  return SpaceOf(id) == Space::kStaging && (id & kEditNodeTag) != 0;
}
constexpr uint64_t StagingId(uint64_t n) { return (uint64_t{2} << kSpaceShift) | n; }
constexpr uint64_t StagingIndex(uint64_t id) { return id & ((uint64_t{1} << kSpaceShift) - 1); }

constexpr uint64_t ClassFolderId(uint64_t i) { return (uint64_t{3} << kSpaceShift) | (i + 1); }
constexpr uint64_t ClassFolderIndex(uint64_t id) { return (id & kMask62) - 1; }

static_assert(IsEditId(StagingId(5) | kEditNodeTag) && !IsEditId(StagingId(5)) &&
              !IsEditId(RecordId(0, 1, 2)));
static_assert(ClassFolderIndex(ClassFolderId(7)) == 7 &&
              SpaceOf(ClassFolderId(0)) == Space::kClass);
static_assert(TreeId(0) == 1, "the mount root must be FUSE_ROOT_ID");
static_assert(Unmix62(Mix62(0x123456789abcdefull & kMask62)) == (0x123456789abcdefull & kMask62));
static_assert(Unmix62(Mix62(kMask62)) == kMask62 && Mix62(0) == 0);
static_assert(RecordId(0, 0, 0) != RecordId(0, 0, 1) && RecordOf(RecordId(0, 1, 0)) == 1);
static_assert(ShardOf(RecordId(kMaxShards - 1, 5, 7)) == kMaxShards - 1);
static_assert(RecordOf(RecordId(3, kMaxRecordsPerShard - 1, 7)) == kMaxRecordsPerShard - 1);
static_assert(EntryOf(RecordId(3, 5, kMaxEntriesPerRecord - 1)) == kMaxEntriesPerRecord - 1);
static_assert(SpaceOf(RecordId(kMaxShards - 1, kMaxRecordsPerShard - 1, kMaxEntriesPerRecord - 1,
                               3)) == Space::kRecord);
static_assert(RecordId(5, 6, 7, 1) != RecordId(5, 6, 7, 2) && ShardOf(RecordId(5, 6, 7, 2)) == 5 &&
              RecordOf(RecordId(5, 6, 7, 2)) == 6 && EntryOf(RecordId(5, 6, 7, 2)) == 7 &&
              GenerationBitOf(RecordId(5, 6, 7, 2)) == 0 &&
              GenerationBitOf(RecordId(kMaxShards - 1, 6, 7, 3)) == 1);

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_NODE_ID_H_
