// What the FUSE-operation tests (tests/ops: fuse::Do* called without a
// mount) share: fake image bytes for the trees they build, and readers of
// the Do* replies as the kernel would read them.
//
// Contract: FakeJpeg(n, seed) is `n` bytes (at least 4) that start with a
// JPEG's SOI + APP0 marker and differ by seed, enough for every check that
// sniffs a type; kFakePng is a PNG signature and 40 bytes. ParseDirents
// reads a FUSE_READDIR (or, with `plus`, FUSE_READDIRPLUS) reply with the
// <linux/fuse.h> layout, failing the current test (non-fatally) on a record
// that is not 8-byte aligned or overruns the buffer, and stops there.
// ReadAll returns the bytes of a read reply, whether held in memory or as
// fd ranges (which it preads, failing the test on a range past the end of
// its file).
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_OPS_H_
#define TFRECORDFS_TESTS_TESTING_OPS_H_

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tfrecordfs/fuse/ops.h"

namespace tfrecordfs::test {

std::string FakeJpeg(size_t n, int seed);
inline const std::string kFakePng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(40, '\x01');

// One entry of a directory reply.
struct Dirent {
  std::string name;
  uint64_t ino = 0;
  uint64_t off = 0;  // where the next readdir resumes
  uint32_t type = 0;
  // READDIRPLUS only:
  uint64_t nodeid = 0;
  fuse_attr attr{};
};

std::vector<Dirent> ParseDirents(const std::string& buf, bool plus);
std::vector<std::string> Names(const std::vector<Dirent>& ds);

std::string ReadAll(const fuse::ReadReply& r);

// Looks `path` ("a/b/c", relative to the root) up one name at a time; on an
// error or a miss, fails the current test (non-fatally) naming the path and
// returns an entry whose ino is 0. "" is the root.
fuse_entry_param LookupPath(const fuse::Ops& ops, absl::string_view path);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_OPS_H_
