// Fuzz target: the .npy reader. The input is a .npy file. Invariants:
//   * ParseNpy and ParseNpyHeader never crash and fail only with
//     InvalidArgument;
//   * ParseNpyHeader of every prefix is "not yet" (nullopt) or the same
//     answer as for the whole file, never a different one: a file checked
//     as its bytes arrive is judged as it will be when complete;
//   * an accepted file's data span is inside it and holds exactly
//     NumBytes(dtype, shape) bytes;
//   * NpyHeader of the result, followed by the same elements, parses back to
//     the same array (the view the mount shows is readable by ParseNpy).
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::fuzz {
namespace {

void Check(absl::string_view in) {
  auto whole = tensor::ParseNpyHeader(in);
  FUZZ_CHECK(whole.ok() || absl::IsInvalidArgument(whole.status()), whole.status().ToString());
  // Prefixes: a few lengths near the header's end and some before it.
  for (size_t n : {size_t{0}, size_t{5}, size_t{9}, size_t{11}, in.size() / 2, in.size()}) {
    if (n > in.size()) continue;
    auto part = tensor::ParseNpyHeader(in.substr(0, n));
    FUZZ_CHECK(part.ok() || absl::IsInvalidArgument(part.status()), part.status().ToString());
    if (!part.ok()) {
      FUZZ_CHECK(!whole.ok(), "a prefix of ", n,
                 " bytes is refused, the whole file is not: ", part.status().ToString());
      continue;
    }
    if (!part->has_value()) continue;
    FUZZ_CHECK(whole.ok() && whole->has_value(), "a prefix has a header the file has not");
    FUZZ_CHECK((*part)->dtype == (*whole)->dtype && (*part)->shape == (*whole)->shape &&
                   (*part)->data_offset == (*whole)->data_offset,
               "a prefix's header differs from the file's");
  }
  auto t = tensor::ParseNpy(in);
  if (!t.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(t.status()), t.status().ToString());
    return;
  }
  FUZZ_CHECK(whole.ok() && whole->has_value());
  auto bytes = tensor::NumBytes(t->dtype, t->shape);
  FUZZ_CHECK(bytes.ok());
  FUZZ_CHECK(t->data_in_input && t->data_offset + t->data_size == in.size() &&
             t->data_size == static_cast<uint64_t>(*bytes));
  const std::string again = tensor::NpyHeader(t->dtype, t->shape) + std::string(t->data(in));
  auto round = tensor::ParseNpy(again);
  FUZZ_CHECK(round.ok(), round.status().ToString());
  FUZZ_CHECK(
      round->dtype == t->dtype && round->shape == t->shape && round->data(again) == t->data(in),
      "NpyHeader + data does not parse back");
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1u << 20)
