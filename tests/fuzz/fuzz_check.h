// Shared helpers of the fuzz targets.
//
// Every target defines LLVMFuzzerTestOneInput. It is linked two ways:
//   * with clang's libFuzzer (-Dfuzz=enabled, scripts/fuzz), where a broken
//     invariant prints the message and aborts, so libFuzzer saves the input;
//   * into a gtest replay driver (replay_main.cc, any compiler, suite
//     'unit'), built with TFRFS_FUZZ_REPLAY, where it throws FuzzFailure so
//     that the driver names the corpus file that broke it.
#ifndef TFRECORDFS_TESTS_FUZZ_FUZZ_CHECK_H_
#define TFRECORDFS_TESTS_FUZZ_FUZZ_CHECK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::fuzz {

struct FuzzFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void Fail(const char* file, int line, absl::string_view what) {
  const std::string msg = absl::StrCat(file, ":", line, ": fuzz invariant broken: ", what);
#ifdef TFRFS_FUZZ_REPLAY
  throw FuzzFailure(msg);
#else
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::abort();
#endif
}

// Pulls typed values off the front of the fuzz input; past the end it yields
// zeros and empty strings, so a target never reads out of bounds.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}
  explicit Bytes(absl::string_view s) : rest_(s) {}

  bool empty() const { return rest_.empty(); }
  size_t size() const { return rest_.size(); }
  uint8_t U8() {
    if (rest_.empty()) return 0;
    const uint8_t v = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return v;
  }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(U8()) << (8 * i);
    return v;
  }
  uint64_t U64() { return U32() | (static_cast<uint64_t>(U32()) << 32); }
  // Up to `max` bytes: the length comes from the next byte.
  absl::string_view Str(size_t max) {
    size_t n = U8();
    if (max < 255) n %= max + 1;
    n = std::min(n, rest_.size());
    absl::string_view s = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return s;
  }
  absl::string_view Rest() {
    absl::string_view s = rest_;
    rest_ = {};
    return s;
  }

 private:
  absl::string_view rest_;
};

}  // namespace tfrecordfs::fuzz

#define FUZZ_CHECK(cond, ...)                                                          \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      ::tfrecordfs::fuzz::Fail(__FILE__, __LINE__,                                     \
                               ::absl::StrCat(#cond, " " __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                  \
  } while (0)

namespace tfrecordfs::fuzz {

// The tail of a decoder target checked against protobuf: protobuf must
// accept what `decode` accepted (`Proto`), both must give the same canonical
// form, and `encode` of the table must decode back to it. `what` names the
// decoder in messages.
template <typename Proto, typename Table, typename CanonOfTable, typename CanonOfProto,
          typename Encode, typename Decode>
void CheckAgainstProtobuf(absl::string_view payload, const Table& table, const char* what,
                          CanonOfTable canon_of_table, CanonOfProto canon_of_proto, Encode encode,
                          Decode decode) {
  Proto proto;
  FUZZ_CHECK(proto.ParseFromArray(payload.data(), static_cast<int>(payload.size())),
             absl::StrCat(what, " accepts what protobuf refuses"));
  const auto ours = canon_of_table(table);
  FUZZ_CHECK(ours == canon_of_proto(proto), absl::StrCat(what, " and protobuf disagree"));
  const std::string again = encode(table);
  auto round = decode(again);
  FUZZ_CHECK(round.ok(), round.status().ToString());
  FUZZ_CHECK(canon_of_table(*round) == ours, "encode/decode round trip changed the table");
}

}  // namespace tfrecordfs::fuzz

// Defines LLVMFuzzerTestOneInput as `check(input)` for inputs of at most
// `max_size` bytes (larger ones are skipped: they only slow the fuzzer).
#define TFRFS_FUZZ_ENTRY(check, max_size)                                   \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    if (size > (max_size)) return 0;                                        \
    check(absl::string_view(reinterpret_cast<const char*>(data), size));    \
    return 0;                                                               \
  }

#endif  // TFRECORDFS_TESTS_FUZZ_FUZZ_CHECK_H_
