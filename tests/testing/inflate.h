// zlib's inflate of a whole stream or a raw run, for tests that judge
// deflate output with zlib itself rather than the project's inflater.
#ifndef TFRECORDFS_TESTS_TESTING_INFLATE_H_
#define TFRECORDFS_TESTS_TESTING_INFLATE_H_

#include <zlib.h>

#include <string>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace tfrecordfs::test {

// zlib's inflate; windowBits as inflateInit2's (15 + 16: GZIP only; 15:
// ZLIB only; -15: raw, from a fresh state); `ok` false unless the stream ends exactly at the
// input's end (raw with `raw_unended`: the input is used up without a final block).
inline std::string Inflate(absl::string_view in, int bits, bool* ok, bool raw_unended = false) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, bits), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  int r = Z_OK;
  char buf[1 << 16];
  while (r == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    r = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (r == Z_BUF_ERROR && z.avail_in == 0) break;
  }
  *ok = raw_unended ? r == Z_BUF_ERROR && z.avail_in == 0 : r == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  return out;
}

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_INFLATE_H_
