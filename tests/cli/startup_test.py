#!/usr/bin/env python3
"""What the tfrecordfs binary does before a command starts (suite 'cli').

A command run as N parts (issue 37) pays the start-up N times; on a small
input it is most of a part's time (docs/bench.md, the parts rows). Two
causes are checked here, with the tools a user would reach for:

- the shared libraries the binary names (`readelf -d`): Abseil (about 30
  libraries), protobuf and OpenSSL's libcrypto (about 1,200 symbols resolved
  at load), and the C++ runtime (libstdc++, libgcc, and snappy and
  highwayhash, which would load libstdc++.so) are linked from their static
  archives unless meson was configured with -Dstatic_deps=false
  (TFRECORDFS_STATIC_DEPS, set by meson); libcurl is not named at all;
- libcurl and the ~29 libraries it needs are loaded (dlopen) only when a
  bucket or web SOURCE sends its first request: glibc's loader, with
  LD_DEBUG=files, logs every library a process maps. Without libcurl (hidden
  in a private mount namespace) a local command still works and a web
  SOURCE fails naming libcurl.so.4.

Environment: TFRECORDFS_BIN and TFRECORDFS_GEN (set by meson).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import BIN, CliTestBase  # noqa: E402

STATIC_DEPS = os.environ.get("TFRECORDFS_STATIC_DEPS", "true") == "true"


def loaded(args, library):
    """(exit code, whether running BIN with `args` maps `library`, stderr)."""
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, LD_DEBUG="files"))
    pattern = re.compile(r"\bfile=" + re.escape(library) + r" \[0\];")
    return r.returncode, any(pattern.search(line) for line in r.stderr.splitlines()), r.stderr


def needed():
    out = subprocess.run(["readelf", "-d", BIN], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


# Nothing listens on port 9 (discard) of this machine: the request fails
# once libcurl is loaded, and a missing libcurl fails it before.
WEB_SOURCE = "http://127.0.0.1:9/x.tfrecord"


class StartupTest(CliTestBase):
    TMP_PREFIX = "startup_test."

    @unittest.skipUnless(shutil.which("readelf"), "readelf (binutils) is not installed")
    def test_abseil_protobuf_and_libcrypto_are_not_shared_libraries(self):
        if not STATIC_DEPS:
            self.skipTest("configured with -Dstatic_deps=false")
        names = needed()
        self.assertTrue(names)  # the parse found the list
        shared = [n for n in names if n.startswith(("libabsl_", "libprotobuf", "libcrypto"))]
        self.assertEqual(shared, [], f"{BIN} still loads {shared}; all it loads: {names}")

    @unittest.skipUnless(shutil.which("readelf"), "readelf (binutils) is not installed")
    def test_no_cxx_library_is_shared(self):
        # libstdc++ and libgcc are linked statically, and so are the C++
        # libraries that would load libstdc++.so anyway (snappy,
        # highwayhash): about 1 ms of a part's start-up. The C libraries
        # (zlib, libpng, expat, the codecs, libfuse3) stay shared.
        if not STATIC_DEPS:
            self.skipTest("configured with -Dstatic_deps=false")
        names = needed()
        self.assertTrue(names)
        if any(n.startswith(("libasan", "libtsan")) for n in names):
            # meson.build keeps libstdc++ shared under a sanitizer: a static
            # one would define operator new/delete ahead of the sanitizer's.
            self.skipTest("a sanitizer build: libstdc++ is shared by design")
        cxx = [n for n in names
               if n.startswith(("libstdc++", "libgcc_s", "libsnappy", "libhighwayhash"))]
        self.assertEqual(cxx, [], f"{BIN} still loads {cxx}; all it loads: {names}")

    @unittest.skipUnless(shutil.which("readelf"), "readelf (binutils) is not installed")
    def test_libcurl_is_not_named(self):
        names = needed()
        self.assertTrue(names)
        self.assertEqual([n for n in names if "curl" in n], [],
                         f"{BIN} names libcurl; all it names: {names}")

    def test_local_index_does_not_load_libcurl(self):
        shards = self.sample("in", 40, 2)
        self.assertEqual(len(shards), 2)
        rc, curl, err = loaded(["index", self.path("in"), "-q"], "libcurl.so.4")
        self.assertEqual(rc, 0, err[-2000:])
        self.assertFalse(curl, "a local index loaded libcurl.so.4")
        # The check can see a load: an http:// SOURCE loads it.
        rc, curl, err = loaded(["count", WEB_SOURCE, "-q"], "libcurl.so.4")
        self.assertNotEqual(rc, 0)
        self.assertTrue(curl, "an http:// SOURCE did not load libcurl.so.4: " + err[-2000:])

    def test_without_libcurl_local_works_and_web_names_the_library(self):
        if os.geteuid() != 0 or not shutil.which("unshare"):
            self.skipTest("needs root and unshare(1) to hide libcurl in a mount namespace")
        # Where the loader finds libcurl.so.4 (the path it maps).
        r = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True)
        paths = re.findall(r"\blibcurl\.so\.4 \([^)]*\) => (\S+)", r.stdout)
        if not paths:
            self.skipTest("libcurl.so.4 is not installed: nothing to hide")
        self.sample("in", 40, 2)
        script = "".join(f"mount --bind /dev/null {shlex.quote(os.path.realpath(p))} && "
                         for p in sorted(set(paths)))

        def hidden(*args):
            cmd = script + " ".join(shlex.quote(a) for a in [BIN, *args])
            return subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True,
                                  text=True, timeout=120)

        probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("unshare -m is not allowed here")
        r = hidden("count", self.path("in"), "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("40\ttotal", r.stdout)
        r = hidden("count", WEB_SOURCE, "-q")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("libcurl.so.4 could not be loaded", r.stderr)
        self.assertIn(WEB_SOURCE, r.stderr)
        self.assertIn("apt install libcurl4", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
