// What the toolbox's command-line tests share (cli_toolbox_test.cc,
// cli_toolbox_real_test.cc, cli_help_test.cc): the binary run with
// arguments, and its JSON parsed.
#ifndef TFRECORDFS_TESTS_CLI_CLI_TOOLBOX_UTIL_H_
#define TFRECORDFS_TESTS_CLI_CLI_TOOLBOX_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mount_harness.h"
#include "nlohmann/json.hpp"

namespace tfrecordfs::mount_test {

// Floats parsed with strtof, so that "bit-exact" is checked on float32.
using Json = nlohmann::basic_json<std::map, std::vector, std::string, bool, std::int64_t,
                                  std::uint64_t, float>;

inline Json ParseJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << text;
  return j;
}

inline CommandResult Tool(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinaryPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

}  // namespace tfrecordfs::mount_test

#endif  // TFRECORDFS_TESTS_CLI_CLI_TOOLBOX_UTIL_H_
