// The main of every GoogleTest binary (tests/meson.build's gtest_dep): the
// GoogleTest run, then an exit status meson can count. A binary whose every
// case that ran was skipped (GTEST_SKIP: no /dev/fuse, no
// ../shared/data/real) exits 77, which meson's summary counts as SKIP, so
// that a clone without the data does not read "Ok" for tests that did not
// run. The cases that need the real data run as their own meson tests
// (`<name>_real`, a --gtest_filter of the same binary) for the same reason:
// a binary where some cases pass and some skip can only say OK.
#include <cstdio>

#include "gtest/gtest.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (result == 0 && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count()) {
    std::fprintf(stderr, "every test case skipped (%d): exit 77 (SKIP)\n",
                 unit.skipped_test_count());
    return 77;
  }
  return result;
}
