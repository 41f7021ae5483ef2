#!/usr/bin/python3
"""Edits and deletions of records of an s3:// object, committed through
real mounts of a bucket served by tests/objstore/object_server.py (started
here on 127.0.0.1, stopped here): the shell's tools (echo >, sed -i, cp over
an image, rm -r, mv into staging) edit records of a mounted object,
`tfrecordfs status` lists them, `tfrecordfs commit` and unmount rewrite the
object in place with server-side copies of its unchanged ranges and a final
write conditional on the ETag the mount listed (repack/bucket_rewrite.h).

The object is judged as the server holds it, read with the independent
reader tests/cli/tfrecord_check.py: edited records carry the edit, deleted
ones are gone, every other record is byte for byte the original's. The
server's --stats counters say which bytes crossed the network and which
were copied by the store. A daemon SIGKILLed at the commit's steps and a
remount leave every record all-old or all-new and no upload in flight; a
second writer that replaced the object between the listing and the commit
keeps its object (the commit refuses, the edits stay pending, status and
the log name the object); two mounts committing to one object at once:
exactly one wins.
Skips without /dev/fuse. Environment: TFRECORDFS_BIN, TFRECORDFS_GEN (meson).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import zlib

try:
    import snappy  # Debian's python3-snappy
except ImportError:
    snappy = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
sys.path.insert(0, HERE)
import tfrecord_check as tc  # noqa: E402 -- the independent reader
from objstore_test import BIN, GEN, KEY, SECRET, Server, run  # noqa: E402

SHARD = "big-00000-of-00001.tfrecord"
RECORDS = 300


def label_of(payload):
    return tc.decode_example(payload)["label"][1]


def daemon_pid(log):
    """The mount daemon's pid, from its log's lines ("tfrecordfs[PID]: ...")."""
    with open(log) as f:
        return int(re.findall(r"tfrecordfs\[(\d+)\]", f.read())[-1])


class BucketEditTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN and GEN)
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            self.skipTest("no /dev/fuse")
        self.tmp = tempfile.mkdtemp(prefix="bucket_edit_test.")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("AWS_", "GS_", "GOOGLE_", "GCE_"))}
        self.env["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache")
        self.env["HOME"] = os.path.join(self.tmp, "home")
        os.makedirs(self.env["HOME"])
        self.root = os.path.join(self.tmp, "served")
        self.data = os.path.join(self.root, "b", "data")
        os.makedirs(self.data)
        # One object of 300 records of about 40 kB (12 MB): more than two
        # of S3's 5 MiB minimum parts, so its unchanged ranges are copied.
        subprocess.run([GEN, "synthetic", self.data, "--records", str(RECORDS), "--shards", "1",
                        "--bytes", "40000", "--prefix", "big"], check=True, capture_output=True)
        self.object = os.path.join(self.data, SHARD)
        self.original = tc.read_records(self.object)
        self.saved = os.path.join(self.tmp, "original.tfrecord")
        shutil.copy(self.object, self.saved)
        self.assertEqual(len(self.original), RECORDS)
        self.stats = os.path.join(self.tmp, "stats.json")
        self.server = Server(self.root, "--access-key", KEY, "--secret-key", SECRET,
                             "--stats", self.stats)
        self.env.update(AWS_ENDPOINT_URL=self.server.url, AWS_ACCESS_KEY_ID=KEY,
                        AWS_SECRET_ACCESS_KEY=SECRET)
        self.mounts = []

    def tearDown(self):
        for mnt in self.mounts:
            run("unmount", mnt, env=self.env)
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def mount(self, *extra, fault=None, name=None, source="s3://b/data/"):
        n = len(self.mounts)
        mnt = os.path.join(self.tmp, name or "mnt%d" % n)
        os.makedirs(mnt, exist_ok=True)
        log = os.path.join(self.tmp, "%s.log" % os.path.basename(mnt))
        env = dict(self.env)
        if fault:
            env["TFRECORDFS_FAULT"] = fault
        r = run(source, "-o", "log=" + log, *extra, mnt, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.mounts.append(mnt)
        return mnt, log

    def unmount(self, mnt):
        r = run("unmount", mnt, env=self.env)
        self.mounts.remove(mnt)
        return r

    def counters(self):
        with open(self.stats) as f:
            return json.load(f)

    def uploads_in_flight(self):
        d = os.path.join(self.root, ".uploads")
        return os.listdir(d) if os.path.isdir(d) else []

    def sh(self, script):
        r = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def edit(self, mnt):
        """The edits of every kind through the shell's tools; returns what
        the object must hold after them: {old index: payload or None}."""
        rec = os.path.join(mnt, SHARD)
        self.sh("""
            echo 7 > '{r}/005/label'
            sed -i 's/.*/3/' '{r}/150/label'
            cp '{r}/001/image_raw.jpg' '{r}/151/image_raw.jpg'
            rm -r '{r}/010'
            mv '{r}/020' '{m}/staging/moved'
        """.format(r=rec, m=mnt))
        return {5: ("label", [7]), 150: ("label", [3]), 151: ("image", None), 10: None, 20: None}

    def check_object(self, want, path=None):
        """The object the server holds: every record but the edited and
        deleted ones byte for byte the original's, in order."""
        records = tc.read_records(path or self.object)  # every CRC checked
        kept = [i for i in range(RECORDS) if i not in want or want[i] is not None]
        self.assertEqual(len(records), len(kept))
        for new, old in enumerate(kept):
            if old not in want:
                self.assertEqual(records[new], self.original[old], "record %d" % old)
                continue
            got = tc.decode_example(records[new])
            before = tc.decode_example(self.original[old])
            feature, value = want[old]
            if feature == "label":
                self.assertEqual(got["label"][1], value, "record %d" % old)
                self.assertEqual({k: v for k, v in got.items() if k != "label"},
                                 {k: v for k, v in before.items() if k != "label"})
            else:  # the image of record 1
                self.assertEqual(got["image_raw"], tc.decode_example(self.original[1])["image_raw"])
                self.assertEqual(got["label"], before["label"])
        return records

    def test_shell_edits_are_committed_with_server_side_copies(self):
        mnt, log = self.mount()
        want = self.edit(mnt)
        # status lists the pending edits by the object's URL.
        r = run("status", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("s3://b/data/" + SHARD, r.stdout)
        self.assertEqual(tc.read_records(self.object), self.original)  # nothing written yet
        with open(self.stats, "w") as f:
            f.write("{}")
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("rewrote s3://b/data/" + SHARD, r.stdout)
        self.assertIn("deleted 2", r.stdout)
        self.check_object(want)
        # The unchanged ranges were copied by the store, server-side: what
        # crossed the network is less than the object, and with the copies
        # makes all of it.
        c = self.counters()
        size = os.path.getsize(self.object)
        copied = c["UploadPartCopy"]["bytes_copied"]
        uploaded = c["UploadPart"]["bytes_in"]
        self.assertGreater(copied, 5 << 20)
        self.assertEqual(copied + uploaded, size)
        self.assertLess(uploaded, size - (5 << 20))
        self.assertEqual(c["CompleteMultipartUpload"]["requests"], 1)
        self.assertEqual(self.uploads_in_flight(), [])
        # The mount shows the new object: the moved record's place taken.
        self.assertEqual(len(os.listdir(os.path.join(mnt, SHARD))), RECORDS - 2)
        with open(os.path.join(mnt, SHARD, "005", "label")) as f:
            self.assertEqual(f.read().strip(), "7")
        # A second edit of the rewritten object, committed at unmount; the
        # record moved into staging is packed into the bucket.
        self.sh("echo 9 > '%s/000/label'" % os.path.join(mnt, SHARD))
        r = self.unmount(mnt)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        want[0] = ("label", [9])
        self.check_object(want)
        staged = [n for n in os.listdir(self.data) if n.startswith("staged-")]
        self.assertEqual(len(staged), 1, os.listdir(self.data))
        self.assertEqual(tc.read_records(os.path.join(self.data, staged[0])), [self.original[20]])
        self.assertEqual(self.uploads_in_flight(), [])

    def test_compressed_objects_are_rewritten_in_their_codec(self):
        first = self.original[:40]
        raw = b"".join(tc.frame(p) for p in first)
        objects = {"g.tfrecord.gz": "gzip", "z.tfrecord.zlib": "zlib"}
        gz = zlib.compressobj(wbits=31)
        with open(os.path.join(self.data, "g.tfrecord.gz"), "wb") as f:
            f.write(gz.compress(raw) + gz.flush())
        with open(os.path.join(self.data, "z.tfrecord.zlib"), "wb") as f:
            f.write(zlib.compress(raw))
        if snappy is not None:
            objects["s.tfrecord"] = "snappy"
            with open(os.path.join(self.data, "s.tfrecord"), "wb") as f:
                for at in range(0, len(raw), 50000):
                    c = snappy.compress(raw[at:at + 50000])
                    f.write(len(c).to_bytes(4, "big") + c)
        mnt, log = self.mount()
        for name in objects:
            self.sh("echo 7 > '{r}/03/label'; rm -r '{r}/04'".format(
                r=os.path.join(mnt, name)))
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for name, codec in objects.items():
            with self.subTest(codec=codec):
                path = os.path.join(self.data, name)
                with open(path, "rb") as f:
                    data = f.read()
                if codec == "snappy":
                    plain, at = b"", 0
                    while at < len(data):
                        n = int.from_bytes(data[at:at + 4], "big")
                        plain += snappy.uncompress(data[at + 4:at + 4 + n])
                        at += 4 + n
                    with open(path + ".plain", "wb") as f:
                        f.write(plain)
                    records = tc.read_records(path + ".plain", "none")
                else:
                    self.assertEqual(tc.codec_of(data), codec)  # still in its codec
                    records = tc.read_records(path)
                self.assertEqual(len(records), 39)
                want = [p for i, p in enumerate(first) if i != 4]
                for i, (got, was) in enumerate(zip(records, want)):
                    if i == 3:
                        self.assertEqual(tc.decode_example(got)["label"][1], [7])
                    else:
                        self.assertEqual(got, was, "%s record %d" % (name, i))
                self.assertEqual(len(os.listdir(os.path.join(mnt, name))), 39)
        self.assertEqual(self.uploads_in_flight(), [])

    def test_arrayrecord_objects_refuse_edits_and_keep_their_bytes(self):
        # The bucket commit rewrites TFRecord streams only: an ArrayRecord
        # object's records must refuse edits (EROFS), not be committed as
        # a TFRecord stream under the object's name.
        local = os.path.join(self.tmp, "ar")
        r = run("reshard", "-q", self.saved, "--output", local, "--prefix", "a",
                "--format", "arrayrecord", "--group-size", "4", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        (name,) = [n for n in os.listdir(local) if not n.startswith(".")]
        shutil.copy(os.path.join(local, name), os.path.join(self.data, name))
        with open(os.path.join(self.data, name), "rb") as f:
            before = f.read()
        mnt, log = self.mount()
        rec = os.path.join(mnt, name, "003")
        self.assertTrue(os.path.isdir(rec), os.listdir(os.path.join(mnt, name))[:5])
        for script in ("echo 7 > '{r}/label'", "rm -r '{r}'"):
            out = subprocess.run(["bash", "-c", script.format(r=rec)], capture_output=True,
                                 text=True, timeout=60)
            self.assertNotEqual(out.returncode, 0, script)
            self.assertIn("Read-only file system", out.stderr, script)
        # The TFRecord object of the same mount still takes edits.
        self.sh("echo 7 > '{r}/005/label'".format(r=os.path.join(mnt, SHARD)))
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.data, name), "rb") as f:
            self.assertEqual(f.read(), before)
        self.check_object({5: ("label", [7])})

    def test_image_views_rm_and_mv_are_committed(self):
        # view=classes groups the records at mount, before the daemon forks
        # into the background: the commit's regrouping of the rewritten
        # object must still read it (it hung once: the readahead threads
        # started before the fork were gone).
        mnt, log = self.mount("-o", "view=classes", "-o", "class_feature=label")
        base = SHARD + "-%03d.jpg"
        label5 = label_of(self.original[5])
        to = str(label5[0] + 1)
        self.sh("mv '{m}/{a}/{f5}' '{m}/{b}/'; rm '{m}/{c}/{f9}'".format(
            m=mnt, a=label5[0], b=to, f5=base % 5, c=label_of(self.original[9])[0],
            f9=base % 9))
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_object({5: ("label", [int(to)]), 9: None})
        self.assertIn(base % 5, os.listdir(os.path.join(mnt, to)))
        self.assertEqual(self.unmount(mnt).returncode, 0)
        # The gallery view: rm of an image deletes its record.
        mnt, log = self.mount("-o", "view=gallery")
        folder = os.path.join(mnt, SHARD)
        # (Numbered afresh by the commit: record 9 is gone, 19 is the 20th.)
        image = [n for n in os.listdir(folder) if n.startswith(("019.", "019_", "019-"))]
        self.assertEqual(len(image), 1, sorted(os.listdir(folder))[:25])
        self.sh("rm '%s/%s'" % (folder, image[0]))
        r = self.unmount(mnt)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_object({5: ("label", [int(to)]), 9: None, 20: None})

    def test_pending_edits_survive_a_killed_daemon(self):
        mnt, log = self.mount()
        self.sh("echo 7 > '%s/005/label'; rm -r '%s/010'" % ((os.path.join(mnt, SHARD),) * 2))
        os.kill(daemon_pid(log), 9)
        subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
        self.mounts.remove(mnt)
        mnt, log = self.mount(name="again")
        self.assertEqual(len(os.listdir(os.path.join(mnt, SHARD))), RECORDS - 1)
        with open(os.path.join(mnt, SHARD, "005", "label")) as f:
            self.assertEqual(f.read().strip(), "7")
        r = self.unmount(mnt)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_object({5: ("label", [7]), 10: None})

    def test_a_commit_killed_at_each_step_is_all_old_or_all_new(self):
        self.kill_each_commit_step("s3://b/data/", "")

    def kill_each_commit_step(self, source, prefix):
        """SIGKILL the daemon at each step of a commit of 3 edits to `source`
        (mount names start with `prefix`): the object is all old or all new,
        and the next mount settles it (rolled back or finished), with no
        upload left and every edit once."""
        want = {5: ("label", [7]), 150: ("label", [3]), 10: None}
        for fault, said, new in (
                ("rewrite_object_before_final", "rolled back the interrupted rewrite", False),
                ("rewrite_object_after_final", "finished the interrupted rewrite", True),
                ("rewrite_after_forget", "edit folder(s) of a committed shard", True)):
            with self.subTest(fault=fault):
                shutil.copy(self.saved, self.object)  # the original object again
                mnt, log = self.mount(fault=fault, name=prefix + "killed-" + fault, source=source)
                rec = os.path.join(mnt, SHARD)
                self.sh("echo 7 > '{r}/005/label'; sed -i 's/.*/3/' '{r}/150/label'; "
                        "rm -r '{r}/010'".format(r=rec))
                r = run("commit", mnt, env=self.env)
                self.assertNotEqual(r.returncode, 0, r.stdout)  # the daemon died
                subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
                self.mounts.remove(mnt)
                # Never a half object: the old one or the new one, whole.
                if new:
                    self.check_object(want)
                else:
                    self.assertEqual(tc.read_records(self.object), self.original)
                    self.assertEqual(len(self.uploads_in_flight()), 1)
                # The next mount settles it before it lists the bucket.
                mnt, log2 = self.mount(name=prefix + "after-" + fault, source=source)
                with open(log2) as f:
                    self.assertIn(said, f.read())
                self.assertEqual(self.uploads_in_flight(), [])
                self.assertEqual(len(os.listdir(os.path.join(mnt, SHARD))), RECORDS - 1)
                r = self.unmount(mnt)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.check_object(want)  # every edit once, none lost or doubled
                self.assertEqual(self.uploads_in_flight(), [])

    def replace_object(self, theirs):
        """Another writer replaces the object (a new ETag) with `theirs`."""
        with open(self.object + ".new", "wb") as f:
            for p in theirs:
                f.write(tc.frame(p))
        os.replace(self.object + ".new", self.object)

    def assert_commit_refused(self, mnt, theirs, scheme):
        """A commit over another writer's object: refused naming the object
        and --rebase, their object untouched, no upload left, the edit
        still pending (status lists the object)."""
        r = run("commit", mnt, env=self.env)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("%s://b/data/%s was replaced since this mount listed it" % (scheme, SHARD),
                      r.stdout)
        self.assertIn("--rebase", r.stdout)
        self.assertEqual(tc.read_records(self.object), theirs)  # theirs, untouched
        self.assertEqual(self.uploads_in_flight(), [])
        r = run("status", mnt, env=self.env)
        self.assertIn("%s://b/data/%s" % (scheme, SHARD), r.stdout)

    def test_a_second_writer_is_never_overwritten(self):
        mnt, log = self.mount()
        self.sh("echo 7 > '%s/005/label'" % os.path.join(mnt, SHARD))
        # Another writer replaces the object (a new ETag) after the listing.
        theirs = self.original[:100]
        self.replace_object(theirs)
        # Still pending: status lists the edit, the log names the object.
        self.assert_commit_refused(mnt, theirs, "s3")
        with open(log) as f:
            self.assertIn("was replaced since this mount listed it", f.read())
        self.unmount(mnt)
        self.assertEqual(tc.read_records(self.object), theirs)

    def index_summary(self, cache):
        """`tfrecordfs index s3://b/data` with the index cache `cache`: its
        "N walked, G grown, V already valid" line."""
        env = dict(self.env, XDG_CACHE_HOME=os.path.join(self.tmp, cache))
        r = run("index", "s3://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return re.search(r"\d+ walked, \d+ grown, \d+ already valid", r.stdout + r.stderr).group(0)

    def check_through_mount(self, mnt, want):
        """Every record read through the mount (its index's offsets) is the
        object's record as tfrecord_check reads it from the server."""
        records = tc.read_records(self.object)
        folder = os.path.join(mnt, SHARD)
        names = sorted(os.listdir(folder))
        self.assertEqual(len(names), len(records))
        for i in (0, 1, len(records) // 2, len(records) - 1):
            with open(os.path.join(folder, names[i], "label")) as f:
                self.assertEqual(int(f.read().strip()), label_of(records[i])[0], names[i])
        self.check_object(want)

    def test_the_index_beside_the_object_follows_the_new_object(self):
        r = run("index", "--beside", "s3://b/data", env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        index = self.object + ".tfri"
        with open(index, "rb") as f:
            old_index = f.read()
        mnt, _ = self.mount()
        self.sh("rm -r '{r}/010'; echo 7 > '{r}/005/label'".format(r=os.path.join(mnt, SHARD)))
        with open(self.stats, "w") as f:
            f.write("{}")
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        want = {10: None, 5: ("label", [7])}
        self.check_object(want)
        # Rewritten from the commit's offsets (no walk: the object is not
        # read back), in one conditional PUT.
        self.assertIn("rewrote s3://b/data/%s.tfri for the new object" % SHARD, r.stdout)
        with open(index, "rb") as f:
            self.assertNotEqual(f.read(), old_index)
        # Another reader with no cache of its own takes it as valid: it
        # describes the new object (its ETag, size and records).
        self.assertEqual(self.index_summary("cache-other"), "0 walked, 0 grown, 1 already valid")
        self.unmount(mnt)
        mnt, log = self.mount(name="again")
        with open(log) as f:
            self.assertIn("1 from beside the shards", f.read())
        self.check_through_mount(mnt, want)

    def test_the_index_cache_follows_the_new_etag(self):
        mnt, log = self.mount()
        self.assertEqual(self.index_summary("cache"), "0 walked, 0 grown, 1 already valid")
        self.sh("rm -r '{r}/010'; echo 7 > '{r}/005/label'".format(r=os.path.join(mnt, SHARD)))
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        want = {10: None, 5: ("label", [7])}
        # The cache holds the new object's index, by its ETag: valid for
        # the next reader and mount; the old object's is gone from it.
        self.assertEqual(self.index_summary("cache"), "0 walked, 0 grown, 1 already valid")
        self.unmount(mnt)
        mnt, log = self.mount(name="again")
        with open(log) as f:
            self.assertIn("1 from the cache", f.read())
        self.check_through_mount(mnt, want)

    def test_a_crash_before_the_index_beside_is_rewritten_leaves_it_refused(self):
        r = run("index", "--beside", "s3://b/data", env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        index = self.object + ".tfri"
        before = os.stat(self.object)
        mnt, log = self.mount(fault="rewrite_object_after_final")
        # A label of the same encoded length (its lowest bit flipped): the
        # new object has the old one's size and record offsets.
        label = label_of(self.original[5])[0] ^ 1
        self.sh("echo %d > '%s/005/label'" % (label, os.path.join(mnt, SHARD)))
        r = run("commit", mnt, env=self.env)
        self.assertNotEqual(r.returncode, 0, r.stdout)  # the daemon died
        subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
        self.mounts.remove(mnt)
        want = {5: ("label", [label])}
        self.check_object(want)
        self.assertEqual(os.path.getsize(self.object), before.st_size)
        # Written within the second of the old object: only its ETag tells
        # the old index from a new one.
        os.utime(self.object, ns=(before.st_atime_ns, before.st_mtime_ns))
        self.assertTrue(os.path.exists(index))
        self.assertEqual(self.index_summary("cache-other"), "1 walked, 0 grown, 0 already valid")
        # The next mount finishes the rewrite and deletes the stale index.
        mnt, log = self.mount(name="again")
        with open(log) as f:
            text = f.read()
        self.assertIn("finished the interrupted rewrite", text)
        self.assertIn("deleted s3://b/data/%s.tfri: it described the object before" % SHARD, text)
        self.assertFalse(os.path.exists(index))
        self.check_through_mount(mnt, want)

    def tfds_dataset(self):
        """s3://b/tfds/: the object as a TFDS shard (train split, one
        shard) and the dataset_info.json TFDS writes beside it (indent 2,
        counts as proto3 JSON strings); returns its parsed content."""
        folder = os.path.join(self.root, "b", "tfds")
        os.makedirs(folder)
        self.object = os.path.join(folder, "mnist-train.tfrecord-00000-of-00001")
        shutil.copy(self.saved, self.object)
        info = {"name": "mnist", "description": "Digits \u2013 \"quoted\" / 28x28",
                "version": "3.0.1", "fileFormat": "tfrecord",
                "splits": [{"name": "test", "numBytes": "1234", "shardLengths": ["7", "8"]},
                           {"name": "train", "shardLengths": [str(RECORDS)],
                            "numBytes": str(sum(len(p) for p in self.original)),
                            "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"}],
                "supervisedKeys": {"tuple": {"items": [{"featureKey": "image_raw"},
                                                       {"featureKey": "label"}]}}}
        self.info_path = os.path.join(folder, "dataset_info.json")
        with open(self.info_path, "w") as f:
            f.write(json.dumps(info, indent=2) + "\n")
        return info

    def test_dataset_info_json_follows_a_commit_conditionally(self):
        info = self.tfds_dataset()
        mnt, _ = self.mount(source="s3://b/tfds/")
        shard = os.path.basename(self.object)
        self.sh("rm -r '{r}/010'; rm -r '{r}/011'; echo 123456 > '{r}/005/label'".format(
            r=os.path.join(mnt, shard)))
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("updated s3://b/tfds/dataset_info.json", r.stdout)
        records = self.check_object({10: None, 11: None, 5: ("label", [123456])})
        # The train split's counts are the new object's (tfds.load checks
        # shardLengths; numBytes sums the serialized examples); every other
        # field, and the text's layout, as they were.
        info["splits"][1]["shardLengths"] = [str(RECORDS - 2)]
        info["splits"][1]["numBytes"] = str(sum(len(p) for p in records))
        with open(self.info_path) as f:
            self.assertEqual(f.read(), json.dumps(info, indent=2) + "\n")
        self.unmount(mnt)

    def test_a_conflict_on_dataset_info_json_keeps_theirs_and_the_commit(self):
        self.tfds_dataset()
        with open(self.info_path) as f:
            before = f.read()
        mnt, log = self.mount(source="s3://b/tfds/", fault="bucket_tfds_info_raced")
        self.sh("rm -r '%s/010'" % os.path.join(mnt, os.path.basename(self.object)))
        r = run("commit", mnt, env=self.env)
        # The object's commit is done; the file another writer put between
        # the commit's read and its write is theirs, and the report says
        # the counts were not updated.
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_object({10: None})
        with open(self.info_path) as f:
            self.assertEqual(f.read(), before + " ")
        self.assertIn("s3://b/tfds/dataset_info.json NOT updated (another writer changed it "
                      "meanwhile; theirs is kept); the object's commit is done", r.stdout)
        with open(log) as f:
            self.assertIn("dataset_info.json NOT updated", f.read())
        self.assertEqual(self.unmount(mnt).returncode, 0)

    def test_a_crash_before_dataset_info_json_is_updated_is_finished_at_remount(self):
        info = self.tfds_dataset()
        mnt, _ = self.mount(source="s3://b/tfds/", fault="rewrite_object_after_final")
        self.sh("rm -r '{r}/010'; rm -r '{r}/011'".format(
            r=os.path.join(mnt, os.path.basename(self.object))))
        r = run("commit", mnt, env=self.env)
        self.assertNotEqual(r.returncode, 0, r.stdout)  # the daemon died
        subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
        self.mounts.remove(mnt)
        self.check_object({10: None, 11: None})  # the object is the new one
        with open(self.info_path) as f:
            self.assertEqual(json.load(f), info)  # its counts not yet
        mnt, log = self.mount(name="again", source="s3://b/tfds/")
        with open(log) as f:
            text = f.read()
        self.assertIn("finished the interrupted rewrite", text)
        self.assertIn("updated s3://b/tfds/dataset_info.json (the shard's length", text)
        info["splits"][1]["shardLengths"] = [str(RECORDS - 2)]  # numBytes left
        with open(self.info_path) as f:
            self.assertEqual(f.read(), json.dumps(info, indent=2) + "\n")
        self.assertEqual(self.unmount(mnt).returncode, 0)

    # ---- gs:// (Cloud Storage's XML API: no ranged server-side copy) ----

    def use_gs(self):
        """Reach the bucket as gs://b (HMAC keys, SigV4 with region auto)."""
        for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            self.env.pop(k)
        self.env.update(STORAGE_EMULATOR_HOST="127.0.0.1:%d" % self.server.port,
                        GS_ACCESS_KEY_ID=KEY, GS_SECRET_ACCESS_KEY=SECRET, NO_GCE_CHECK="true")

    def test_gs_edits_are_streamed_through_with_a_generation_precondition(self):
        self.use_gs()
        mnt, _ = self.mount(source="gs://b/data/")
        rec = os.path.join(mnt, SHARD)
        self.sh("echo 7 > '{r}/005/label'; rm -r '{r}/010'".format(r=rec))
        want = {5: ("label", [7]), 10: None}
        r = run("status", mnt, env=self.env)
        self.assertIn("gs://b/data/" + SHARD, r.stdout)
        with open(self.stats, "w") as f:
            f.write("{}")
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("rewrote gs://b/data/" + SHARD, r.stdout)
        self.check_object(want)
        # Streamed through once: every byte of the new object uploaded,
        # nothing copied server-side, the old one read once.
        c = self.counters()
        self.assertNotIn("UploadPartCopy", c)
        self.assertEqual(c["UploadPart"]["bytes_in"], os.path.getsize(self.object))
        self.assertEqual(c["CompleteMultipartUpload"]["requests"], 1)
        self.assertEqual(self.uploads_in_flight(), [])
        with open(os.path.join(rec, "005", "label")) as f:
            self.assertEqual(f.read().strip(), "7")
        r = self.unmount(mnt)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_object(want)

    def test_gs_a_second_writer_is_never_overwritten(self):
        self.use_gs()
        mnt, log = self.mount(source="gs://b/data/")
        self.sh("echo 7 > '%s/005/label'" % os.path.join(mnt, SHARD))
        theirs = self.original[:100]
        self.replace_object(theirs)
        self.assert_commit_refused(mnt, theirs, "gs")
        # --rebase re-applies the edit to their object by record key.
        r = run("commit", "--rebase", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = tc.read_records(self.object)
        self.assertEqual(len(got), 100)
        self.assertEqual(label_of(got[5]), [7])
        for i in range(100):
            if i != 5:
                self.assertEqual(got[i], theirs[i], "record %d" % i)
        self.unmount(mnt)

    def test_gs_a_commit_killed_at_each_step_is_all_old_or_all_new(self):
        self.use_gs()
        self.kill_each_commit_step("gs://b/data/", "gs-")

    def test_gs_a_gzip_object_is_rewritten_in_its_codec(self):
        self.use_gs()
        first = self.original[:40]
        path = os.path.join(self.data, "g.tfrecord.gz")
        gz = zlib.compressobj(wbits=31)
        with open(path, "wb") as f:
            f.write(gz.compress(b"".join(tc.frame(p) for p in first)) + gz.flush())
        mnt, _ = self.mount(source="gs://b/data/")
        self.sh("echo 7 > '{r}/03/label'; rm -r '{r}/04'".format(
            r=os.path.join(mnt, "g.tfrecord.gz")))
        with open(self.stats, "w") as f:
            f.write("{}")
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("rewrote gs://b/data/g.tfrecord.gz", r.stdout)
        with open(path, "rb") as f:
            self.assertEqual(tc.codec_of(f.read()), "gzip")  # still in its codec
        records = tc.read_records(path)
        want = [p for i, p in enumerate(first) if i != 4]
        self.assertEqual(len(records), len(want))
        for i, (got, was) in enumerate(zip(records, want)):
            if i == 3:
                self.assertEqual(tc.decode_example(got)["label"][1], [7])
            else:
                self.assertEqual(got, was, "record %d" % i)
        # Nothing copied server-side (the XML API has no ranged copy).
        c = self.counters()
        self.assertNotIn("UploadPartCopy", c)
        self.assertEqual(self.uploads_in_flight(), [])
        self.assertEqual(len(os.listdir(os.path.join(mnt, "g.tfrecord.gz"))), 39)
        with open(os.path.join(mnt, "g.tfrecord.gz", "03", "label")) as f:
            self.assertEqual(f.read().strip(), "7")
        self.assertEqual(self.unmount(mnt).returncode, 0)
        self.assertEqual(len(tc.read_records(path)), 39)

    def test_gs_the_index_beside_the_object_follows_the_new_object(self):
        self.use_gs()
        r = run("index", "--beside", "gs://b/data", env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        index = self.object + ".tfri"
        with open(index, "rb") as f:
            old_index = f.read()
        mnt, _ = self.mount(source="gs://b/data/")
        self.sh("rm -r '{r}/010'; echo 7 > '{r}/005/label'".format(r=os.path.join(mnt, SHARD)))
        r = run("commit", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        want = {10: None, 5: ("label", [7])}
        self.check_object(want)
        # Written with x-goog-if-generation-match on the old index's
        # generation; valid for a reader with no cache of its own.
        self.assertIn("rewrote gs://b/data/%s.tfri for the new object" % SHARD, r.stdout)
        with open(index, "rb") as f:
            self.assertNotEqual(f.read(), old_index)
        env = dict(self.env, XDG_CACHE_HOME=os.path.join(self.tmp, "cache-other"))
        r = run("index", "gs://b/data", env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("0 walked, 0 grown, 1 already valid", r.stdout + r.stderr)
        self.unmount(mnt)
        mnt, log = self.mount(name="again", source="gs://b/data/")
        with open(log) as f:
            self.assertIn("1 from beside the shards", f.read())
        self.check_through_mount(mnt, want)

    def test_rebase_reapplies_the_edits_by_record_key(self):
        mnt, log = self.mount()
        rec = os.path.join(mnt, SHARD)
        self.sh("echo 7 > '{r}/005/label'; sed -i 's/.*/4/' '{r}/007/label'; "
                "rm -r '{r}/010'".format(r=rec))
        # Another writer drops the first three records and record 7.
        theirs = [p for i, p in enumerate(self.original) if i >= 3 and i != 7]
        self.replace_object(theirs)
        r = run("commit", mnt, env=self.env)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertEqual(tc.read_records(self.object), theirs)
        r = run("commit", "--rebase", mnt, env=self.env)
        # Record 7 is not in their object: listed, its edit kept aside.
        self.assertIn("re-applied 1 edit(s) and 1 deletion(s) by record key", r.stdout)
        self.assertIn("not applied: record 7 (not in the new object)", r.stdout)
        self.assertIn("rebase-left", r.stdout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        records = tc.read_records(self.object)
        self.assertEqual(len(records), len(theirs) - 1)
        want = [p for p in theirs if p != self.original[10]]
        for got, was in zip(records, want):
            if was is self.original[5]:
                self.assertEqual(tc.decode_example(got)["label"][1], [7])
            else:
                self.assertEqual(got, was)
        # The mount shows the new object with the edit.
        self.assertEqual(len(os.listdir(rec)), len(theirs) - 1)
        with open(os.path.join(rec, "002", "label")) as f:
            self.assertEqual(f.read().strip(), "7")
        r = self.unmount(mnt)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(tc.read_records(self.object)), len(theirs) - 1)

    def leftovers_of_a_rebase(self):
        """Journals and temporary folder names a rebase leaves in the
        staging store while it runs."""
        found = []
        for folder, dirs, files in os.walk(self.tmp):
            found += [n for n in dirs + files if n.startswith((".rebase-", "rebase-journal-"))]
        return found

    def test_a_rebase_killed_at_each_step_is_undone_or_finished(self):
        theirs = [p for i, p in enumerate(self.original) if i >= 3 and i != 7]
        for fault, said in (("rebase_before_list", "rolled back the interrupted rebase"),
                            ("rebase_mid_renames", "rolled back the interrupted rebase"),
                            ("rebase_after_list", "finished the interrupted rebase")):
            with self.subTest(fault=fault):
                shutil.copy(self.saved, self.object)
                mnt, log = self.mount(fault=fault, name="rebase-" + fault)
                rec = os.path.join(mnt, SHARD)
                self.sh("echo 7 > '{r}/005/label'; sed -i 's/.*/4/' '{r}/007/label'; "
                        "rm -r '{r}/010'".format(r=rec))
                # Another writer drops the first three records and record 7.
                with open(self.object + ".new", "wb") as f:
                    for p in theirs:
                        f.write(tc.frame(p))
                os.replace(self.object + ".new", self.object)
                r = run("commit", "--rebase", mnt, env=self.env)
                self.assertNotEqual(r.returncode, 0, r.stdout)  # the daemon died
                subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
                self.mounts.remove(mnt)
                with open(log) as f:
                    self.assertIn("TFRECORDFS_FAULT=" + fault, f.read())
                self.assertNotEqual(self.leftovers_of_a_rebase(), [])
                self.assertEqual(tc.read_records(self.object), theirs)  # nothing written
                mnt, log2 = self.mount(name="after-rebase-" + fault)
                with open(log2) as f:
                    self.assertIn(said, f.read())
                self.assertEqual(self.leftovers_of_a_rebase(), [])
                # Undone: the edits are pending on the old object as before,
                # and a rebase places them; finished: they are on theirs.
                r = run("commit", "--rebase", mnt, env=self.env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                if "rolled back" in said:
                    self.assertIn("re-applied 1 edit(s) and 1 deletion(s) by record key", r.stdout)
                records = tc.read_records(self.object)
                want = [p for p in theirs if p != self.original[10]]
                self.assertEqual(len(records), len(want))
                for got, was in zip(records, want):
                    if was is self.original[5]:
                        self.assertEqual(tc.decode_example(got)["label"][1], [7])
                    else:
                        self.assertEqual(got, was)
                self.assertEqual(self.unmount(mnt).returncode, 0)
                self.assertEqual(len(tc.read_records(self.object)), len(want))

    def test_rebase_after_a_remount_that_lists_the_new_object(self):
        mnt, log = self.mount()
        self.sh("echo 987654 > '%s/005/label'" % os.path.join(mnt, SHARD))
        os.kill(daemon_pid(log), 9)  # pending edits, then a crash
        subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
        self.mounts.remove(mnt)
        theirs = self.original[1:]  # another writer drops record 0
        self.replace_object(theirs)
        mnt, log = self.mount(name="again")
        with open(log) as f:
            self.assertIn("replaced in the bucket since its records were edited", f.read())
        with open(os.path.join(mnt, SHARD, "004", "label")) as f:  # their record 5, unedited
            self.assertEqual(f.read().strip(), str(label_of(self.original[5])[0]))
        r = run("commit", "--rebase", mnt, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("re-applied 1 edit(s)", r.stdout)
        with open(os.path.join(mnt, SHARD, "004", "label")) as f:
            self.assertEqual(f.read().strip(), "987654")
        self.assertEqual(self.unmount(mnt).returncode, 0)
        records = tc.read_records(self.object)
        self.assertEqual(len(records), len(theirs))
        self.assertEqual(label_of(records[4]), [987654])
        self.assertEqual(records[:4] + records[5:], theirs[:4] + theirs[5:])

    def test_two_mounts_committing_at_once_exactly_one_wins(self):
        a, _ = self.mount("-o", "staging_dir=" + os.path.join(self.tmp, "sa"), name="a")
        b, _ = self.mount("-o", "staging_dir=" + os.path.join(self.tmp, "sb"), name="b")
        self.sh("echo 1 > '%s/005/label'" % os.path.join(a, SHARD))
        self.sh("echo 2 > '%s/005/label'" % os.path.join(b, SHARD))
        results = {}

        def commit(mnt):
            results[mnt] = run("commit", mnt, env=self.env)

        threads = [threading.Thread(target=commit, args=(m,)) for m in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        won = [m for m in (a, b) if results[m].returncode == 0]
        self.assertEqual(len(won), 1, {m: r.stdout for m, r in results.items()})
        lost = b if won == [a] else a
        self.assertIn("was replaced since this mount listed it", results[lost].stdout)
        self.check_object({5: ("label", [1 if won == [a] else 2])})
        self.assertEqual(self.uploads_in_flight(), [])


if __name__ == "__main__":
    unittest.main()
