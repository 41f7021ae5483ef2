// Which part does what when one command runs as N parts (`--part K/N`):
// the plan is a pure function of the sorted inputs, their sizes, N and a
// salt (the command and the options that shape its output), so that every
// part computes the same plan on any machine, with no coordinator, and a
// retried part (a re-run pod) does exactly the work it did before.
//
// Layout: the inputs, in the order given (the scan's listing order: source
// by source, bytewise by name), are laid end to end as one range of
// T bytes; part k owns the bytes [floor(k*T/N), floor((k+1)*T/N)). A file
// that may be split is cut at those points into pieces, each piece going to
// the part that owns its first byte; a file that may not is one piece,
// owned by the part that owns its middle byte. So every part holds about
// T/N bytes (at most T/N plus the largest unsplittable file), every byte of
// every file belongs to exactly one piece, and the parts' pieces, taken in
// part order, are the inputs in order.
//
// A piece of a split shard owns the records that begin inside it
// (PieceRecords, from the shard's index): a record is never split, and
// every record belongs to exactly one piece.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_RESHAPE_PLAN_H_
#define TFRECORDFS_RESHAPE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/index/shard_index.h"

namespace tfrecordfs::reshape {

// The most parts a plan has (output names carry five digits).
inline constexpr uint32_t kMaxParts = 99999;

// Part `index` of `count` (0 <= index < count <= kMaxParts).
struct PartSpec {
  uint32_t index = 0;
  uint32_t count = 1;
};

// "K/N" (decimal digits only) as a PartSpec; InvalidArgument saying what is
// wrong otherwise ("5/4": K must be below N; "0/0", "a/b", "1/", "-1/4").
absl::StatusOr<PartSpec> ParsePartSpec(absl::string_view text);

struct PlanFile {
  std::string path;  // names the file in the plan's id
  uint64_t size = 0;
  bool splittable = false;  // may be cut into pieces (a plain shard with an index)
};

// A byte range [begin, end) of one input file.
struct Piece {
  size_t file = 0;  // index into the files given to PlanParts
  uint64_t begin = 0, end = 0;
  bool whole = true;  // the whole file (begin 0, end its size)
};

struct PartPlan {
  uint32_t parts = 1;
  // pieces[k]: part k's pieces, in input order.
  std::vector<std::vector<Piece>> pieces;
  // A fingerprint of everything the plan depends on (the files' paths,
  // sizes and splittability, N, the salt): FNV-1a 64 of a canonical text.
  uint64_t id = 0;
  // `id` as 16 lower-case hex digits (what manifests and directory names
  // carry).
  std::string IdHex() const;
};

// The plan of `files` over `parts` parts (>= 1). `salt` says what the
// parts compute (e.g. "reshard shards=4 seed=7"): plans of different work
// get different ids.
PartPlan PlanParts(const std::vector<PlanFile>& files, uint32_t parts, absl::string_view salt);

// The records of the shard indexed by `idx` that `piece` owns, as a range
// [first, last) of record numbers: all of them for a whole piece, else
// those whose first byte (idx.begin) lies in [piece.begin, piece.end). A
// compressed shard's offsets are not file offsets: the piece holding its
// first byte owns all its records, the others none.
std::pair<uint64_t, uint64_t> PieceRecords(const index::ShardIndex& idx, const Piece& piece);

// Items 0..n-1 of the given weights (in order) split into `parts`
// contiguous runs balanced by weight, as PlanParts places unsplittable
// files: item i goes to the run owning its middle unit of weight. Run k is
// [cuts[k], cuts[k+1]); returns parts + 1 cuts, cuts[0] = 0,
// cuts[parts] = n (a run may be empty).
std::vector<size_t> SplitByWeight(const std::vector<uint64_t>& weights, uint32_t parts);

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_PLAN_H_
