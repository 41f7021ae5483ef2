// base/hash.h: FNV-1a against the published test vectors (the hash names
// files on disk, so it must never drift), and hashing in pieces.
#include <string>

#include "gtest/gtest.h"
#include "tfrecordfs/base/hash.h"

namespace tfrecordfs {
namespace {

TEST(Fnv1a64, MatchesThePublishedVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a64, BytesAboveSevenBitsAreUnsigned) {
  // A signed char would sign-extend 0xff into the xor.
  const std::string ff(1, '\xff');
  EXPECT_EQ(Fnv1a64(ff), (kFnv1a64Offset ^ 0xffu) * kFnv1a64Prime);
}

TEST(Fnv1a64, ContinuesFromAnEarlierHash) {
  EXPECT_EQ(Fnv1a64("bar", Fnv1a64("foo")), Fnv1a64("foobar"));
  static_assert(Fnv1a64("a") == 0xaf63dc4c8601ec8cull, "usable at compile time");
}

}  // namespace
}  // namespace tfrecordfs
