#!/usr/bin/python3
"""Object storage servers that misbehave, through the real binary: listings
that never end or hold keys outside the prefix, keys that would climb out
of the bucket or cannot be shown, a server that trickles bytes, one that
answers every range from byte 0, one that ignores Range (python3 -m
http.server), presigned URLs whose credentials must be written nowhere, and
a bucket's files that are not shards. The servers are object_server.py's
hostile modes (and Python's own http.server) on 127.0.0.1, started and
stopped here; no assertion depends on timing (the bounds on how long a
command may run are generous: they only turn a hang into a failure).
Mount parts skip without /dev/fuse. Environment: TFRECORDFS_BIN,
TFRECORDFS_GEN (meson).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
import objstore_test as base  # noqa: E402 -- its Server and run()
import tfrecord_check as tc  # noqa: E402 -- the independent reader

BIN, GEN = base.BIN, base.GEN
# What a command may take at most before the test calls it a hang.
HANG = int(os.environ.get("HANG", 180))


def run(*args, env=None, timeout=HANG):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


class HostileServerTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN and GEN)
        self.tmp = tempfile.mkdtemp(prefix="hostile_test.")
        self.env = dict(os.environ)
        self.env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache")
        self.env["XDG_STATE_HOME"] = os.path.join(self.tmp, "state")
        for k in list(self.env):
            if k.startswith(("AWS_", "GS_", "GOOGLE_")) or k in ("STORAGE_EMULATOR_HOST",
                                                                 "GCE_METADATA_HOST"):
                del self.env[k]
        self.env["NO_GCE_CHECK"] = "true"
        self.env["HOME"] = os.path.join(self.tmp, "home")
        os.makedirs(self.env["HOME"])
        # Bucket "b", prefix ds/: two small shards, and the files a TFDS
        # dataset keeps beside its shards.
        self.root = os.path.join(self.tmp, "served")
        self.ds = os.path.join(self.root, "b", "ds")
        os.makedirs(self.ds)
        subprocess.run([GEN, "synthetic", self.ds, "--records", "20", "--shards", "2",
                        "--bytes", "500", "--prefix", "small.tfrecord"], check=True,
                       capture_output=True)
        self.shards = sorted(os.listdir(self.ds))
        self.servers = []
        self.mounts = []

    def tearDown(self):
        for mnt in self.mounts:
            run("unmount", mnt, env=self.env, timeout=60)
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def serve(self, *extra):
        s = base.Server(self.root, *extra)
        self.servers.append(s)
        return s

    def s3_env(self, server):
        env = dict(self.env)
        env["AWS_ENDPOINT_URL"] = server.url
        env["AWS_NO_SIGN_REQUEST"] = "true"
        return env

    def try_mount(self, *args, env=None):
        """(mount point, completed process); the mount is unmounted at
        tearDown when it succeeded."""
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            self.skipTest("no /dev/fuse")
        mnt = os.path.join(self.tmp, "mnt%d" % len(self.mounts))
        os.mkdir(mnt)
        r = run(*args, mnt, env=env or self.env)
        if r.returncode == 0:
            self.mounts.append(mnt)
        return mnt, r

    def mount(self, *args, env=None):
        mnt, r = self.try_mount(*args, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return mnt

    def big_shard(self, name):
        """A shard of about 6 MB (several 1 MiB GETs) in ds/, named `name`."""
        out = os.path.join(self.tmp, "big")
        subprocess.run([GEN, "synthetic", out, "--records", "300", "--shards", "1",
                        "--bytes", "20000", "--prefix", "big"], check=True, capture_output=True)
        shutil.move(os.path.join(out, os.listdir(out)[0]), os.path.join(self.ds, name))

    def lists(self, server):
        return [q for q in server.requests() if "list-type=2" in q]

    # ---- item 11: listings ----

    def test_a_repeated_continuation_token_stops_the_listing(self):
        server = self.serve("--list-repeat-token")
        r = run("count", "s3://b/ds/", env=self.s3_env(server))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("continuation token it gave before", r.stderr)
        self.assertEqual(len(self.lists(server)), 2, server.requests())
        log = os.path.join(self.tmp, "mount.log")
        _, m = self.try_mount("s3://b/ds/", "-o", "ro,log=" + log, env=self.s3_env(server))
        self.assertNotEqual(m.returncode, 0)
        self.assertIn("continuation token it gave before", m.stderr)
        with open(log) as f:
            self.assertIn("listing stopped", f.read())

    def test_tokens_that_keep_changing_stop_at_the_key_cap(self):
        # Pages of 1000 new keys with a new token each time, forever: the
        # listing stops at its caps (500000 keys) with an error.
        server = self.serve("--list-endless")
        r = run("count", "s3://b/ds/", env=self.s3_env(server))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("more than 500000 keys", r.stderr)
        self.assertLessEqual(len(self.lists(server)), 501)

    def test_keys_outside_the_prefix_or_climbing_out_are_not_shown_nor_fetched(self):
        keys = os.path.join(self.tmp, "keys.json")
        with open(keys, "w") as f:
            # A name of 300 bytes (more than NAME_MAX), a key of 5000 (ls of
            # the root failed), one of 15 MiB (the mount failed).
            json.dump(["zz/outside-prefix", "../escape", "ds/../escape2", "ds/x/../../escape3",
                       "ds/" + "n" * 300, "ds/" + "n" * 5000, "ds/" + "k" * (15 << 20)], f)
        server = self.serve("--extra-keys-file", keys)
        log = os.path.join(self.tmp, "mount.log")
        mnt = self.mount("s3://b/ds/", "-o", "ro,log=" + log, env=self.s3_env(server))
        self.assertEqual(sorted(os.listdir(mnt)), self.shards)
        for shard in self.shards:  # the shards are served as they are
            self.assertEqual(len(os.listdir(os.path.join(mnt, shard))), 10)
        with open(log) as f:
            text = f.read()
        self.assertIn("'zz/outside-prefix': not under the prefix asked for; not shown", text)
        self.assertIn("'../escape': not under the prefix asked for", text)
        self.assertIn("'ds/../escape2': an empty, '.' or '..' part", text)
        self.assertIn("longer than 255 bytes", text)
        self.assertIn("7 keys of the listing not shown in all", text)
        self.assertLess(len(text), 64 << 10)  # the 15 MiB key is not logged whole
        # Nothing but the listing and the two shards was asked for.
        paths = {q.split()[1].split("?")[0] for q in server.requests() if q.startswith("GET")}
        self.assertEqual(paths - {"/b/"}, {"/b/ds/" + s for s in self.shards})

    # ---- item 12: presigned URLs ----

    def test_a_presigned_urls_credentials_are_written_nowhere(self):
        token, signature = "SECRETSESSIONTOKEN0123", "SIGNATURE0123456789abcdef"
        server = self.serve()
        query = ("?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Security-Token=%s"
                 "&X-Amz-Signature=%s" % (token, signature))
        plain = "%s/b/ds/%s" % (server.url, self.shards[0])
        log = os.path.join(self.tmp, "mount.log")
        mnt = self.mount(plain + query, "-o", "ro,log=" + log)
        local = self.mount("-o", "ro", os.path.join(self.ds, self.shards[0]))
        self.assertEqual(tc.read_tree(mnt), tc.read_tree(local))
        # The requests carried the query string: the server got the credentials.
        self.assertTrue(any(token in q for q in server.requests()))
        with open("/proc/mounts") as f:
            mounts = f.read()
        self.assertIn(plain + " ", mounts)  # the fsname: the URL without its query
        # A request that fails names the URL without them.
        bad = "%s/b/ds/nope.tfrecord%s" % (server.url, query)
        r = run("count", bad, env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("%s/b/ds/nope.tfrecord: HTTP 404" % server.url, r.stderr)
        written = {"/proc/mounts": mounts, "stderr": r.stderr}
        with open(log) as f:
            written["log"] = f.read()
        self.assertIn(plain, written["log"])
        files = glob.glob(os.path.join(self.env["XDG_CACHE_HOME"], "**"), recursive=True)
        self.assertTrue(any(f.endswith(".tfri") for f in files), files)
        for path in files:
            written["name " + path] = path
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    written[path] = f.read().decode("latin-1")
        for where, text in written.items():
            for secret in (token, signature, "X-Amz-"):
                self.assertNotIn(secret, text, where)

    # ---- item 13 and item 15: deadlines, lying servers, one bad object ----

    def test_a_trickling_server_meets_the_deadline_and_the_rest_is_served(self):
        # GETs of ds/slow.tfrecord get 2 bytes a second (which the "30 s
        # without a byte" rule lets through); with a 2 s deadline its probe
        # fails, is logged, and the other shards are served.
        shutil.copy(os.path.join(self.ds, self.shards[0]), os.path.join(self.ds, "slow.tfrecord"))
        server = self.serve("--trickle", "slow.tfrecord")
        log = os.path.join(self.tmp, "mount.log")
        mnt = self.mount("s3://b/ds/", "-o", "ro,request_timeout=2,log=" + log,
                         env=self.s3_env(server))
        self.assertEqual(sorted(os.listdir(mnt)), self.shards)
        with open(log) as f:
            text = f.read()
        self.assertIn("s3://b/ds/slow.tfrecord", text)
        self.assertIn("no complete answer within the 2 s deadline", text)
        self.assertIn("not shown", text)
        # The toolbox says so and exits 1, after counting the others.
        r = run("count", "--json", "--request-timeout", "2", "s3://b/ds/",
                env=self.s3_env(server))
        self.assertEqual(r.returncode, 1)
        self.assertIn("s3://b/ds/slow.tfrecord", r.stderr)
        self.assertEqual(json.loads(r.stdout)["records"], 20)
        # With nothing else to serve, the mount fails as the object did.
        _, m = self.try_mount("%s/b/ds/slow.tfrecord" % server.url, "-o", "request_timeout=2")
        self.assertNotEqual(m.returncode, 0)
        self.assertIn("no complete answer within the 2 s deadline", m.stderr)

    def test_a_server_answering_every_range_from_byte_0_is_refused(self):
        self.big_shard("big.tfrecord")
        server = self.serve("--from-zero", "big.tfrecord")
        log = os.path.join(self.tmp, "mount.log")
        mnt = self.mount("s3://b/ds/", "-o", "ro,log=" + log, env=self.s3_env(server))
        self.assertEqual(sorted(os.listdir(mnt)), self.shards)
        with open(log) as f:
            text = f.read()
        self.assertIn("s3://b/ds/big.tfrecord", text)
        self.assertIn("not the range asked for", text)
        gets = [q for q in server.requests() if q.startswith("GET /b/ds/big.tfrecord")]
        self.assertLess(len(gets), 40, gets)

    # ---- rough edges ----

    def test_a_server_that_ignores_range_serves_small_objects_and_says_so_for_big_ones(self):
        self.big_shard("big.tfrecord")
        proc = subprocess.Popen(["/usr/bin/python3", "-u", "-m", "http.server", "0", "--bind",
                                 "127.0.0.1", "--directory", self.ds],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = proc.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (...) ..."
            port = int(line.split(" port ")[1].split()[0])
            url = "http://127.0.0.1:%d/" % port
            r = run("count", "--json", url + self.shards[0], env=self.env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["records"], 10)
            mnt = self.mount(url + self.shards[1])
            local = self.mount("-o", "ro", os.path.join(self.ds, self.shards[1]))
            self.assertEqual(tc.read_tree(mnt), tc.read_tree(local))
            r = run("count", url + "big.tfrecord", env=self.env)
            self.assertEqual(r.returncode, 1)
            self.assertIn(url + "big.tfrecord", r.stderr)
            self.assertIn("the server ignored the Range header", r.stderr)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()

    def test_a_buckets_other_files_are_shown_as_a_local_mount_shows_them(self):
        others = {"dataset_info.json": b'{"name": "ds", "splits": []}\n',
                  "features.json": b'{"type": "tensorflow_datasets.core.features"}\n',
                  "label.labels.txt": b"cat\ndog\n",
                  "meta/README": b"x" * 3000000}  # more than one 1 MiB GET
        for name, data in others.items():
            os.makedirs(os.path.dirname(os.path.join(self.ds, name)), exist_ok=True)
            with open(os.path.join(self.ds, name), "wb") as f:
                f.write(data)
        server = self.serve()
        local = self.mount("-o", "ro", self.ds)
        remote = self.mount("s3://b/ds/", "-o", "ro", env=self.s3_env(server))
        a, b = tc.read_tree(local), tc.read_tree(remote)
        self.assertEqual(sorted(a), sorted(b))
        self.assertEqual(a, b)
        for name, data in others.items():
            self.assertEqual(b[name], data, name)
        with open(os.path.join(remote, "meta/README"), "rb") as f:
            f.seek(2500000)
            self.assertEqual(f.read(10), b"x" * 10)
        self.assertEqual(os.stat(os.path.join(remote, "label.labels.txt")).st_mode & 0o777, 0o444)
        with self.assertRaises(OSError):
            with open(os.path.join(remote, "label.labels.txt"), "w"):
                pass


if __name__ == "__main__":
    unittest.main(verbosity=2)
