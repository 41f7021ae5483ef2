// Whole-file writes and reads for tests (the ops, unit and mount tests each
// used to keep a copy).
//
// Contract: WriteFile creates or truncates `path` (mode 0644), making any
// missing parent directories, and writes `contents`; a failure fails the
// current test with a fatal gtest failure (ASSERT_*), so a caller that must
// stop on it checks ASSERT_NO_FATAL_FAILURE(...) or HasFatalFailure().
// ReadFile returns the whole file, or "" after failing the current test
// (non-fatally) when it cannot be read.
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_FILES_H_
#define TFRECORDFS_TESTS_TESTING_FILES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tfrecordfs::test {

void WriteFile(const std::string& path, absl::string_view contents);
std::string ReadFile(const std::string& path);
// The names in directory `dir` (hidden ones included, no "." / ".."),
// sorted; fails the current test (non-fatally) when it cannot be listed.
std::vector<std::string> SortedNames(const std::string& dir);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_FILES_H_
