#!/usr/bin/python3
"""Shards read from object storage: http(s) URLs and s3:// buckets served by
tests/objstore/object_server.py (started here on 127.0.0.1, stopped here),
through the real binary: the toolbox commands (count, schema, show, verify,
index) and real mounts, compared byte for byte with the same shards read
from local disk. Covers plain, GZIP, ZLIB and SNAPPY objects, ListObjectsV2
paging, SigV4 checked by the server's independent implementation, retries
of 503s, the index cache keyed by URL and ETag, and an object replaced
behind a mount (EIO and a log line naming the URL, never other bytes), and
staging packed back into the bucket at unmount (one PUT, a multipart upload,
kills at the upload's fault points finished by the next mount, refusals,
never an overwrite; read back with tests/cli/tfrecord_check.py and, from
s3rver, botocore).
Mount parts skip without /dev/fuse. Environment: TFRECORDFS_BIN,
TFRECORDFS_GEN (meson).
"""
import errno
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import tfrecord_check as tc  # noqa: E402 -- the independent reader

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
        # Signatures are checked by botocore too (python3-botocore,
        # scripts/setup): the aws CLI's own signing code.
        botocore = ["--botocore"] if "--access-key" in extra else []
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, "--root", root, "--log", self.log,
             "--max-requests", "20000", *botocore, *extra],
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


class S3rver:
    """s3rver (npm's fake S3 server, scripts/setup installs it) on 127.0.0.1,
    a third-party server to check the protocol against; it accepts any
    SigV4 signature of its key S3RVER (it does not check them). Stopped by
    stop()."""

    KEY = SECRET = "S3RVER"

    def __init__(self, data_dir, bucket):
        self.proc = subprocess.Popen(
            [shutil.which("s3rver"), "-d", data_dir, "-a", "127.0.0.1", "-p", "0",
             "--configure-bucket", bucket],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.url = None
        for _ in range(20):  # "S3rver listening on 127.0.0.1:PORT", after a blank line
            line = self.proc.stdout.readline()
            if not line:
                break
            if "listening on 127.0.0.1:" in line:
                self.url = "http://" + line.split("listening on ")[1].strip()
                break
        if self.url is None:
            self.stop()
            raise RuntimeError("s3rver did not say where it listens")

    def client(self):
        import botocore.session  # Debian's python3-botocore: the aws CLI's own client
        return botocore.session.get_session().create_client(
            "s3", endpoint_url=self.url, aws_access_key_id=self.KEY,
            aws_secret_access_key=self.SECRET, region_name="us-east-1")

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
                  "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                  "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_NO_SIGN_REQUEST",
                  "AWS_REGION", "AWS_DEFAULT_REGION", "GOOGLE_OAUTH_ACCESS_TOKEN",
                  "GS_ACCESS_KEY_ID", "GS_SECRET_ACCESS_KEY", "STORAGE_EMULATOR_HOST",
                  "GCE_METADATA_HOST"):
            self.env.pop(k, None)
        self.env["NO_GCE_CHECK"] = "true"  # anonymous gs:// on a Compute Engine VM too
        # No ~/.aws of the user's: the tests write their own.
        self.env["HOME"] = os.path.join(self.tmp, "home")
        os.makedirs(self.env["HOME"])
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
        # TFDS names: ds-train.tfrecord-00000-of-00003 (the prefix's ".tfrecord"
        # makes the writer name them so).
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

    def big_shard(self, folder):
        """Writes one shard of 300 records, about 6 MB (more than a 1 MiB
        cache holds), into `folder`; returns its name."""
        os.makedirs(folder, exist_ok=True)
        subprocess.run([GEN, "synthetic", folder, "--records", "300", "--shards", "1",
                        "--bytes", "20000", "--prefix", "big"], check=True, capture_output=True)
        return os.listdir(folder)[0]

    def server_token(self, token):
        """The file object_server.py's --bearer-token-file reads, holding `token`."""
        path = os.path.join(self.tmp, "server-token")
        with open(path, "w") as f:
            f.write(token + "\n")
        return path

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

    def test_retries_dropped_connections_and_never_asks_past_the_end(self):
        # Every object's first two GETs lose their connection without an
        # answer: each read is retried on a new one.
        server = self.serve("--drop-first", "2", "--latency-ms", "5")
        want = self.local_counts()
        r = run("count", "--json", "--no-sign-request", "s3://b/data",
                env=self.s3_env(server, signed=False))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["records"], sum(want.values()))
        # Sizes are known from the listing: no range past an object's end.
        statuses = [q.split()[2] for q in server.requests()]
        self.assertTrue(statuses)
        self.assertNotIn("416", statuses)
        self.assertEqual(set(statuses), {"200", "206"}, server.requests())
        # Ten in a row outlast the retries (libcurl itself sends once more
        # when a reused connection turns out closed): the command fails,
        # naming the object and the attempts.
        hopeless = self.serve("--drop-first", "10")
        url = hopeless.url + "/b/data/" + self.plain[0]
        r = run("count", url, env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(url, r.stderr)
        self.assertIn("(after 5 attempts)", r.stderr)

    def ranged_gets(self, server, since=0):
        """{object path: [(first, last), ...]} of the ranged GETs logged
        after the first `since` requests; fails unless each is pinned with
        If-Match."""
        out = {}
        for q in server.requests()[since:]:
            method, path, _, rng, pinned = q.split()[:5]
            if method != "GET" or rng == "range=-":
                continue
            self.assertEqual(pinned, "if-match=yes", q)
            first, last = rng[len("range=bytes="):].split("-")
            out.setdefault(path, []).append((int(first), int(last)))
        return out

    def big_bucket(self, shards):
        """Bucket b, prefix big/: `shards` shards of 300 records of 20 KB
        (about 6 MB each), served anonymously with 5 ms a request. Returns
        the server, the environment to reach it and {object path: size}."""
        big = os.path.join(self.root, "b", "big")
        subprocess.run([GEN, "synthetic", big, "--records", str(300 * shards), "--shards",
                        str(shards), "--bytes", "20000", "--prefix", "big"], check=True,
                       capture_output=True)
        sizes = {"/b/big/" + n: os.path.getsize(os.path.join(big, n)) for n in os.listdir(big)}
        server = self.serve("--latency-ms", "5")
        return server, self.s3_env(server, signed=False), sizes

    def index_big(self, env):
        r = run("index", "--no-sign-request", "s3://b/big", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def find_big(self, server, env, options, files):
        """The ranged GETs (ranged_gets) of a `find` over a fresh mount of
        s3://b/big with `options`, which lists at least `files` files."""
        before = len(server.requests())
        mnt, _ = self.mount("-o", options, "s3://b/big", env=env)
        found = subprocess.run(["find", mnt, "-type", "f"], capture_output=True, text=True,
                               check=True).stdout.split()
        self.assertGreaterEqual(len(found), files)
        return self.ranged_gets(server, before)

    def assert_each_block_asked_once(self, gets, sizes):
        """Each object got the mount's three sampled headers, then each of
        its 4 MiB blocks once: size / 4 MiB GETs, not one per record, and
        no byte of it asked for twice but those headers'."""
        self.assertEqual(sorted(gets), sorted(sizes))
        for path, size in sizes.items():
            ranges = gets[path]
            self.assertLessEqual(len(ranges), 3 + (size + (4 << 20) - 1) // (4 << 20),
                                 (path, ranges))
            self.assertLessEqual(sum(last + 1 - first for first, last in ranges),
                                 size + (3 << 19), (path, ranges))

    def test_walks_and_finds_ask_for_each_byte_once_in_few_large_gets(self):
        # Four shards of about 6 MB. A first `index` walks them all at once
        # (one budget for the process): every byte is asked for, and once,
        # the probe's first MiB included (the walk takes it from the cache),
        # but for the last record's header, read again after the walk.
        server, env, sizes = self.big_bucket(4)
        self.index_big(env)
        gets = self.ranged_gets(server)
        self.assertEqual(sorted(gets), sorted(sizes))
        for path, ranges in gets.items():
            ranges.sort()
            covered = 0
            for first, last in ranges:
                self.assertLessEqual(first, covered, (path, ranges))  # no gap
                covered = max(covered, last + 1)
            self.assertEqual(covered, sizes[path], path)
            self.assertEqual(len([r for r in ranges if r[0] == 0]), 1, (path, ranges))
            asked = sum(last + 1 - first for first, last in ranges)
            self.assertLessEqual(asked, sizes[path] + (1 << 20), (path, ranges))
        # A find over a fresh mount (index cached) reads the records in
        # order through the readahead, in 4 MiB GETs.
        self.assert_each_block_asked_once(
            self.find_big(server, env, "ro,no_sign_request", 1200), sizes)

    def test_a_find_through_a_small_readahead_budget_asks_for_each_block_once(self):
        # Six shards of about 6 MB, a readahead budget of 24 MiB (four 4 MiB
        # blocks cached beside the spares): the next shard's primed blocks,
        # untouched until the `find` gets there, must outlive the blocks it
        # has read past. Under plain LRU they were evicted first and read
        # again 1 MiB at a time: 7 GETs and 9 MB for two of the shards.
        server, env, sizes = self.big_bucket(6)
        self.index_big(env)
        self.assert_each_block_asked_once(
            self.find_big(server, env, "ro,no_sign_request,readahead_mb=24", 1800), sizes)

    def test_listing_a_shard_folder_starts_its_readahead(self):
        # A fresh mount (index cached). Listing a shard folder asks for its
        # first 4 MiB block before any of its records is read; listing
        # another shard folder then asks for nothing (one listed shard at a
        # time: `ls MOUNT/*` does not fetch every shard's start); once a
        # record has been read, a listing starts its shard again.
        server, env, sizes = self.big_bucket(4)
        objects = sorted(os.path.basename(p) for p in sizes)
        self.index_big(env)
        before = len(server.requests())
        mnt, _ = self.mount("-o", "ro,no_sign_request", "s3://b/big", env=env)
        folders = sorted(os.listdir(mnt))
        self.assertEqual(len(folders), 4, folders)

        def block_asked(k, wait):
            """Whether the rest of object k's first 4 MiB block was asked for
            (its first MiB is cached from the mount's probe)."""
            for _ in range(int(wait / 0.02) + 1):
                gets = self.ranged_gets(server, before).get("/b/big/" + objects[k], [])
                if any(last == (4 << 20) - 1 and first <= 1 << 20 for first, last in gets):
                    return True
                time.sleep(0.02)
            return False

        records = sorted(os.listdir(os.path.join(mnt, folders[1])))
        self.assertEqual(len(records), 300)
        self.assertTrue(block_asked(1, 10), server.requests()[before:])
        self.assertEqual(len(os.listdir(os.path.join(mnt, folders[2]))), 300)
        self.assertFalse(block_asked(2, 0.5), server.requests()[before:])
        # A record of the second read (its files listed): the fourth's
        # listing starts the fourth.
        self.assertTrue(os.listdir(os.path.join(mnt, folders[1], records[0])))
        self.assertEqual(len(os.listdir(os.path.join(mnt, folders[3]))), 300)
        self.assertTrue(block_asked(3, 10), server.requests()[before:])
        self.assertFalse(block_asked(0, 0), server.requests()[before:])

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
        self.assertIn("staging packs into s3://b/data/", r.stderr)
        a, b = tc.read_tree(local), tc.read_tree(remote)
        expect = {}
        for k, v in a.items():
            top = k.split("/")[0]
            expect[k if top.startswith("ds-") else "extra/" + k] = v
        self.assertGreater(len(expect), 60)
        # README (not a shard) is shown as a local mount shows it, and the
        # staging folder (empty).
        expect["README"] = b"not a shard\n"
        self.assertEqual(sorted(b), sorted(expect))
        self.assertEqual(os.listdir(os.path.join(remote, "staging")), [])
        for k in expect:
            self.assertEqual(b[k], expect[k], k)
        # A file beside the shards is refused (records of s3:// objects
        # take edits: bucket_edit_test.py).
        with self.assertRaises(OSError) as e:
            with open(os.path.join(remote, "new"), "w"):
                pass
        self.assertEqual(e.exception.errno, errno.EROFS)
        # `tfrecordfs commit` is answered at once: nothing to commit there.
        r = run("commit", remote, env=self.s3_env(server))
        self.assertIn("nothing to commit", r.stdout + r.stderr)

    def test_arrayrecord_objects_read_with_ranged_gets(self):
        # Grain's reference-writer files (tests/unit/testdata/arrayrecord),
        # documented to hold b"0" .. b"9", served by the web server: the
        # footer is read with ranged GETs, as the records are.
        fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit",
                                "testdata", "arrayrecord")
        ar = os.path.join(self.root, "b", "ar")
        os.makedirs(ar)
        names = ["digits.array_record-0000%d-of-00002" % n for n in range(2)]
        for n in names:
            shutil.copy(os.path.join(fixtures, n), ar)
        server = self.serve()
        base = server.url + "/b/ar/"
        r = run("count", "--json", *[base + n for n in names], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([s["records"] for s in json.loads(r.stdout)["shards"]], [5, 5])
        out = os.path.join(self.tmp, "ar-out")
        r = run("reshard", *[base + n for n in names], "--output", out, "--format", "tfrecord",
                "-q", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = []
        for f in sorted(glob.glob(os.path.join(out, "*"))):
            got += list(tc.read_records(f))
        self.assertEqual(got, [str(i).encode() for i in range(10)])
        remote, _ = self.mount("s3://b/ar/", env=self.s3_env(server, signed=False))
        shown = []
        for n in names:
            for rec in sorted(os.listdir(os.path.join(remote, n)), key=int):
                with open(os.path.join(remote, n, rec, "record.bin"), "rb") as f:
                    shown.append(f.read())
        self.assertEqual(shown, [str(i).encode() for i in range(10)])

    def test_replaced_object_gives_eio_and_a_log_line(self):
        big = os.path.join(self.root, "b", "big")
        name = self.big_shard(big)
        server = self.serve()
        url = "%s/b/big/%s" % (server.url, name)
        log = os.path.join(self.tmp, "mount.log")
        # A 1 MiB budget and no readahead (listing the shard folder would
        # start it): the end of the 6 MB object is not cached after the walk.
        mnt, _ = self.mount(url, "-o", "inflate_cache_mb=1,readahead_mb=0,log=" + log)
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


    # ---- -o no_sign_request / --no-sign-request ----

    def test_no_sign_request_sends_nothing_signed(self):
        want = self.local_counts()
        # A server that takes only signed requests refuses ours: none is signed.
        strict = self.serve("--access-key", KEY, "--secret-key", SECRET)
        r = run("count", "--no-sign-request", "s3://b/data", env=self.s3_env(strict))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("HTTP 403", r.stderr)
        self.assertIn("requests were sent anonymously (no_sign_request)", r.stderr)  # says how it asked
        self.assertNotIn(SECRET, r.stderr)
        self.assertTrue(all(q.endswith("auth=none") for q in strict.requests()))
        # A public bucket: credentials in the environment are not used.
        public = self.serve()
        env = self.s3_env(public)
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-right-one"
        r = run("count", "--json", "--no-sign-request", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["records"], sum(want.values()))
        self.assertTrue(public.requests())
        self.assertTrue(all(q.endswith("auth=none") for q in public.requests()))
        # show takes it too; without it the same environment signs.
        r = run("show", "--no-sign-request", "s3://b/data/" + self.plain[0], "0", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("count", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(any(q.endswith("auth=sigv4") for q in public.requests()))
        # AWS_NO_SIGN_REQUEST (documented before the flag) still works.
        env["AWS_NO_SIGN_REQUEST"] = "true"
        r = run("count", "s3://b/data", env=self.s3_env(strict) | {"AWS_NO_SIGN_REQUEST": "true"})
        self.assertIn("anonymously (AWS_NO_SIGN_REQUEST)", r.stderr)
        # --help names it.
        r = run("count", "--help", env=self.env)
        self.assertIn("--no-sign-request", r.stdout)

    def test_mount_with_no_sign_request(self):
        public = self.serve()
        env = self.s3_env(public)  # keys the server does not want
        r = run("--help", env=self.env)
        self.assertIn("no_sign_request", r.stdout)
        self.assertIn("gcs_token_file=PATH", r.stdout)
        local, _ = self.mount("-o", "ro", self.local)
        remote, _ = self.mount("s3://b/data/", "-o", "no_sign_request", env=env)
        name = self.plain[0]
        self.assertEqual(tc.read_tree(os.path.join(remote, name)), tc.read_tree(os.path.join(local, name)))
        self.assertTrue(all(q.endswith("auth=none") for q in public.requests()))

    # ---- ~/.aws/credentials and ~/.aws/config ----

    def write_aws_files(self, endpoint):
        aws = os.path.join(self.env["HOME"], ".aws")
        os.makedirs(aws, exist_ok=True)
        with open(os.path.join(aws, "credentials"), "w") as f:
            f.write("[default]\naws_access_key_id = WRONGKEY\naws_secret_access_key = x\n"
                    "[dev]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    % (KEY, SECRET))
        with open(os.path.join(aws, "config"), "w") as f:
            f.write("[default]\nregion = eu-west-1\n"
                    "[profile dev]\nregion = eu-north-1\ns3 =\n  endpoint_url = %s\n" % endpoint)

    def test_aws_profiles_from_the_shared_files(self):
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        want = self.local_counts()
        self.write_aws_files(server.url)
        env = dict(self.env)  # no AWS_* variable at all: all from the files
        env["AWS_PROFILE"] = "dev"
        r = run("count", "--json", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["records"], sum(want.values()))
        self.assertTrue(all(q.endswith("auth=sigv4") for q in server.requests()))
        # The default profile's keys are refused by the server (and named, not shown).
        env.pop("AWS_PROFILE")
        env["AWS_ENDPOINT_URL"] = server.url  # the default profile has no endpoint
        r = run("count", "s3://b/data", env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("InvalidAccessKeyId", r.stderr)
        self.assertIn("[default] in " + os.path.join(self.env["HOME"], ".aws", "credentials"),
                      r.stderr)
        # The environment's keys win over the profile's.
        env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = KEY, SECRET
        r = run("count", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        # A named profile that is nowhere fails, naming it.
        env["AWS_PROFILE"] = "nope"
        r = run("count", "s3://b/data", env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("'nope'", r.stderr)
        # AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE move the files.
        moved = os.path.join(self.tmp, "moved")
        os.rename(os.path.join(self.env["HOME"], ".aws"), moved)
        env = dict(self.env)
        env.update(AWS_PROFILE="dev", AWS_SHARED_CREDENTIALS_FILE=moved + "/credentials",
                   AWS_CONFIG_FILE=moved + "/config")
        r = run("count", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        for out in (r.stdout, r.stderr):
            self.assertNotIn(SECRET, out)
        # A mount takes the profile the same way.
        mnt, _ = self.mount("s3://b/data/", "-o", "ro", env=env)
        self.assertEqual(sorted(p for p in os.listdir(mnt) if p.startswith("ds-")), self.plain)

    # ---- gs:// with OAuth tokens and HMAC keys ----

    def gs_env(self, server):
        env = dict(self.env)
        env["STORAGE_EMULATOR_HOST"] = "127.0.0.1:%d" % server.port
        return env

    def test_gcs_oauth_token_from_the_environment_and_hmac_keys(self):
        token = self.server_token("ya29.first")
        server = self.serve("--bearer-token-file", token)
        want = self.local_counts()
        r = run("count", "gs://b/data", env=self.gs_env(server))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("HTTP 401", r.stderr)
        env = self.gs_env(server)
        env["GOOGLE_OAUTH_ACCESS_TOKEN"] = "ya29.first"
        before = len(server.requests())
        r = run("count", "--json", "gs://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["records"], sum(want.values()))
        self.assertTrue(all(q.endswith("auth=bearer") for q in server.requests()[before:]))
        env["GOOGLE_OAUTH_ACCESS_TOKEN"] = "ya29.stale"
        r = run("count", "gs://b/data", env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("ya29", r.stderr)  # tokens are never printed
        # HMAC keys, signed with SigV4 as Cloud Storage's XML API takes them.
        hmac_server = self.serve("--access-key", "GOOG1HMACKEY", "--secret-key", "hmacsecret")
        env = self.gs_env(hmac_server)
        env["GS_ACCESS_KEY_ID"], env["GS_SECRET_ACCESS_KEY"] = "GOOG1HMACKEY", "hmacsecret"
        r = run("verify", "gs://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(all(q.endswith("auth=sigv4") for q in hmac_server.requests()))

    def test_gcs_token_file_is_read_again_when_it_changes(self):
        big = os.path.join(self.root, "b", "big")
        name = self.big_shard(big)
        accepted = self.server_token("ya29.one")
        server = self.serve("--bearer-token-file", accepted)
        mine = os.path.join(self.tmp, "token")
        with open(mine, "w") as f:
            f.write("ya29.one\n")
        log = os.path.join(self.tmp, "mount.log")
        # A 1 MiB budget and no readahead: the end of the 6 MB object is
        # fetched again after the token rotates (with readahead, the listing
        # may already hold the whole object, and then nothing is fetched).
        mnt, _ = self.mount("gs://b/big", "-o",
                            "inflate_cache_mb=1,readahead_mb=0,gcs_token_file=%s,log=%s"
                            % (mine, log), env=self.gs_env(server))
        shard = os.path.join(mnt, name)
        records = sorted(os.listdir(shard))
        self.assertEqual(len(records), 300)
        # The token rotates (as a cron'd `gcloud auth print-access-token > FILE`).
        with open(accepted, "w") as f:
            f.write("ya29.two\n")
        with open(mine + ".new", "w") as f:
            f.write("ya29.two\n")
        os.replace(mine + ".new", mine)
        before = len(server.requests())
        for rec in records[-100:]:
            with open(os.path.join(shard, rec, "label"), "rb") as f:
                f.read()
        self.assertGreater(len(server.requests()), before)  # fetched with the new token
        with open(log) as f:
            self.assertNotIn("ya29", f.read())
        # The toolbox flag does the same.
        r = run("count", "--gcs-token-file", mine, "gs://b/big", env=self.gs_env(server))
        self.assertEqual(r.returncode, 0, r.stderr)

    # ---- index --beside for objects ----

    def test_index_beside_objects_put_and_read_back(self):
        server = self.serve("--page-size", "3", "--access-key", KEY, "--secret-key", SECRET)
        env = self.s3_env(server)
        r = run("index", "--beside", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("beside the shards", r.stdout)
        data = os.path.join(self.root, "b", "data")
        written = sorted(n for n in os.listdir(data) if n.endswith(".tfri"))
        self.assertEqual(written, [n + ".tfri" for n in self.plain])
        self.assertTrue(os.path.exists(os.path.join(data, "extra", "g.tfrecord.gz.tfri")))
        puts = [q for q in server.requests() if q.startswith("PUT ")]
        self.assertEqual(len(puts), 5 if snappy is None else 6, puts)
        self.assertTrue(all(q.endswith("auth=sigv4") for q in puts))
        # Run again with an empty cache: every index comes from beside its
        # object (the SNAPPY one's too).
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache2")
        r = run("index", "--beside", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\b0 walked, 0 grown, %d already valid"
                         % (5 if snappy is None else 6))
        # count and a mount (empty caches) read them; the .tfri objects are not shown.
        want = self.local_counts()
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache3")
        log_before = len(server.requests())
        r = run("count", "--json", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {os.path.basename(x["path"]): x["records"] for x in json.loads(r.stdout)["shards"]}
        self.assertEqual(got, want)
        reads = server.requests()[log_before:]
        self.assertTrue(any(".tfri " in q for q in reads), reads)
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache4")
        local, _ = self.mount("-o", "ro", self.local)
        remote, _ = self.mount("s3://b/data/", env=env)
        self.assertFalse([p for p in os.listdir(remote) if p.endswith(".tfri")])
        a, b = tc.read_tree(local), tc.read_tree(remote)
        for k, v in a.items():
            top = k.split("/")[0]
            self.assertEqual(b[k if top.startswith("ds-") else "extra/" + k], v, k)
        # -o nobeside reads none of them.
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache5")
        log_before = len(server.requests())
        self.mount("s3://b/data/", "-o", "nobeside,ro", env=env)  # the first holds the store
        self.assertFalse([q for q in server.requests()[log_before:] if ".tfri " in q])

    def test_index_beside_an_object_that_is_a_url_and_a_bucket_that_refuses(self):
        server = self.serve()
        url = server.url + "/b/data/" + self.plain[0]
        r = run("index", "--beside", url, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.root, "b", "data",
                                                    self.plain[0] + ".tfri")))
        env = dict(self.env)
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache2")
        r = run("index", "-v", url, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\b0 walked, 0 grown, 1 already valid")
        # A bucket that refuses the PUT: exit 1, naming the URL and the status.
        refusing = self.serve("--read-only")
        r = run("index", "--beside", "s3://b/data", env=self.s3_env(refusing, signed=False))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"PUT %s/b/data/\S+\.tfri: " % refusing.url)
        self.assertIn("HTTP 403 (AccessDenied: this bucket is read-only)", r.stderr)
        self.assertIn("may these credentials write into the bucket", r.stderr)

    def test_gzip_object_resumes_at_checkpoints_from_an_index_beside_it(self):
        # A GZIP object of several MiB: its index beside it holds checkpoints
        # and their windows, which a mount with an empty cache takes from
        # there (kept in memory) to read records in the middle of the stream.
        big = os.path.join(self.tmp, "big")
        name = self.big_shard(big)
        with open(os.path.join(big, name), "rb") as f:
            data = f.read()
        gz = zlib.compressobj(level=1, wbits=31)
        os.makedirs(os.path.join(self.root, "b", "gz"))
        with open(os.path.join(self.root, "b", "gz", "big.tfrecord.gz"), "wb") as f:
            f.write(gz.compress(data) + gz.flush())
        server = self.serve()
        env = self.s3_env(server, signed=False)
        r = run("index", "--beside", "s3://b/gz", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        tfri = os.path.join(self.root, "b", "gz", "big.tfrecord.gz.tfri")
        # Windows inside: more than the same records' index without
        # checkpoints (the plain shard's) by at least 2 windows of 1 KiB
        # (sparse windows keep only the bytes later blocks use).
        r = run("index", "--beside", big)
        self.assertEqual(r.returncode, 0, r.stderr)
        plain = os.path.getsize(os.path.join(big, name + ".tfri"))
        self.assertGreater(os.path.getsize(tfri), plain + 2 * 1024)
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache2")
        log = os.path.join(self.tmp, "mount.log")
        local, _ = self.mount("-o", "ro", big)
        remote, _ = self.mount("s3://b/gz", "-o", "inflate_cache_mb=1,verbose,log=" + log,
                               env=env)
        shard = os.path.join(remote, "big.tfrecord.gz")
        records = sorted(os.listdir(shard))
        self.assertEqual(len(records), 300)
        for rec in records[150:160] + records[-5:]:
            with open(os.path.join(shard, rec, "label"), "rb") as f:
                got = f.read()
            with open(os.path.join(local, name, rec, "label"), "rb") as f:
                self.assertEqual(got, f.read(), rec)
        with open(log) as f:
            text = f.read()
        self.assertIn("index loaded from beside the shard", text)
        self.assertNotIn("does not match", text)

    def test_gcs_token_from_a_metadata_server(self):
        big = os.path.join(self.root, "b", "big")
        name = self.big_shard(big)
        accepted = self.server_token("ya29.meta-one")
        # Tokens that live 2 s: asked again after 1 s.
        server = self.serve("--bearer-token-file", accepted, "--metadata-token-file", accepted,
                            "--metadata-expires-in", "2")
        env = self.gs_env(server)
        env["GCE_METADATA_HOST"] = "127.0.0.1:%d" % server.port
        want = self.local_counts()
        r = run("count", "--json", "gs://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["records"], sum(want.values()))
        token_gets = [q for q in server.requests() if q.startswith("GET /computeMetadata/")]
        self.assertEqual(len(token_gets), 1, server.requests())
        # No readahead: the reads below fetch (the listing's readahead may
        # hold the whole object, and then no token is asked for again).
        mnt, _ = self.mount("gs://b/big", "-o", "inflate_cache_mb=1,readahead_mb=0", env=env)
        shard = os.path.join(mnt, name)
        records = sorted(os.listdir(shard))
        with open(accepted, "w") as f:  # the server now takes only the next token
            f.write("ya29.meta-two\n")
        time.sleep(1.2)
        for rec in records[-100:]:
            with open(os.path.join(shard, rec, "label"), "rb") as f:
                f.read()
        token_gets = [q for q in server.requests() if q.startswith("GET /computeMetadata/")]
        self.assertGreaterEqual(len(token_gets), 3)  # count's, the mount's, and again
        # No metadata server there: the command fails saying so.
        env["GCE_METADATA_HOST"] = "127.0.0.1:1"
        r = run("count", "gs://b/data", env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no token from the GCE metadata server", r.stderr)

    # ---- a third-party server: s3rver ----

    # ---- Staging packed back into the bucket ----

    def examples(self, path):
        """The decoded examples of a shard, read by the independent reader
        (every CRC checked), as sorted comparable strings."""
        return sorted(repr(sorted(tc.decode_example(p).items()))
                      for p in tc.read_records(path))

    def staged_objects(self):
        data = os.path.join(self.root, "b", "data")
        return sorted(n for n in os.listdir(data) if n.startswith("staged-"))

    def uploaded(self):
        """The name of the one object the pack uploaded (staged-...), and
        its records as examples()."""
        new = self.staged_objects()
        self.assertEqual(len(new), 1, new)
        return new[0], self.examples(os.path.join(self.root, "b", "data", new[0]))

    def uploads_in_flight(self):
        return os.listdir(os.path.join(self.root, ".uploads"))

    def stage_shard(self, mnt, shard, limit=None):
        """cp -r of the records of `shard` (a folder of the mount) into
        staging; returns how many."""
        records = sorted(os.listdir(os.path.join(mnt, shard)))[:limit]
        for i, rec in enumerate(records):
            shutil.copytree(os.path.join(mnt, shard, rec),
                            os.path.join(mnt, "staging", "new%05d" % i))
        return len(records)

    def pack_mount(self, server, *extra, fault=None):
        env = self.s3_env(server)
        if fault:
            env["TFRECORDFS_FAULT"] = fault
        log = os.path.join(self.tmp, "mount%d.log" % len(self.mounts))
        mnt, _ = self.mount("s3://b/data/", "-o", "log=" + log, *extra, env=env)
        return mnt, log, env

    def unmount(self, mnt, env):
        return run("unmount", mnt, env=env)

    def test_staged_records_are_packed_into_the_bucket(self):
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        mnt, log, env = self.pack_mount(server)
        n = self.stage_shard(mnt, self.plain[0])
        self.assertEqual(n, 20)
        r = self.unmount(mnt, env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        name, examples = self.uploaded()
        self.assertRegex(name, r"^staged-\d{8}T\d{6}-00000-of-00001\.tfrecord$")
        self.assertEqual(examples, self.examples(os.path.join(self.local, self.plain[0])))
        # One PUT, no multipart upload (20 small records), nothing in flight.
        puts = [q for q in server.requests() if q.startswith("PUT ")]
        self.assertEqual(len(puts), 1, puts)
        self.assertIn("/b/data/" + name, puts[0])
        self.assertFalse([q for q in server.requests() if q.startswith("POST ")])
        self.assertEqual(self.uploads_in_flight(), [])
        # A new mount lists the new shard, and has nothing staged.
        mnt, _, env = self.pack_mount(server)
        self.assertIn(name, os.listdir(mnt))
        self.assertEqual(len(os.listdir(os.path.join(mnt, name))), 20)
        self.assertEqual(os.listdir(os.path.join(mnt, "staging")), [])
        r = self.unmount(mnt, env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.staged_objects(), [name])  # nothing packed twice

    def big_source(self):
        """A shard of about 12 MB under s3://b/data/big/ (and locally):
        staging all of it crosses the 8 MiB multipart threshold."""
        folder = os.path.join(self.tmp, "bigsrc")
        os.makedirs(folder)
        subprocess.run([GEN, "synthetic", folder, "--records", "300", "--shards", "1",
                        "--bytes", "40000", "--prefix", "big"], check=True, capture_output=True)
        name = os.listdir(folder)[0]
        dest = os.path.join(self.root, "b", "data", "big")
        os.makedirs(dest)
        shutil.copy(os.path.join(folder, name), dest)
        return os.path.join(folder, name), "big/" + name

    def test_a_big_staged_set_is_a_multipart_upload(self):
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        local, shard = self.big_source()
        self.assertGreater(os.path.getsize(local), 10 << 20)
        mnt, log, env = self.pack_mount(server)
        self.assertEqual(self.stage_shard(mnt, shard), 300)
        r = self.unmount(mnt, env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.uploaded()[1], self.examples(local))
        reqs = server.requests()
        self.assertEqual(len([q for q in reqs if q.startswith("POST ") and "?uploads" in q]), 1)
        parts = [q for q in reqs if q.startswith("PUT ") and "partNumber=" in q]
        self.assertEqual(len(parts), 2, parts)  # 8 MiB + the rest
        self.assertTrue(all(q.endswith("auth=sigv4") for q in reqs))
        self.assertTrue(any(q.startswith("POST ") and "uploadId=" in q and " 200 " in q
                            for q in reqs))
        self.assertEqual(self.uploads_in_flight(), [])

    def test_multipart_mb_sets_the_part_size_and_the_threshold(self):
        """-o multipart_mb=N: a shard above N MiB goes up in N MiB parts, one
        below it with one PUT (the 12 MB shard: 5 + 5 + 2 MiB, then one PUT
        under multipart_mb=16)."""
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        local, shard = self.big_source()
        want = self.examples(local)
        for mb, parts, puts in ((5, 3, 0), (16, 0, 1)):
            with self.subTest(multipart_mb=mb):
                before = len(server.requests())
                mnt, log, env = self.pack_mount(server, "-o", "multipart_mb=%d" % mb)
                self.assertEqual(self.stage_shard(mnt, shard), 300)
                r = self.unmount(mnt, env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                reqs = server.requests()[before:]
                self.assertEqual(
                    len([q for q in reqs if q.startswith("PUT ") and "partNumber=" in q]), parts)
                self.assertEqual(
                    len([q for q in reqs if q.startswith("PUT ") and "partNumber=" not in q
                         and "/staged-" in q]), puts, reqs)
                self.assertEqual(self.uploads_in_flight(), [])
        new = self.staged_objects()
        self.assertEqual(len(new), 2, new)
        for name in new:
            self.assertEqual(self.examples(os.path.join(self.root, "b", "data", name)), want)
        r = run("--help")
        self.assertIn("multipart_mb=N", r.stdout + r.stderr)

    def test_a_crash_mid_upload_is_finished_by_the_next_mount(self):
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        local, shard = self.big_source()
        want = self.examples(local)
        # Killed after the first part (an upload in flight), and after the
        # object completed (its local copy kept): either way the next
        # unmount leaves exactly one object with every record once.
        for fault, said in (("mid_upload", "aborted the interrupted multipart upload"),
                            ("before_complete", "aborted the interrupted multipart upload"),
                            ("after_upload:1", "was complete before the interruption"),
                            ("upload_after_journal", "was not uploaded; uploading it now")):
            with self.subTest(fault=fault):
                for n in self.staged_objects():
                    os.unlink(os.path.join(self.root, "b", "data", n))
                mnt, log, env = self.pack_mount(server, fault=fault)
                self.assertEqual(self.stage_shard(mnt, shard), 300)
                r = self.unmount(mnt, env)
                self.assertNotEqual(r.returncode, 0, r.stdout)  # the daemon died
                if fault == "after_upload:1":
                    self.assertEqual(len(self.staged_objects()), 1)
                else:
                    # Never a half object under the final name.
                    self.assertEqual(self.staged_objects(), [])
                if fault in ("mid_upload", "before_complete"):
                    self.assertEqual(len(self.uploads_in_flight()), 1)
                # The next mount finishes the upload before it lists the
                # bucket (and says so): it shows the new shard, whole, and
                # nothing staged.
                mnt, log2, env = self.pack_mount(server)
                with open(log2) as f:
                    self.assertIn(said, f.read())
                new = self.staged_objects()
                self.assertEqual(len(new), 1, new)
                self.assertEqual(len(os.listdir(os.path.join(mnt, new[0]))), 300)
                self.assertEqual(os.listdir(os.path.join(mnt, "staging")), [])
                r = self.unmount(mnt, env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertEqual(self.uploaded()[1], want)
                self.assertEqual(self.uploads_in_flight(), [])

    def test_a_damaged_upload_journal_is_refused_not_guessed(self):
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        local, shard = self.big_source()
        mnt, log, env = self.pack_mount(server, fault="mid_upload")
        self.stage_shard(mnt, shard)
        self.unmount(mnt, env)
        self.assertEqual(len(self.uploads_in_flight()), 1)
        journal = glob.glob(os.path.join(self.env["HOME"], ".local", "state", "tfrecordfs",
                                         "staging", "*", "outgoing", "upload.journal"))
        self.assertEqual(len(journal), 1)
        with open(journal[0], "r+b") as f:
            f.seek(40)
            byte = f.read(1)
            f.seek(40)
            f.write(bytes([byte[0] ^ 1]))
        mnt, log2, env = self.pack_mount(server)
        with open(log2) as f:
            self.assertIn("damaged upload journal", f.read())
        r = self.unmount(mnt, env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("damaged upload journal", r.stdout + r.stderr)
        # Nothing was touched: no object, the upload still in flight, the
        # shard still waiting beside the journal.
        self.assertEqual(self.staged_objects(), [])
        self.assertEqual(len(self.uploads_in_flight()), 1)
        self.assertEqual(len(os.listdir(os.path.dirname(journal[0]))), 2)

    def test_gs_staging_packs_through_hmac_signing(self):
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        env = dict(self.env)
        env["STORAGE_EMULATOR_HOST"] = server.url
        env["GS_ACCESS_KEY_ID"], env["GS_SECRET_ACCESS_KEY"] = KEY, SECRET
        mnt, _ = self.mount("gs://b/data", env=env)
        self.assertEqual(self.stage_shard(mnt, self.plain[2], limit=5), 5)
        r = self.unmount(mnt, env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("gs://b/data/staged-", r.stdout)
        _, examples = self.uploaded()
        # The first 5 records of the shard (staged as new00000..new00004).
        want = [repr(sorted(tc.decode_example(p).items()))
                for p in tc.read_records(os.path.join(self.local, self.plain[2]))]
        self.assertEqual(examples, sorted(want[:5]))
        puts = [q for q in server.requests() if q.startswith("PUT ")]
        self.assertTrue(puts and all(q.endswith("auth=sigv4") for q in puts))

    def test_a_refused_part_aborts_the_upload_and_the_shard_waits(self):
        # Parts of 8 MiB are refused (413): the upload is aborted, nothing
        # appears under the name, and the packed shard waits locally until a
        # store that takes it is there at the next mount.
        small = self.serve("--access-key", KEY, "--secret-key", SECRET,
                           "--max-put", str(4 << 20))
        local, shard = self.big_source()
        mnt, log, env = self.pack_mount(small)
        self.assertEqual(self.stage_shard(mnt, shard), 300)
        r = self.unmount(mnt, env)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("wait in", r.stdout + r.stderr)
        self.assertEqual(self.staged_objects(), [])
        self.assertEqual(self.uploads_in_flight(), [])
        self.assertTrue(any(q.startswith("DELETE ") and "uploadId=" in q
                            for q in small.requests()))
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        mnt, log2, env = self.pack_mount(server)
        with open(log2) as f:
            self.assertIn("was not uploaded; uploading it now", f.read())
        r = self.unmount(mnt, env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.uploaded()[1], self.examples(local))

    def test_an_existing_object_is_never_overwritten(self):
        server = self.serve("--access-key", KEY, "--secret-key", SECRET)
        taken = os.path.join(self.root, "b", "data", "mine-00000-of-00001.tfrecord")
        shutil.copy(os.path.join(self.local, self.plain[1]), taken)
        with open(taken, "rb") as f:
            before = f.read()
        mnt, log, env = self.pack_mount(server, "-o", "prefix=mine")
        self.stage_shard(mnt, self.plain[0], limit=3)
        r = self.unmount(mnt, env)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("s3://b/data/mine-", r.stdout + r.stderr)
        self.assertIn("choose another prefix", r.stdout + r.stderr)
        with open(taken, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertFalse([q for q in server.requests() if q.startswith(("PUT ", "POST "))])
        # The records stay staged, and pack under a free name next time.
        mnt, log, env = self.pack_mount(server)
        self.assertEqual(len(os.listdir(os.path.join(mnt, "staging"))), 3)
        r = self.unmount(mnt, env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(self.staged_objects()), 1)

    def start_s3rver(self):
        """Starts s3rver with bucket b (the test is skipped without it):
        a botocore client of it, and the environment that points tfrecordfs
        at it. Both are stopped when the test ends."""
        if shutil.which("s3rver") is None:
            self.skipTest("s3rver is not installed (scripts/setup installs it from npm)")
        server = S3rver(os.path.join(self.tmp, "s3rver"), "b")
        self.addCleanup(server.stop)
        client = server.client()
        self.addCleanup(client.close)
        env = dict(self.env)
        env.update(AWS_ENDPOINT_URL=server.url, AWS_ACCESS_KEY_ID=S3rver.KEY,
                   AWS_SECRET_ACCESS_KEY=S3rver.SECRET)
        return client, env

    def test_staging_packs_into_s3rver_checked_by_botocore(self):
        # The third-party server takes the PUT and the multipart upload, and
        # botocore (the aws CLI's client) reads back what was uploaded.
        client, env = self.start_s3rver()
        local, _ = self.big_source()
        with open(local, "rb") as f:
            client.put_object(Bucket="b", Key="data/big/" + os.path.basename(local),
                              Body=f.read())
        for limit, multipart in ((10, False), (None, True)):
            with self.subTest(multipart=multipart):
                mnt, _ = self.mount("s3://b/data", env=env)
                n = self.stage_shard(mnt, "big/" + os.path.basename(local), limit=limit)
                r = self.unmount(mnt, env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                keys = sorted(o["Key"] for o in client.list_objects_v2(
                    Bucket="b", Prefix="data/staged-").get("Contents", []))
                self.assertEqual(len(keys), 2 if multipart else 1, keys)
                newest = [k for k in keys if k.split("/")[-1] in r.stdout]
                self.assertEqual(len(newest), 1, (keys, r.stdout))
                body = client.get_object(Bucket="b", Key=newest[0])["Body"].read()
                if multipart:
                    self.assertGreater(len(body), 8 << 20)
                got = os.path.join(self.tmp, "got.tfrecord")
                with open(got, "wb") as f:
                    f.write(body)
                self.assertEqual(len(tc.read_records(got)), n)
                # The first n records of the shard (staged as new00000...).
                want = [repr(sorted(tc.decode_example(p).items()))
                        for p in tc.read_records(local)]
                self.assertEqual(self.examples(got), sorted(want[:n]))

    def test_interop_with_s3rver_and_botocore(self):
        client, env = self.start_s3rver()
        for name in sorted(os.listdir(self.local)):  # uploaded by botocore
            with open(os.path.join(self.local, name), "rb") as f:
                client.put_object(Bucket="b", Key="data/" + name, Body=f.read())
        want = self.local_counts()
        r = run("count", "--json", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {os.path.basename(x["path"]): x["records"] for x in json.loads(r.stdout)["shards"]}
        self.assertEqual(got, want)
        # index --beside PUTs <object>.tfri; botocore sees them, and a run
        # with an empty cache takes every index from there.
        r = run("index", "--beside", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        keys = {o["Key"]: o["Size"] for o in client.list_objects_v2(Bucket="b")["Contents"]}
        for name in want:
            self.assertGreater(keys.get("data/%s.tfri" % name, 0), 16, name)
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache2")
        r = run("index", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\b0 walked, 0 grown, %d already valid" % len(want))
        # A mount serves the same bytes as a local one.
        env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache3")
        local, _ = self.mount("-o", "ro", self.local)
        remote, _ = self.mount("s3://b/data", env=env)
        self.assertEqual(tc.read_tree(remote), tc.read_tree(local))
        # An object replaced behind a mount (other bytes, so another ETag)
        # fails its reads (EIO) rather than mixing objects: If-Match holds.
        big = os.path.join(self.tmp, "big")
        name = self.big_shard(big)
        with open(os.path.join(big, name), "rb") as f:
            data = f.read()
        client.put_object(Bucket="b", Key="big/" + name, Body=data)
        # No readahead: listing the shard folder would fetch the object's
        # start before it is replaced.
        mnt, _ = self.mount("s3://b/big", "-o", "inflate_cache_mb=1,readahead_mb=0", env=env)
        records = sorted(os.listdir(os.path.join(mnt, name)))
        self.assertEqual(len(records), 300)
        client.put_object(Bucket="b", Key="big/" + name, Body=data[::-1])
        failed = 0
        for rec in records[-150:]:
            try:
                with open(os.path.join(mnt, name, rec, "label"), "rb") as f:
                    f.read()
            except OSError as e:
                self.assertEqual(e.errno, errno.EIO)
                failed += 1
        self.assertGreater(failed, 0)

if __name__ == "__main__":
    unittest.main(verbosity=2)
