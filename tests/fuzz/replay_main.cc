// Replays a fuzz target over its seed corpus (tests/fuzz/corpus/<target>/)
// and the inputs that once broke it (tests/fuzz/regressions/<target>/), so
// that every build, with any compiler and under the sanitizers, keeps them
// fixed. The target is linked in (LLVMFuzzerTestOneInput); a broken invariant
// throws FuzzFailure (TFRFS_FUZZ_REPLAY) and fails the test with the file
// name.
//
// TFRFS_FUZZ_TARGET and TFRFS_FUZZ_DIR (the source tests/fuzz directory) are
// set by tests/fuzz/meson.build; extra files or directories given on the
// command line are replayed too.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tfrecordfs::fuzz {
namespace {

std::vector<std::string> g_extra;

void Collect(const std::string& path, std::vector<std::string>* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) {
    out->push_back(path);
    return;
  }
  if (!S_ISDIR(st.st_mode)) return;
  DIR* d = ::opendir(path.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != ".." && n != "README.md") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) Collect(path + "/" + n, out);
}

size_t Replay(const std::vector<std::string>& files) {
  size_t n = 0;
  for (const std::string& f : files) {
    auto bytes = ReadFileToString(f);
    if (!bytes.ok()) {
      ADD_FAILURE() << bytes.status();
      continue;
    }
    SCOPED_TRACE(f);
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
    } catch (const FuzzFailure& e) {
      ADD_FAILURE() << f << ": " << e.what();
    }
    ++n;
  }
  return n;
}

TEST(FuzzReplay, Corpus) {
  std::vector<std::string> files;
  Collect(std::string(TFRFS_FUZZ_DIR) + "/corpus/" + TFRFS_FUZZ_TARGET, &files);
  EXPECT_FALSE(files.empty()) << "no seed corpus for " << TFRFS_FUZZ_TARGET;
  const size_t n = Replay(files);
  std::printf("replayed %zu corpus input(s) through %s\n", n, TFRFS_FUZZ_TARGET);
}

TEST(FuzzReplay, Regressions) {
  std::vector<std::string> files;
  Collect(std::string(TFRFS_FUZZ_DIR) + "/regressions/" + TFRFS_FUZZ_TARGET, &files);
  for (const auto& e : g_extra) Collect(e, &files);
  const size_t n = Replay(files);
  std::printf("replayed %zu regression input(s) through %s\n", n, TFRFS_FUZZ_TARGET);
}

}  // namespace
}  // namespace tfrecordfs::fuzz

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) tfrecordfs::fuzz::g_extra.emplace_back(argv[i]);
  return RUN_ALL_TESTS();
}
