#!/usr/bin/python3
"""object_server.py's S3 operations for rewriting an object in place,
driven by botocore (Debian's python3-botocore: the aws CLI's own client, so
its request shapes, not ours): UploadPartCopy with x-amz-copy-source-range
(copied server-side, validated as S3 documents: ranges inside the source,
5 MiB parts but the last), conditional PutObject and
CompleteMultipartUpload (If-Match / If-None-Match: * -> 412
PreconditionFailed with S3's XML error), ListMultipartUploads, and the
--stats counters of bytes in, out and copied per operation. Needs no
binary of the project; skips without botocore.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "object_server.py")
KEY, SECRET = "AKIDTFRECORDFSTEST", "c2VjcmV0IHRoYXQgaXMgbm90IGxvZ2dlZA"
MIB = 1 << 20

try:
    import botocore.session
    from botocore.exceptions import ClientError
except ImportError:
    botocore = None


@unittest.skipIf(botocore is None, "no python3-botocore")
class ServerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="server_test.")
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(os.path.join(self.root, "b", "ds"))
        self.stats_path = os.path.join(self.tmp, "stats.json")
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, "--root", self.root, "--access-key", KEY, "--secret-key",
             SECRET, "--botocore", "--stats", self.stats_path],
            stdout=subprocess.PIPE, text=True)
        port = int(self.proc.stdout.readline())
        self.s3 = botocore.session.get_session().create_client(
            "s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id=KEY,
            aws_secret_access_key=SECRET, region_name="us-east-1")
        # 12 MiB of distinct bytes: every range is recognisable.
        self.old = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(12 * MIB // 32))
        self.s3.put_object(Bucket="b", Key="ds/obj", Body=self.old)

    def tearDown(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stats(self):
        with open(self.stats_path) as f:
            return json.load(f)

    def headers(self, operation, **headers):
        """Adds `headers` to the next requests of `operation` (this botocore
        predates the IfMatch parameters; the header is S3's own)."""
        def add(request, **_):
            for k, v in headers.items():
                request.headers[k] = v
        self.s3.meta.events.register_first("before-sign.s3.%s" % operation, add)
        self.last_hook = add
        return add

    def error(self, call):
        with self.assertRaises(ClientError) as e:
            call()
        return e.exception.response

    def test_upload_part_copy_ranges_are_copied_server_side(self):
        etag = self.s3.head_object(Bucket="b", Key="ds/obj")["ETag"]
        up = self.s3.create_multipart_upload(Bucket="b", Key="ds/obj")["UploadId"]
        p1 = self.s3.upload_part_copy(Bucket="b", Key="ds/obj", UploadId=up, PartNumber=1,
                                      CopySource="b/ds/obj", CopySourceRange="bytes=0-%d"
                                      % (6 * MIB - 1), CopySourceIfMatch=etag)
        self.assertEqual(p1["CopyPartResult"]["ETag"],
                         '"%s"' % hashlib.md5(self.old[:6 * MIB]).hexdigest())
        new = b"new label"
        p2 = self.s3.upload_part(Bucket="b", Key="ds/obj", UploadId=up, PartNumber=2,
                                 Body=new)
        p3 = self.s3.upload_part_copy(Bucket="b", Key="ds/obj", UploadId=up, PartNumber=3,
                                      CopySource={"Bucket": "b", "Key": "ds/obj"},
                                      CopySourceRange="bytes=%d-%d" % (6 * MIB, len(self.old) - 1))
        # Part 2 is under 5 MiB and not the last: S3 refuses the completion.
        parts = [{"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]},
                 {"PartNumber": 2, "ETag": p2["ETag"]},
                 {"PartNumber": 3, "ETag": p3["CopyPartResult"]["ETag"]}]
        r = self.error(lambda: self.s3.complete_multipart_upload(
            Bucket="b", Key="ds/obj", UploadId=up, MultipartUpload={"Parts": parts}))
        self.assertEqual(r["Error"]["Code"], "EntityTooSmall")
        # Small parts last are fine: copy, then the small upload.
        up2 = self.s3.create_multipart_upload(Bucket="b", Key="ds/obj")["UploadId"]
        q1 = self.s3.upload_part_copy(Bucket="b", Key="ds/obj", UploadId=up2, PartNumber=1,
                                      CopySource="b/ds/obj",
                                      CopySourceRange="bytes=0-%d" % (len(self.old) - 11))
        q2 = self.s3.upload_part(Bucket="b", Key="ds/obj", UploadId=up2, PartNumber=2,
                                 Body=new)
        self.headers("CompleteMultipartUpload", **{"If-Match": etag})
        self.s3.complete_multipart_upload(
            Bucket="b", Key="ds/obj", UploadId=up2, MultipartUpload={"Parts": [
                {"PartNumber": 1, "ETag": q1["CopyPartResult"]["ETag"]},
                {"PartNumber": 2, "ETag": q2["ETag"]}]})
        got = self.s3.get_object(Bucket="b", Key="ds/obj")["Body"].read()
        self.assertEqual(got, self.old[:-10] + new)
        s = self.stats()
        # What crossed the network: the two small parts; the copies did not.
        self.assertEqual(s["UploadPart"]["bytes_in"], 2 * len(new))
        self.assertEqual(s["UploadPartCopy"]["requests"], 3)
        self.assertEqual(s["UploadPartCopy"]["bytes_in"], 0)
        self.assertEqual(s["UploadPartCopy"]["bytes_copied"], 2 * len(self.old) - 10)
        self.assertLess(s["UploadPartCopy"]["bytes_out"], 3000)  # three small XML answers
        self.assertEqual(s["GetObject"]["bytes_out"], len(got))
        # The first upload is still listed until aborted.
        ups = self.s3.list_multipart_uploads(Bucket="b", Prefix="ds/")["Uploads"]
        self.assertEqual([(u["Key"], u["UploadId"]) for u in ups], [("ds/obj", up)])
        self.s3.abort_multipart_upload(Bucket="b", Key="ds/obj", UploadId=up)
        self.assertNotIn("Uploads", self.s3.list_multipart_uploads(Bucket="b", Prefix="ds/"))

    def test_copy_source_ranges_are_validated(self):
        up = self.s3.create_multipart_upload(Bucket="b", Key="ds/obj")["UploadId"]
        for rng, code in (("bytes=0-%d" % len(self.old), "InvalidArgument"),
                          ("bytes=10-9", "InvalidArgument"),
                          ("bytes=5-", "InvalidArgument"),
                          ("0-9", "InvalidArgument")):
            with self.subTest(rng=rng):
                r = self.error(lambda: self.s3.upload_part_copy(
                    Bucket="b", Key="ds/obj", UploadId=up, PartNumber=1, CopySource="b/ds/obj",
                    CopySourceRange=rng))
                self.assertEqual(r["Error"]["Code"], code)
        r = self.error(lambda: self.s3.upload_part_copy(
            Bucket="b", Key="ds/obj", UploadId=up, PartNumber=1, CopySource="b/ds/obj",
            CopySourceRange="bytes=0-9", CopySourceIfMatch='"not-it"'))
        self.assertEqual(r["Error"]["Code"], "PreconditionFailed")
        r = self.error(lambda: self.s3.upload_part_copy(
            Bucket="b", Key="ds/obj", UploadId=up, PartNumber=1, CopySource="b/ds/none"))
        self.assertEqual(r["Error"]["Code"], "NoSuchKey")
        # As S3 documents: a range only from a source larger than 5 MB.
        self.s3.put_object(Bucket="b", Key="ds/small", Body=b"x" * 100)
        r = self.error(lambda: self.s3.upload_part_copy(
            Bucket="b", Key="ds/obj", UploadId=up, PartNumber=1, CopySource="b/ds/small",
            CopySourceRange="bytes=0-9"))
        self.assertEqual(r["Error"]["Code"], "InvalidRequest")
        self.assertEqual(self.stats()["UploadPartCopy"]["bytes_copied"], 0)

    def test_conditional_put_and_complete_never_overwrite_a_changed_object(self):
        listed = self.s3.head_object(Bucket="b", Key="ds/obj")["ETag"]
        # A second writer replaces the object after it was listed.
        self.s3.put_object(Bucket="b", Key="ds/obj", Body=b"second writer")
        self.headers("PutObject", **{"If-Match": listed})
        r = self.error(lambda: self.s3.put_object(Bucket="b", Key="ds/obj", Body=b"mine"))
        self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 412)
        self.assertEqual(r["Error"]["Code"], "PreconditionFailed")
        self.assertEqual(r["Error"].get("Condition"), "If-Match")
        up = self.s3.create_multipart_upload(Bucket="b", Key="ds/obj")["UploadId"]
        p = self.s3.upload_part(Bucket="b", Key="ds/obj", UploadId=up, PartNumber=1, Body=b"m")
        self.headers("CompleteMultipartUpload", **{"If-Match": listed})
        r = self.error(lambda: self.s3.complete_multipart_upload(
            Bucket="b", Key="ds/obj", UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p["ETag"]}]}))
        self.assertEqual(r["Error"]["Code"], "PreconditionFailed")
        self.assertEqual(self.s3.get_object(Bucket="b", Key="ds/obj")["Body"].read(),
                         b"second writer")
        # The upload is left for the client to abort, as S3 leaves it.
        self.assertEqual(len(self.s3.list_multipart_uploads(Bucket="b")["Uploads"]), 1)
        # If-Match of a key that is not there: 404 NoSuchKey.
        r = self.error(lambda: self.s3.put_object(Bucket="b", Key="ds/none", Body=b"x"))
        self.assertEqual(r["Error"]["Code"], "NoSuchKey")
        self.assertFalse(os.path.exists(os.path.join(self.root, "b", "ds", "none")))

    def test_if_match_of_the_current_etag_writes(self):
        current = self.s3.head_object(Bucket="b", Key="ds/obj")["ETag"]
        self.headers("PutObject", **{"If-Match": current})
        self.s3.put_object(Bucket="b", Key="ds/obj", Body=b"edited")
        self.assertEqual(self.s3.get_object(Bucket="b", Key="ds/obj")["Body"].read(), b"edited")
        self.assertEqual(self.stats()["PutObject"]["requests"], 2)

    def test_generation_preconditions_as_cloud_storage(self):
        """x-goog-if-generation-match (Cloud Storage's XML API): 0 for no
        object, else the generation the object was read at."""
        head = self.s3.head_object(Bucket="b", Key="ds/obj")
        generation = head["ResponseMetadata"]["HTTPHeaders"]["x-goog-generation"]
        self.headers("PutObject", **{"x-goog-if-generation-match": "0"})
        r = self.error(lambda: self.s3.put_object(Bucket="b", Key="ds/obj", Body=b"x"))
        self.assertEqual(r["Error"]["Code"], "PreconditionFailed")
        self.s3.put_object(Bucket="b", Key="ds/fresh", Body=b"new object")  # 0 and absent: written
        s3 = self.s3
        s3.meta.events.unregister("before-sign.s3.PutObject", self.last_hook)
        self.headers("PutObject", **{"x-goog-if-generation-match": generation})
        put = s3.put_object(Bucket="b", Key="ds/obj", Body=b"edited")
        self.assertNotEqual(put["ResponseMetadata"]["HTTPHeaders"]["x-goog-generation"],
                            generation)
        # The same generation again: the object is no longer that one.
        r = self.error(lambda: s3.put_object(Bucket="b", Key="ds/obj", Body=b"lost update"))
        self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 412)
        self.assertEqual(s3.get_object(Bucket="b", Key="ds/obj")["Body"].read(), b"edited")
        self.assertEqual(s3.get_object(Bucket="b", Key="ds/fresh")["Body"].read(), b"new object")

    def test_if_none_match_star_refuses_an_existing_key(self):
        self.headers("PutObject", **{"If-None-Match": "*"})
        r = self.error(lambda: self.s3.put_object(Bucket="b", Key="ds/obj", Body=b"x"))
        self.assertEqual(r["Error"]["Code"], "PreconditionFailed")
        self.assertEqual(r["Error"].get("Condition"), "If-None-Match")
        self.s3.put_object(Bucket="b", Key="ds/new", Body=b"x")
        self.assertEqual(self.s3.get_object(Bucket="b", Key="ds/obj")["Body"].read(), self.old)


if __name__ == "__main__":
    unittest.main()
