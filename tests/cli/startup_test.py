#!/usr/bin/env python3
"""What the tfrecordfs binary does before a command starts (suite 'cli').

A command run as N parts (issue 37) pays the start-up N times; on a small
input it is most of a part's time (docs/bench.md, the parts rows). Two
causes are checked here, with the tools a user would reach for:

- the shared libraries the binary names (`readelf -d`): Abseil (about 30
  libraries) and protobuf are linked from their static archives unless meson
  was configured with -Dstatic_deps=false (TFRECORDFS_STATIC_DEPS, set by
  meson);
- libcurl's global start (OpenSSL reads its configuration, fills its tables)
  happens at the first request, not for local SOURCEs: glibc's loader, with
  LD_DEBUG=bindings, logs the binary's first call of curl_global_init (lazy
  binding; a binary linked with -z now binds everything at start, which
  `--version` shows, and then the check is skipped).

Environment: TFRECORDFS_BIN and TFRECORDFS_GEN (set by meson).
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import BIN, CliTestBase  # noqa: E402

STATIC_DEPS = os.environ.get("TFRECORDFS_STATIC_DEPS", "true") == "true"


def bound(args, symbol, env):
    """Whether running BIN with `args` binds `symbol` for the binary itself."""
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120,
                       env=dict(env, LD_DEBUG="bindings"))
    me = re.escape(os.path.realpath(BIN))
    pattern = re.compile(r"binding file " + me + r" \[0\] to .*: normal symbol `" +
                         re.escape(symbol) + "'")
    return r.returncode, any(pattern.search(line) for line in r.stderr.splitlines())


class StartupTest(CliTestBase):
    TMP_PREFIX = "startup_test."

    @unittest.skipUnless(shutil.which("readelf"), "readelf (binutils) is not installed")
    def test_abseil_and_protobuf_are_not_shared_libraries(self):
        if not STATIC_DEPS:
            self.skipTest("configured with -Dstatic_deps=false")
        out = subprocess.run(["readelf", "-d", BIN], capture_output=True, text=True,
                             check=True).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
        self.assertTrue(needed, out)  # the parse found the list
        shared = [n for n in needed if n.startswith(("libabsl_", "libprotobuf"))]
        self.assertEqual(shared, [], f"{BIN} still loads {shared}; all it loads: {needed}")

    def test_local_index_does_not_start_libcurl(self):
        shards = self.sample("in", 40, 2)
        env = dict(os.environ)
        rc, at_start = bound(["--version"], "curl_global_init", env)
        self.assertEqual(rc, 0)
        if at_start:
            self.skipTest("the binary binds its symbols at start (-z now): no call to see")
        rc, called = bound(["index", self.path("in"), "-q"], "curl_global_init", env)
        self.assertEqual(rc, 0)
        self.assertFalse(called, "a local index started libcurl (curl_global_init)")
        self.assertEqual(len(shards), 2)
        # The check can see a call: listing an http:// SOURCE (nothing
        # listens on port 9 of this machine) starts libcurl.
        rc, called = bound(["count", "http://127.0.0.1:9/x.tfrecord", "-q"], "curl_global_init",
                           env)
        self.assertNotEqual(rc, 0)
        self.assertTrue(called, "an http:// SOURCE did not call curl_global_init")


if __name__ == "__main__":
    unittest.main(verbosity=2)
