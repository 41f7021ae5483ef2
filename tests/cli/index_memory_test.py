#!/usr/bin/env python3
"""`index` of a GZIP shard: the index file's bytes and the memory it takes (suite 'cli').

Issue 36: part of the GZIP index build's time after the inflate went to
memory: the index file was first built as one string (8 bytes of offset per
record), whose reservation left out the checkpoints, so it was reallocated
to twice its size and the offsets copied once more before one write; fresh
pages cost as much as the bytes written to them. The file is now written
in pieces, the offsets table straight from the walk's own vector, so the
build's peak RSS grows by about 8 bytes a record (main's grew by about 21).
Not measured under a sanitizer, whose allocator is another.

The index file is read here without tfrecordfs (its layout is in
include/tfrecordfs/index/index_file.h): its offsets are those Python finds
walking the shard inflated by zlib (tfrecord_check.py), its crc32c is right,
and two builds give the same bytes.

Environment: TFRECORDFS_BIN and TFRECORDFS_GEN (set by meson).
"""
import glob
import os
import subprocess
import sys
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402
from cli_common import BIN, CliTestBase, gen, shards_in  # noqa: E402

BIG = 1_000_000  # records of the measured shard (about 8 MB of offsets)
FILES = 200_000  # records of the shard whose index file is read (several checkpoints)
SMALL = 60_000  # records of the baseline shard (past the scan's threaded size too)


# Measures a command's peak RSS from a fresh, small Python process: a child's
# ru_maxrss also counts the memory of the process it was forked (or
# vforked) from up to its exec, which for this test's own process, once it
# holds an inflated shard, would be more than the command's.
MEASURE = """import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = p.stderr.read()
_, status, usage = os.wait4(p.pid, 0)
sys.stderr.buffer.write(err)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def index_peak_rss(folder, cache):
    """Runs `index -q folder` with its cache in `cache`: its peak RSS in bytes."""
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    r = subprocess.run([sys.executable, "-c", MEASURE, BIN, "index", "-q", folder], env=env,
                       capture_output=True, text=True, check=True)
    code, maxrss_kib = (int(v) for v in r.stdout.split())
    if code != 0:
        raise AssertionError(f"index {folder}: exit {code}: {r.stderr}")
    return maxrss_kib * 1024


def the_index(cache):
    """The one .tfri the cache under `cache` holds: its bytes."""
    found = glob.glob(os.path.join(cache, "tfrecordfs", "index", "*.tfri"))
    if len(found) != 1:
        raise AssertionError(f"{cache}: {len(found)} index files, not 1")
    with open(found[0], "rb") as f:
        return f.read()


def record_offsets(data):
    """The start of each record of the uncompressed `data`, then its end."""
    out = [0]
    pos = 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 8], "little")
        pos += 12 + n + 4
        out.append(pos)
    if pos != len(data):
        raise AssertionError(f"the records end at {pos}, not at {len(data)}")
    return out


class GzipIndexBuild(CliTestBase):
    TMP_PREFIX = "index_memory_test."

    def shard(self, name, records):
        gen("synthetic", self.path(name), "--records", str(records), "--shards", "1", "--bytes",
            "16", "--prefix", "gz", "--compression", "gzip")
        (path,) = shards_in(self.path(name))
        return path

    def test_index_file_is_the_walk_and_the_same_twice(self):
        shard = self.shard("files", FILES)
        index_peak_rss(self.path("files"), self.path("cache-files"))
        index_peak_rss(self.path("files"), self.path("cache-files-2"))
        # The index file, read by Python alone.
        got = the_index(self.path("cache-files"))
        self.assertEqual(got[:8], b"TFRINDEX")
        self.assertEqual(int.from_bytes(got[8:12], "little"), 3)  # the format's version
        self.assertEqual(int.from_bytes(got[12:16], "little") & 3, 1)  # GZIP
        n = int.from_bytes(got[56:64], "little")
        main_size = int.from_bytes(got[96:104], "little")
        windows_size = int.from_bytes(got[88:96], "little")
        self.assertEqual(main_size + windows_size, len(got))
        self.assertEqual(int.from_bytes(got[main_size - 4:main_size], "little"),
                         tc.crc32c(got[:main_size - 4]), "the index's crc32c")
        with open(shard, "rb") as f:
            data = zlib.decompress(f.read(), 16 + zlib.MAX_WBITS)
        self.assertEqual(int.from_bytes(got[72:80], "little"), len(data))  # data_size
        want = record_offsets(data)
        self.assertEqual(n, FILES)
        self.assertEqual(len(want), FILES + 1)
        table = got[120:120 + 8 * (n + 1)]
        self.assertTrue(table == b"".join(o.to_bytes(8, "little") for o in want),
                        "the index's offsets are not the records' offsets")
        # Deterministic: a second build writes the same bytes.
        self.assertTrue(the_index(self.path("cache-files-2")) == got,
                        "two builds wrote different index files")

    @unittest.skipIf("ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ,
                     "peak RSS measures glibc's allocator, which a sanitizer replaces (ASan "
                     "quarantines what is freed and adds its shadow memory)")
    def test_build_holds_the_offsets_once(self):
        self.shard("big", BIG)
        rss_big = index_peak_rss(self.path("big"), self.path("cache-big"))
        small = self.shard("small", SMALL)
        self.assertEqual(len(tc.read_records(small)), SMALL)  # every record whole
        rss_small = index_peak_rss(self.path("small"), self.path("cache-small"))
        # Beyond what indexing the small shard takes (start-up, the scan's
        # buffers), the big one's offsets once (8 bytes a record, a walk that
        # predicted the count reserving 1/32 more), and 4 MiB for what varies
        # (the windows, allocator rounding). Before, the string the file was
        # built in took two more copies of the offsets.
        print(f"peak RSS of index: {rss_small} B for {SMALL} records, {rss_big} B for {BIG}",
              file=sys.stderr)
        grown = rss_big - rss_small
        allowed = 8 * (BIG - SMALL) * 33 // 32 + (4 << 20)
        self.assertLessEqual(
            grown, allowed, f"index of {BIG} records: peak RSS {rss_big} B, {grown} B more "
            f"than for {SMALL} records (at most {allowed})")


if __name__ == "__main__":
    unittest.main()
