// NumPy .npy files <-> Tensor.
//
// numpy 1.x loads arrays of at most 32 dims (numpy 2: 64), and refuses a
// shape whose nonzero dims multiply (times the item size) past 2^63 - 1 even
// when another dim is 0 ([0, 2^62, 2^62]). NpyHeader writes any rank up to
// kMaxRank and leaves those limits to the caller (NpyLoadable).
//
// Layout of a version 1.0 file, as numpy >= 1.23's np.save writes it:
//
//   offset 0  "\x93NUMPY"             magic
//          6  01 00                   format version 1.0
//          8  <u16 LE HEADER_LEN>     length of the dict text below
//         10  "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
//             + spaces + "\n"         padded so 10 + HEADER_LEN % 64 == 0
//   10+HEADER_LEN  the elements, C order
//
// Versions 2.0 and 3.0 differ only in a u32 HEADER_LEN (offset 8, data at
// 12 + HEADER_LEN) and, for 3.0, UTF-8 header text. The keys are written
// sorted; shape is Python's tuple repr: "()", "(5,)", "(2, 3)". Before padding
// numpy appends 21 - len(repr(shape[0])) spaces (room for an in-place growth
// of the first axis) when the shape is not empty; the padding then adds
// 64 - ((10 + text + 1) % 64) spaces (64, not 0, when already aligned).
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_TENSOR_NPY_H_
#define TFRECORDFS_TENSOR_NPY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::tensor {

// The header np.save writes for an array of `dtype` and `shape` (version 1.0
// always suffices: at most kMaxRank dims). A whole .npy file is this header
// followed by the element bytes, so its size is NpyHeader(...).size() +
// NumBytes(dtype, shape).
std::string NpyHeader(DataType dtype, absl::Span<const int64_t> shape);
inline std::string NpyHeader(const Tensor& t) { return NpyHeader(t.dtype, t.shape); }

// The most dims an .npy view has: what numpy 1.x (and 2.x) can load.
inline constexpr size_t kMaxNpyRank = 32;

// OK when numpy can load an .npy of `dtype` and `shape`: at most kMaxNpyRank
// dims, and itemsize times the product of the nonzero dims at most
// 2^63 - 1; else InvalidArgument saying which limit.
absl::Status NpyLoadable(DataType dtype, absl::Span<const int64_t> shape);

// Parses a whole .npy file (versions 1.0, 2.0, 3.0). Accepts little-endian
// ('<') descrs, and '|' (or '<', '>', '=') for one-byte types, of the dtypes
// in tensor.h; the data must be exactly NumBytes(dtype, shape) bytes.
// Rejects with InvalidArgument and a reason: big-endian arrays (no silent
// conversion: re-save with .astype('<...')), fortran_order True with more
// than one dim (save a C-ordered array; for 0-d and 1-d arrays the bytes are
// the same, so those are accepted), object/pickled arrays ('O'), structured dtypes, other
// dtypes, malformed headers, missing or trailing data. The returned tensor
// has data_in_input set: its bytes are a view of `file`.
absl::StatusOr<Tensor> ParseNpy(absl::string_view file);

// What a .npy header says, for checking a file as its bytes arrive.
struct NpyHeaderInfo {
  DataType dtype = DataType::kFloat;
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;  // where the elements start
  uint64_t data_bytes = 0;   // how many bytes of them the shape needs
};
// Parses the header at the start of `prefix` (the first bytes of a file,
// possibly all of it): nullopt while the header is not all there yet (the
// bytes so far are a possible start), the header once it is, else
// ParseNpy's InvalidArgument for what is already wrong. Data bytes are not
// looked at.
absl::StatusOr<std::optional<NpyHeaderInfo>> ParseNpyHeader(absl::string_view prefix);

// Where the elements of a .npy file start (NpyHeaderInfo::data_offset), from
// its first bytes: known once the magic, the version and the header length
// are there (10 bytes for version 1.0, 12 for 2.0 and 3.0), before the
// header itself; 0 while they are not, or when they cannot start a file
// ParseNpyHeader accepts. Tells a reader how many bytes to read for
// ParseNpyHeader.
uint64_t NpyDataOffset(absl::string_view prefix);

}  // namespace tfrecordfs::tensor

#endif  // TFRECORDFS_TENSOR_NPY_H_
