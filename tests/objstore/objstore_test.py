#!/usr/bin/python3
"""Shards read from object storage: http(s) URLs and s3:// buckets served by
tests/objstore/object_server.py (started here on 127.0.0.1, stopped here),
through the real binary: the toolbox commands (count, schema, show, verify,
index) and real mounts, compared byte for byte with the same shards read
from local disk. Covers plain, GZIP, ZLIB and SNAPPY objects, ListObjectsV2
paging, SigV4 checked by the server's independent implementation, retries
of 503s, the index cache keyed by URL and ETag, and an object replaced
behind a mount (EIO and a log line naming the URL, never other bytes).
Mount parts skip without /dev/fuse. Environment: TFRECORDFS_BIN,
TFRECORDFS_GEN (meson).
"""
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import tfrecord_check as tc  # noqa: E402

BIN = os.environ.get("TFRECORDFS_BIN", "")
GEN = os.environ.get("TFRECORDFS_GEN", "")
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "object_server.py")

try:
    import snappy  # Debian's python3-snappy
except ImportError:
    snappy = None

KEY, SECRET = "AKIDTFRECORDFSTEST", "c2VjcmV0IHRoYXQgaXMgbm90IGxvZ2dlZA"


def run(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=240,
                          env=env)


class Server:
    """object_server.py on 127.0.0.1, stopped by stop()."""

    def __init__(self, root, *extra):
        self.log = os.path.join(os.path.dirname(root), "server-%d.log" % id(self))
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, "--root", root, "--log", self.log,
             "--max-requests", "20000", *extra],
            stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())  # printed once it listens
        self.url = "http://127.0.0.1:%d" % self.port

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().splitlines()

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


class ObjectStoreTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN and GEN)
        self.tmp = tempfile.mkdtemp(prefix="objstore_test.")
        self.env = dict(os.environ)
        self.env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache")
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                  "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
            self.env.pop(k, None)
        # The local dataset, and the bucket "b" holding the same bytes under
        # data/: plain shards, a GZIP and a ZLIB one, a SNAPPY one when
        # python3-snappy is there, and a README that is not a shard.
        self.local = os.path.join(self.tmp, "local")
        self.root = os.path.join(self.tmp, "served")
        data = os.path.join(self.root, "b", "data")
        os.makedirs(self.local)
        os.makedirs(os.path.join(data, "extra"))
        subprocess.run([GEN, "synthetic", self.local, "--records", "60", "--shards", "3",
                        "--bytes", "3000", "--prefix", "ds-train.tfrecord"], check=True,
                       capture_output=True)
        for n in os.listdir(self.local):  # TFDS names: ds-train.tfrecord-00000-of-00003
            os.rename(os.path.join(self.local, n),
                      os.path.join(self.local, n[:-len(".tfrecord")]))
        self.plain = sorted(os.listdir(self.local))
        with open(os.path.join(self.local, self.plain[0]), "rb") as f:
            first = f.read()
        with open(os.path.join(self.local, "z.tfrecord.zlib"), "wb") as f:
            f.write(zlib.compress(first))
        gz = zlib.compressobj(wbits=31)
        with open(os.path.join(self.local, "g.tfrecord.gz"), "wb") as f:
            f.write(gz.compress(first) + gz.flush())
        if snappy is not None:
            with open(os.path.join(self.local, "s.tfrecord"), "wb") as f:
                for at in range(0, len(first), 1000):
                    c = snappy.compress(first[at:at + 1000])
                    f.write(len(c).to_bytes(4, "big") + c)
        for name in os.listdir(self.local):
            # Keys under a folder as well as at the top of the prefix.
            dest = os.path.join(data, "extra" if not name.startswith("ds-") else "", name)
            shutil.copy(os.path.join(self.local, name), dest)
        with open(os.path.join(data, "README"), "w") as f:
            f.write("not a shard\n")
        self.servers = []
        self.mounts = []

    def tearDown(self):
        for mnt in self.mounts:
            run("unmount", mnt, env=self.env)
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def serve(self, *extra):
        s = Server(self.root, *extra)
        self.servers.append(s)
        return s

    def s3_env(self, server, signed=True):
        env = dict(self.env)
        env["AWS_ENDPOINT_URL"] = server.url
        if signed:
            env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = KEY, SECRET
        return env

    def mount(self, *args, env=None):
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            self.skipTest("no /dev/fuse")
        mnt = os.path.join(self.tmp, "mnt%d" % len(self.mounts))
        os.mkdir(mnt)
        r = run(*args, mnt, env=env or self.env)  # returns once the mount serves
        self.assertEqual(r.returncode, 0, r.stderr)
        self.mounts.append(mnt)
        return mnt, r

    def local_counts(self):
        r = run("count", "--json", self.local, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {os.path.basename(s["path"]): s["records"] for s in json.loads(r.stdout)["shards"]}

    def test_count_https_urls_name_at_n_and_mixed_with_local(self):
        server = self.serve()
        want = self.local_counts()
        base = server.url + "/b/data/"
        r = run("count", "--json", base + "ds-train.tfrecord@3", base + "extra/g.tfrecord.gz",
                os.path.join(self.local, "z.tfrecord.zlib"), env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual(got["shards"][0]["path"], base + self.plain[0])
        self.assertEqual(
            {os.path.basename(s["path"]): s["records"] for s in got["shards"]},
            {n: want[n] for n in self.plain + ["g.tfrecord.gz", "z.tfrecord.zlib"]})
        # A missing object fails the command, naming the URL and the status.
        r = run("count", base + "nope.tfrecord", env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(base + "nope.tfrecord", r.stderr)
        self.assertIn("404", r.stderr)

    def test_s3_listing_pages_signs_and_caches_indexes_by_etag(self):
        # Two keys a page: listing "b/data" takes several ListObjectsV2 pages.
        server = self.serve("--page-size", "2", "--access-key", KEY, "--secret-key", SECRET)
        want = self.local_counts()
        r = run("count", "--json", "s3://b/data", env=self.s3_env(server))
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {s["path"]: s["records"] for s in json.loads(r.stdout)["shards"]}
        expect = {"s3://b/data/" + n: want[n] for n in self.plain}
        for n in want:
            if not n.startswith("ds-"):
                expect["s3://b/data/extra/" + n] = want[n]
        self.assertEqual(got, expect)
        lists = [q for q in server.requests() if "list-type=2" in q]
        self.assertGreaterEqual(len(lists), 3)
        self.assertTrue(any("continuation-token=" in q for q in lists))
        # The server checks every signature: a wrong secret is refused, and
        # the secret itself is never printed.
        env = self.s3_env(server)
        env["AWS_SECRET_ACCESS_KEY"] = "wrong"
        r = run("count", "s3://b/data", env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("SignatureDoesNotMatch", r.stderr)
        r = run("count", "s3://b/data", env=self.s3_env(server, signed=False))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("HTTP 403", r.stderr)
        self.assertNotIn(SECRET, r.stderr)
        # The second run takes every index from the per-user cache (keyed by
        # URL and ETag) and walks nothing; a replaced object is walked again.
        r = run("index", "s3://b/data", env=self.s3_env(server))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout + r.stderr, r"\b0 walked, 0 grown, 6 already valid")
        victim = os.path.join(self.root, "b", "data", self.plain[1])
        with open(victim, "rb") as f:
            data = f.read()
        with open(victim + ".new", "wb") as f:
            f.write(data)
        os.replace(victim + ".new", victim)  # same bytes and size, new ETag
        r = run("index", "s3://b/data", env=self.s3_env(server))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout + r.stderr, r"\b1 walked, 0 grown, 5 already valid")

    def test_toolbox_commands_take_urls(self):
        server = self.serve()
        env = self.s3_env(server, signed=False)
        url = server.url + "/b/data/" + self.plain[0]
        for args in (("schema", url), ("verify", url, "s3://b/data/extra")):
            r = run(*args, env=env)
            self.assertEqual(r.returncode, 0, args)
        r = run("verify", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("all intact", r.stdout)
        a = run("show", os.path.join(self.local, self.plain[0]), "0", env=env)
        b = run("show", url, "0", env=env)
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertEqual(a.stdout.replace(os.path.join(self.local, self.plain[0]), "X"),
                         b.stdout.replace(url, "X"))

    def test_retries_503_then_reads(self):
        server = self.serve("--fail-first", "2")
        want = self.local_counts()
        r = run("count", "--json", server.url + "/b/data/" + self.plain[2], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["records"], want[self.plain[2]])

    def test_mount_of_a_bucket_reads_what_a_local_mount_reads(self):
        server = self.serve("--page-size", "3", "--access-key", KEY, "--secret-key", SECRET)
        local, _ = self.mount("-o", "ro", self.local)
        remote, r = self.mount("s3://b/data/", "-o", "inflate_cache_mb=2",
                               env=self.s3_env(server))
        self.assertIn("read-only", r.stderr)
        a, b = tc.read_tree(local), tc.read_tree(remote)
        expect = {}
        for k, v in a.items():
            top = k.split("/")[0]
            expect[k if top.startswith("ds-") else "extra/" + k] = v
        self.assertGreater(len(expect), 60)
        self.assertEqual(sorted(b), sorted(expect))  # README (not a shard) is not shown
        for k in expect:
            self.assertEqual(b[k], expect[k], k)
        # Object storage is read-only for now: staging refuses writes.
        with self.assertRaises(OSError) as e:
            with open(os.path.join(remote, "new"), "w"):
                pass
        self.assertEqual(e.exception.errno, errno.EROFS)

    def test_replaced_object_gives_eio_and_a_log_line(self):
        big = os.path.join(self.root, "b", "big")
        os.makedirs(big)
        subprocess.run([GEN, "synthetic", big, "--records", "300", "--shards", "1",
                        "--bytes", "20000", "--prefix", "big"], check=True, capture_output=True)
        name = os.listdir(big)[0]
        server = self.serve()
        url = "%s/b/big/%s" % (server.url, name)
        log = os.path.join(self.tmp, "mount.log")
        # A 1 MiB budget: the end of the 6 MB object is not cached after the walk.
        mnt, _ = self.mount(url, "-o", "inflate_cache_mb=1,log=" + log)
        shard = os.path.join(mnt, name)
        records = sorted(os.listdir(shard))
        self.assertEqual(len(records), 300)
        with open(os.path.join(shard, records[0], "label"), "rb") as f:
            first = f.read()
        with open(os.path.join(big, name), "rb") as f:
            data = f.read()
        with open(os.path.join(big, name + ".new"), "wb") as f:
            f.write(data)
        os.replace(os.path.join(big, name + ".new"), os.path.join(big, name))
        failed = 0
        for rec in records[-150:]:
            try:
                with open(os.path.join(shard, rec, "label"), "rb") as f:
                    f.read()
            except OSError as e:
                self.assertEqual(e.errno, errno.EIO)
                failed += 1
        self.assertGreater(failed, 0)
        with open(os.path.join(shard, records[0], "label"), "rb") as f:
            self.assertEqual(f.read(), first)  # cached bytes of the listed object
        with open(log) as f:
            text = f.read()
        self.assertIn(url, text)
        self.assertIn("changed since it was listed", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
