"""What the toolbox's Python tests share (reshape_test.py, parts_test.py):
the binaries meson names, a temporary directory per test with its own index
cache, and generated sample shards. The judge stays tfrecord_check.py, a
TFRecord reader independent of tfrecordfs."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402

BIN = os.environ.get("TFRECORDFS_BIN", "")
GEN = os.environ.get("TFRECORDFS_GEN", "")


def gen(*args):
    subprocess.run([GEN, *args], check=True, capture_output=True, timeout=240)


def shards_in(d):
    """The files of folder `d` that are not hidden, sorted, as paths."""
    return sorted(os.path.join(d, f) for f in os.listdir(d) if not f.startswith("."))


def all_records(paths):
    """Every record payload of `paths`, in order, read by tfrecord_check."""
    out = []
    for p in paths:
        out.extend(tc.read_records(p))
    return out


class CliTestBase(unittest.TestCase):
    """A temporary directory per test (removed after it), with
    XDG_CACHE_HOME inside it so that no index cache is shared."""
    TMP_PREFIX = "cli_test."

    def setUp(self):
        self.assertTrue(BIN and GEN, "TFRECORDFS_BIN and TFRECORDFS_GEN must be set")
        self.tmp = tempfile.mkdtemp(prefix=self.TMP_PREFIX)
        os.environ["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def sample(self, name, records, shards, compression="none"):
        """`tfrecordfs-gen synthetic` shards in folder `name`: their paths."""
        gen("synthetic", self.path(name), "--records", str(records), "--shards", str(shards),
            "--bytes", "300", "--prefix", "in", "--compression", compression)
        return shards_in(self.path(name))
