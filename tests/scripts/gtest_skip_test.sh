#!/usr/bin/env bash
# A GoogleTest binary whose cases all skip exits 77, which meson counts as
# SKIP (tests/testing/gtest_main.cc): the real-data cases of
# cli_toolbox_real_test, pointed at a directory without the data, skip and
# say so; a filter that runs no case at all exits 0, as GoogleTest's own main.
#   gtest_skip_test.sh CLI_TOOLBOX_REAL_TEST
set -u
bin=$1
out=$(TFRECORDFS_REAL_DATA=/nonexistent "$bin" --gtest_filter='RealToolboxTest.*' 2>&1)
rc=$?
if [ "$rc" -ne 77 ]; then
  echo "every case skipped, but exit $rc (want 77):"; echo "$out"; exit 1
fi
grep -q "real TFRecord data not found" <<<"$out" || { echo "no reason given:"; echo "$out"; exit 1; }
grep -q "every test case skipped" <<<"$out" || { echo "no skip summary:"; echo "$out"; exit 1; }
out=$("$bin" --gtest_filter='CliToolboxTest.*:-*' 2>&1)
rc=$?
# No case at all ran: not a skip (exit 0, as GoogleTest's own main).
[ "$rc" -eq 0 ] || { echo "no case ran, but exit $rc:"; echo "$out"; exit 1; }
echo ok
