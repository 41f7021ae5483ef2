#!/usr/bin/python3
"""A small HTTP and S3-compatible object server for the tests, on 127.0.0.1.

Serves the files under --root: GET and HEAD of /PATH (a plain web server:
ETag, Last-Modified, single byte ranges with 206 and 416, If-Match with 412),
and, for a first path component BUCKET, S3's ListObjectsV2
(GET /BUCKET/?list-type=2&prefix=P&continuation-token=T, at most --page-size
keys a page, so that paging is exercised). PUT /BUCKET/KEY stores the body
under --root (at most --max-put bytes, a Content-Length required; 412 with
"If-None-Match: *" when the key exists), unless --read-only (403
AccessDenied). Multipart uploads: POST ?uploads (CreateMultipartUpload), PUT
?partNumber=N&uploadId=ID (UploadPart, at most --max-put bytes, ETag the
part's MD5), POST ?uploadId=ID (CompleteMultipartUpload: parts joined, then
renamed to the key, answering the ETag its HEAD then gives, as S3 does; 412 with "If-None-Match: *"
when the key exists), DELETE ?uploadId=ID
(AbortMultipartUpload), DELETE /BUCKET/KEY (DeleteObject, 204 either way), GET /BUCKET?uploads&prefix=P (ListMultipartUploads,
one page); uploads in flight are folders of ROOT/.uploads.

UploadPartCopy (S3's request shape, as botocore sends it): PUT
?partNumber=N&uploadId=ID with "x-amz-copy-source: BUCKET/KEY" (URL-encoded,
a leading '/' and a "?versionId=" tail taken) and optionally
"x-amz-copy-source-range: bytes=FIRST-LAST" (inclusive, zero-based, inside
the source: 400 InvalidArgument otherwise, and, as S3 documents, only from
a source larger than --min-part-size) and "x-amz-copy-source-if-match";
the part is copied here, server-side, and answered with
<CopyPartResult><ETag>. CompleteMultipartUpload refuses a part other than
the last smaller than --min-part-size (5 MiB, S3's) with 400 EntityTooSmall.
Conditional writes: PutObject and CompleteMultipartUpload take
"If-None-Match: *" (412 when the key exists) and "If-Match: ETAG" (412
PreconditionFailed when the key's ETag, as listed, differs; 404 NoSuchKey
when there is no key), S3's error body with <Condition>, and Cloud
Storage's "x-goog-if-generation-match: G" (G 0: no object may be there;
else its generation, the x-goog-generation every GET, HEAD and PUT
answers, must be G; 412 PreconditionFailed); the check and the rename are
one step under a lock, as the stores' are atomic.

Counters: with --stats FILE, a JSON object {KIND: {"requests": N,
"bytes_in": request body bytes, "bytes_out": response body bytes,
"bytes_copied": bytes copied server-side}} rewritten after every request,
KIND the S3 operation (GetObject, HeadObject, ListObjectsV2, PutObject,
CreateMultipartUpload, UploadPart, UploadPartCopy, CompleteMultipartUpload,
AbortMultipartUpload, DeleteObject, ListMultipartUploads, Metadata): what crossed the
network and what did not.

Authentication: with --access-key and --secret-key every request must carry
a valid AWS SigV4 Authorization header, checked by the independent
implementation below (hmac/hashlib) and, with --botocore, by botocore's
(Debian's python3-botocore, what the aws CLI signs with) as well, else 403
SignatureDoesNotMatch; a PUT's signed x-amz-content-sha256 must be its
body's. With --bearer-token-file FILE every request must carry
"Authorization: Bearer T" with T the file's current content (re-read per
request, so a test can rotate it), else 401 (Cloud Storage's OAuth tokens).
With --metadata-token-file FILE it is also a GCE metadata server: GET
/computeMetadata/v1/instance/service-accounts/default/token with
"Metadata-Flavor: Google" answers {"access_token": <FILE's content>,
"expires_in": --metadata-expires-in, "token_type": "Bearer"}.

Failures: --fail-first N answers the first N GETs of an object with 503,
--drop-first N closes the connection of the first N GETs of an object
without an answer (the client must retry either); --latency-ms N delays
every GET and PUT by N ms. ETags change when a file is replaced (inode,
mtime, size).

Hostile behaviours (tests/objstore/hostile_test.py): --list-repeat-token
answers every listing page as truncated with the same continuation token;
--list-endless answers pages of 1000 made-up 100-byte keys with a new token
each time, forever; --extra-keys-file FILE (a JSON list of keys) adds those
keys to every listing, whatever the prefix asked for (sizes 1, never
served); --trickle SUBSTR answers ranged GETs of paths containing SUBSTR
with 206 and its headers, then 2 bytes a second for as long as the client
waits; --from-zero SUBSTR answers every ranged GET of those paths with the
object's first bytes, saying so in Content-Range ("bytes 0-N/SIZE").

The server prints its port on stdout once it listens (the test blocks on
reading it: no polling), logs every request to --log ("METHOD PATH STATUS
range=bytes=A-B|- if-match=yes|no auth=sigv4|bearer|none"), and stops after --max-requests requests (or when
killed).
"""
import argparse
import datetime
import email.utils
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

ARGS = None
COUNT_LOCK = threading.Lock()
COUNT = [0]
FAILED = {}
DROPPED = {}
# Multipart uploads in flight, one folder each (parts, key), under --root
# but never listed (not a bucket).
UPLOADS = ".uploads"
METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
# Conditional writes check and rename under this lock (S3's are atomic).
WRITE_LOCK = threading.Lock()
STATS_LOCK = threading.Lock()
STATS = {}


def etag_of(st):
    return '"%x-%x-%x"' % (st.st_ino, st.st_mtime_ns, st.st_size)


def generation_of(st):
    """Cloud Storage's generation of the object (x-goog-generation): a new
    number whenever the object is written."""
    return str(st.st_mtime_ns)


def sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def uri_encode(s, encode_slash=True):
    safe = "-_.~" + ("" if encode_slash else "/")
    return urllib.parse.quote(s, safe=safe)


def botocore_signature(handler, signed, amz_date, region, service):
    """The signature botocore's S3SigV4Auth computes for the request as
    received, over the same signed headers at the same time."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    headers = {h: handler.headers.get(h, "") for h in signed}
    request = AWSRequest(method=handler.command,
                         url="http://%s%s" % (handler.headers.get("Host", ""), handler.path),
                         headers=headers)
    request.context["timestamp"] = amz_date
    auth = S3SigV4Auth(Credentials(ARGS.access_key, ARGS.secret_key), service, region)
    return auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses connections

    def log_message(self, fmt, *args):
        if ARGS.log:
            auth = self.headers.get("Authorization", "")
            how = ("sigv4" if auth.startswith("AWS4-HMAC-SHA256 ") else
                   "bearer" if auth.startswith("Bearer ") else "none" if not auth else "other")
            # From send_response: '"%s" %s %s' % (request line, status, size).
            status = args[1] if fmt.startswith('"%s" %s') and len(args) > 1 else "-"
            # The range and whether the request was pinned (If-Match) go
            # before auth=, the last field.
            with open(ARGS.log, "a") as f:
                f.write("%s %s %s range=%s if-match=%s auth=%s\n" % (
                    self.command, self.path, status, self.headers.get("Range", "-"),
                    "yes" if self.headers.get("If-Match") else "no", how))

    def kind(self):
        """The S3 operation this request is (the counters' key)."""
        q = urllib.parse.parse_qs(self.path.partition("?")[2], keep_blank_values=True)
        if self.command == "PUT":
            if "uploadId" in q:
                return "UploadPartCopy" if "x-amz-copy-source" in self.headers else "UploadPart"
            return "PutObject"
        if self.command == "POST":
            return "CreateMultipartUpload" if "uploads" in q else "CompleteMultipartUpload"
        if self.command == "DELETE":
            return "AbortMultipartUpload" if "uploadId" in q else "DeleteObject"
        if self.command == "HEAD":
            return "HeadObject"
        if self.path == METADATA_TOKEN_PATH:
            return "Metadata"
        if "list-type" in q:
            return "ListObjectsV2"
        if "uploads" in q:
            return "ListMultipartUploads"
        return "GetObject"

    def record(self, bytes_out):
        """Adds this request to --stats: its body in, `bytes_out` out and
        what it copied server-side."""
        if not ARGS.stats:
            return
        with STATS_LOCK:
            s = STATS.setdefault(self.kind(), {"requests": 0, "bytes_in": 0, "bytes_out": 0,
                                                "bytes_copied": 0})
            s["requests"] += 1
            s["bytes_in"] += getattr(self, "bytes_in", 0)
            s["bytes_out"] += bytes_out
            s["bytes_copied"] += getattr(self, "bytes_copied", 0)
            self.bytes_in = self.bytes_copied = 0
            tmp = ARGS.stats + ".tmp"
            with open(tmp, "w") as f:
                json.dump(STATS, f, sort_keys=True)
            os.replace(tmp, ARGS.stats)

    def reply(self, status, body=b"", headers=None):
        self.record(len(body) if self.command != "HEAD" else 0)
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def reply_file(self, status, f, first, count, headers):
        """A reply whose body is bytes [first, first + count) of the open
        file `f`, sent with sendfile(2): the kernel moves the page-cache
        pages to the socket, so the server's own CPU time (which the client
        shares on the test machine; a real store's runs elsewhere) is not a
        copy of every byte through Python."""
        self.record(count if self.command != "HEAD" else 0)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(count))
        self.end_headers()
        if self.command != "HEAD" and count > 0:
            self.wfile.flush()
            self.connection.sendfile(f, first, count)

    def error_xml(self, status, code, message, extra=""):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code>"
                "<Message>%s</Message>%s</Error>" % (code, escape(message), extra)).encode()
        self.reply(status, body, {"Content-Type": "application/xml"})

    def check_signature(self, body=None):
        if ARGS.bearer_token_file:
            with open(ARGS.bearer_token_file) as f:
                want = "Bearer " + f.read().strip()
            if not hmac.compare_digest(self.headers.get("Authorization", ""), want):
                self.error_xml(401, "AuthenticationRequired", "a valid OAuth token is required")
                return False
            return True
        if not ARGS.access_key:
            return True
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            self.error_xml(403, "AccessDenied", "anonymous request")
            return False
        fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        akid, date, region, service, _ = fields["Credential"].split("/")
        if akid != ARGS.access_key:
            self.error_xml(403, "InvalidAccessKeyId", "unknown key")
            return False
        signed = fields["SignedHeaders"].split(";")
        raw_path, _, query = self.path.partition("?")
        params = sorted(tuple(p.split("=", 1)) if "=" in p else (p, "")
                        for p in query.split("&") if p)
        canon_query = "&".join("%s=%s" % kv for kv in params)
        canon_headers = "".join("%s:%s\n" % (h, " ".join(self.headers.get(h, "").split()))
                                for h in signed)
        canonical = "\n".join([self.command, raw_path, canon_query, canon_headers,
                               ";".join(signed),
                               self.headers.get("x-amz-content-sha256", "")])
        amz_date = self.headers.get("x-amz-date", "")
        scope = "/".join([date, region, service, "aws4_request"])
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        k = sign(("AWS4" + ARGS.secret_key).encode(), date)
        k = sign(sign(sign(k, region), service), "aws4_request")
        want = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, fields.get("Signature", "")):
            self.error_xml(403, "SignatureDoesNotMatch", "the signature does not match")
            return False
        if ARGS.botocore and not hmac.compare_digest(
                botocore_signature(self, signed, amz_date, region, service), want):
            self.error_xml(403, "SignatureDoesNotMatch", "botocore signs this otherwise")
            return False
        if body is not None and self.headers.get("x-amz-content-sha256") != \
                hashlib.sha256(body).hexdigest():
            self.error_xml(400, "XAmzContentSHA256Mismatch", "the body is not what was signed")
            return False
        return True

    def read_body(self):
        """The request's body (None after replying with an error)."""
        length = self.headers.get("Content-Length")
        if length is None:
            self.error_xml(411, "MissingContentLength", "Content-Length required")
            return None
        if int(length) > ARGS.max_put:
            self.close_connection = True  # the body is not read
            self.error_xml(413, "EntityTooLarge", "at most %d bytes" % ARGS.max_put)
            return None
        self.bytes_in = int(length)
        return self.rfile.read(int(length))

    def precondition(self, local):
        """False after answering a write's If-None-Match / If-Match that
        does not hold for the key at `local` (call under WRITE_LOCK)."""
        if self.headers.get("If-None-Match") == "*" and os.path.exists(local):
            self.error_xml(412, "PreconditionFailed",
                           "At least one of the pre-conditions you specified did not hold",
                           "<Condition>If-None-Match</Condition>")
            return False
        generation = self.headers.get("x-goog-if-generation-match")
        if generation is not None:
            now = generation_of(os.stat(local)) if os.path.isfile(local) else "0"
            if generation.strip() != now:
                self.error_xml(412, "PreconditionFailed",
                               "At least one of the pre-conditions you specified did not hold.",
                               "<Details>x-goog-if-generation-match: %s</Details>"
                               % escape(generation))
                return False
        want = self.headers.get("If-Match")
        if want is None:
            return True
        if not os.path.isfile(local):
            self.error_xml(404, "NoSuchKey", "The specified key does not exist.")
            return False
        if want.strip() != etag_of(os.stat(local)):
            self.error_xml(412, "PreconditionFailed",
                           "At least one of the pre-conditions you specified did not hold",
                           "<Condition>If-Match</Condition>")
            return False
        return True

    def copy_part(self, d, number):
        """UploadPartCopy into upload folder `d` as part `number`."""
        source = urllib.parse.unquote(self.headers["x-amz-copy-source"].split("?versionId=")[0])
        source = source.lstrip("/")
        bucket = source.split("/", 1)[0]
        local = os.path.normpath(os.path.join(ARGS.root, source))
        if bucket == UPLOADS or not local.startswith(os.path.join(ARGS.root, bucket) + os.sep) \
                or not os.path.isfile(local):
            return self.error_xml(404, "NoSuchKey", "The specified key does not exist.")
        with open(local, "rb") as f:
            st = os.fstat(f.fileno())
            want = self.headers.get("x-amz-copy-source-if-match")
            if want is not None and want.strip() != etag_of(st):
                return self.error_xml(412, "PreconditionFailed",
                                      "At least one of the pre-conditions you specified did "
                                      "not hold", "<Condition>x-amz-copy-source-If-Match"
                                      "</Condition>")
            first, last = 0, st.st_size - 1
            rng = self.headers.get("x-amz-copy-source-range")
            if rng is not None:
                m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng.strip())
                if m is None:
                    return self.error_xml(400, "InvalidArgument",
                                          "The x-amz-copy-source-range value must be of the "
                                          "form bytes=first-last where first and last are the "
                                          "zero-based offsets of the first and last bytes to "
                                          "copy")
                first, last = int(m.group(1)), int(m.group(2))
                if first > last or last >= st.st_size:
                    return self.error_xml(400, "InvalidArgument",
                                          "Range specified is not valid for source object of "
                                          "size: %d" % st.st_size)
                if st.st_size <= ARGS.min_part_size:
                    return self.error_xml(400, "InvalidRequest",
                                          "The specified copy source is not supported as a "
                                          "byte-range copy source (at most %d bytes)"
                                          % ARGS.min_part_size)
            f.seek(first)
            md5 = hashlib.md5()
            with open(os.path.join(d, "%05d" % number), "wb") as out:
                left = last - first + 1
                while left > 0:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    md5.update(chunk)
                    out.write(chunk)
                    left -= len(chunk)
            self.bytes_copied = last - first + 1
        etag = '"%s"' % md5.hexdigest()
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        self.reply(200, ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><CopyPartResult>"
                         "<LastModified>%s</LastModified><ETag>%s</ETag></CopyPartResult>"
                         % (when, escape(etag))).encode(),
                   {"Content-Type": "application/xml"})

    def object_path(self):
        """(key's local path, query dict), or None after replying 404."""
        raw, _, query = self.path.partition("?")
        path = urllib.parse.unquote(raw).lstrip("/")
        bucket = path.split("/", 1)[0]
        local = os.path.normpath(os.path.join(ARGS.root, path))
        if not local.startswith(os.path.join(ARGS.root, bucket) + os.sep) or \
                not os.path.isdir(os.path.join(ARGS.root, bucket)) or bucket == UPLOADS:
            self.error_xml(404, "NoSuchBucket", "no such bucket: " + bucket)
            return None
        return local, urllib.parse.parse_qs(query, keep_blank_values=True)

    def upload_dir(self, q):
        """The folder of the multipart upload named by ?uploadId (None after
        replying 404 NoSuchUpload)."""
        upload_id = q.get("uploadId", [""])[0]
        d = os.path.join(ARGS.root, UPLOADS, upload_id)
        if not upload_id.isalnum() or not os.path.isdir(d):
            self.error_xml(404, "NoSuchUpload", "no such upload: " + upload_id)
            return None
        return d

    def write_request(self):
        """The body, local path and query of a signed write (PUT, POST) to a
        writable bucket; None once an error has been answered."""
        body = self.read_body()
        if body is None or not self.check_signature(body):
            return None
        where = self.object_path()
        if where is None:
            return None
        if ARGS.read_only:
            self.error_xml(403, "AccessDenied", "this bucket is read-only")
            return None
        local, q = where
        return body, local, q

    def do_PUT(self):
        self.count()
        if ARGS.latency_ms:
            time.sleep(ARGS.latency_ms / 1000)
        write = self.write_request()
        if write is None:
            return
        body, local, q = write
        if "uploadId" in q:  # UploadPart
            d = self.upload_dir(q)
            if d is None:
                return
            number = int(q.get("partNumber", ["0"])[0])
            if not 1 <= number <= 10000:
                return self.error_xml(400, "InvalidArgument", "partNumber 1 to 10000")
            if "x-amz-copy-source" in self.headers:
                return self.copy_part(d, number)
            with open(os.path.join(d, "%05d" % number), "wb") as f:
                f.write(body)
            return self.reply(200, b"", {"ETag": '"%s"' % hashlib.md5(body).hexdigest()})
        if "x-amz-copy-source" in self.headers:
            return self.error_xml(501, "NotImplemented", "CopyObject is not served")
        os.makedirs(os.path.dirname(local), exist_ok=True)
        tmp = os.path.join(ARGS.root, UPLOADS, "put-%d" % threading.get_ident())
        with open(tmp, "wb") as f:
            f.write(body)
        with WRITE_LOCK:
            if not self.precondition(local):
                os.unlink(tmp)
                return None
            os.replace(tmp, local)
            st = os.stat(local)
        self.reply(200, b"", {"ETag": etag_of(st), "x-goog-generation": generation_of(st)})

    def do_POST(self):
        """CreateMultipartUpload (?uploads) and CompleteMultipartUpload
        (?uploadId=ID): the parts are joined into a temp file, then renamed
        to the key (never a half object under it)."""
        self.count()
        write = self.write_request()
        if write is None:
            return
        body, local, q = write
        key = os.path.relpath(local, ARGS.root)
        if "uploads" in q:
            upload_id = hashlib.sha256(os.urandom(16)).hexdigest()[:32]
            d = os.path.join(ARGS.root, UPLOADS, upload_id)
            os.makedirs(d)
            with open(os.path.join(d, "key"), "w") as f:
                f.write(key)
            return self.reply(200, ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                                    "<InitiateMultipartUploadResult><Key>%s</Key>"
                                    "<UploadId>%s</UploadId></InitiateMultipartUploadResult>"
                                    % (escape(key), upload_id)).encode(),
                              {"Content-Type": "application/xml"})
        d = self.upload_dir(q)
        if d is None:
            return
        import xml.etree.ElementTree as ET
        try:
            # botocore's body is in S3's namespace, ours in none.
            root = ET.fromstring(body)
            for e in root.iter():
                e.tag = e.tag.rpartition("}")[2]
            parts = [(int(p.findtext("PartNumber")), p.findtext("ETag"))
                     for p in root.iter("Part")]
        except (ET.ParseError, TypeError, ValueError):
            return self.error_xml(400, "MalformedXML", "not a CompleteMultipartUpload")
        if not parts or [n for n, _ in parts] != list(range(1, len(parts) + 1)):
            return self.error_xml(400, "InvalidPartOrder", "parts must be 1..N")
        tmp = os.path.join(d, "complete")
        with open(tmp, "wb") as out:
            for n, etag in parts:
                name = os.path.join(d, "%05d" % n)
                if not os.path.exists(name):
                    return self.error_xml(400, "InvalidPart", "no part %d" % n)
                with open(name, "rb") as f:
                    data = f.read()
                if '"%s"' % hashlib.md5(data).hexdigest() != etag:
                    return self.error_xml(400, "InvalidPart", "part %d's ETag" % n)
                if n < len(parts) and len(data) < ARGS.min_part_size:
                    return self.error_xml(400, "EntityTooSmall",
                                          "Your proposed upload is smaller than the minimum "
                                          "allowed size", "<ProposedSize>%d</ProposedSize>"
                                          "<MinSizeAllowed>%d</MinSizeAllowed>"
                                          "<PartNumber>%d</PartNumber>"
                                          % (len(data), ARGS.min_part_size, n))
                out.write(data)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with WRITE_LOCK:
            # A failed precondition leaves the upload (S3's does too): the
            # client aborts it.
            if not self.precondition(local):
                os.unlink(tmp)
                return None
            os.replace(tmp, local)
            # The ETag a HEAD of the new object answers, as S3's answer
            # does (a client ties what it knows of the object to it).
            etag = etag_of(os.stat(local))
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
        os.rmdir(d)
        self.reply(200, ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                         "<CompleteMultipartUploadResult><Key>%s</Key><ETag>%s</ETag>"
                         "</CompleteMultipartUploadResult>"
                         % (escape(key), escape(etag))).encode(),
                   {"Content-Type": "application/xml"})

    def do_DELETE(self):
        """AbortMultipartUpload (?uploadId=ID): 204, or 404 NoSuchUpload;
        DeleteObject (no query): 204, the key removed if it was there."""
        self.count()
        if not self.check_signature():
            return
        where = self.object_path()
        if where is None:
            return
        local, q = where
        if "uploadId" not in q:  # DeleteObject: 204 whether or not the key was there
            if ARGS.read_only:
                return self.error_xml(403, "AccessDenied", "this bucket is read-only")
            with WRITE_LOCK:
                if os.path.isfile(local):
                    os.unlink(local)
            return self.reply(204)
        d = self.upload_dir(q)
        if d is None:
            return
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
        os.rmdir(d)
        self.reply(204)

    def count(self):
        with COUNT_LOCK:
            COUNT[0] += 1
            if COUNT[0] >= ARGS.max_requests:
                threading.Thread(target=self.server.shutdown, daemon=True).start()

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.count()
        if ARGS.latency_ms:
            time.sleep(ARGS.latency_ms / 1000)
        if ARGS.metadata_token_file and self.path == METADATA_TOKEN_PATH:
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, b"Missing Metadata-Flavor:Google header")
            with open(ARGS.metadata_token_file) as f:
                body = json.dumps({"access_token": f.read().strip(),
                                   "expires_in": ARGS.metadata_expires_in,
                                   "token_type": "Bearer"}).encode()
            return self.reply(200, body, {"Content-Type": "application/json",
                                          "Metadata-Flavor": "Google"})
        if not self.check_signature():
            return
        raw_path, _, query = self.path.partition("?")
        path = urllib.parse.unquote(raw_path)
        q = urllib.parse.parse_qs(query, keep_blank_values=True)
        if path.lstrip("/").split("/", 1)[0] == UPLOADS:
            return self.error_xml(404, "NoSuchBucket", "no such bucket: " + UPLOADS)
        if "list-type" in q:
            return self.list_objects(path.strip("/"), q)
        if "uploads" in q and "/" not in path.strip("/"):
            return self.list_uploads(path.strip("/"), q)
        local = os.path.normpath(os.path.join(ARGS.root, path.lstrip("/")))
        if not local.startswith(os.path.abspath(ARGS.root)) or not os.path.isfile(local):
            return self.error_xml(404, "NoSuchKey", "no such key: " + path)
        if self.command == "GET" and ARGS.drop_first:
            with COUNT_LOCK:
                DROPPED[local] = DROPPED.get(local, 0) + 1
                dropping = DROPPED[local] <= ARGS.drop_first
            if dropping:  # the connection closes with no answer at all
                self.close_connection = True
                return
        if self.command == "GET" and ARGS.fail_first:
            with COUNT_LOCK:
                FAILED[local] = FAILED.get(local, 0) + 1
                failing = FAILED[local] <= ARGS.fail_first
            if failing:
                return self.error_xml(503, "SlowDown", "injected failure")
        with open(local, "rb") as f:
            st = os.fstat(f.fileno())
            etag = etag_of(st)
            headers = {"ETag": etag, "Accept-Ranges": "bytes",
                       "x-goog-generation": generation_of(st),
                       "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True)}
            want = self.headers.get("If-Match")
            if want is not None and want != "*" and want != etag:
                return self.error_xml(412, "PreconditionFailed", "If-Match: " + want)
            rng = self.headers.get("Range")
            size = st.st_size
            if rng is None:
                return self.reply(200, f.read(), headers)  # HEAD: the length, no body
            first, _, last = rng[len("bytes="):].partition("-")
            first = int(first)
            last = min(int(last), size - 1) if last else size - 1
            if first >= size or last < first:
                headers["Content-Range"] = "bytes */%d" % size
                return self.reply(416, b"", headers)
            if ARGS.trickle and ARGS.trickle in path and self.command == "GET":
                return self.trickle(f, first, last - first + 1, size, headers)
            if ARGS.from_zero and ARGS.from_zero in path:
                last -= first
                first = 0
            headers["Content-Range"] = "bytes %d-%d/%d" % (first, last, size)
            self.reply_file(206, f, first, last - first + 1, headers)

    def trickle(self, f, first, count, size, headers):
        """206 with the range's headers, then 2 bytes a second until the
        client gives up (the connection closes)."""
        headers["Content-Range"] = "bytes %d-%d/%d" % (first, first + count - 1, size)
        self.send_response(206)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(count))
        self.end_headers()
        f.seek(first)
        self.close_connection = True
        try:
            for _ in range(count // 2):
                self.wfile.write(f.read(2))
                self.wfile.flush()
                time.sleep(1)
        except OSError:
            pass

    def hostile_page(self, bucket, prefix, q):
        """A listing page of --list-repeat-token or --list-endless."""
        token = q.get("continuation-token", [""])[0]
        start = int(token) if token.isdigit() else 0
        if ARGS.list_endless:
            keys = ["%s%s-%09d" % (prefix, "k" * 80, start + i) for i in range(1000)]
            next_token = str(start + 1000)
        else:
            keys = ["%sk-%d" % (prefix, i) for i in range(2)]
            next_token = "again"
        out = ['<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>',
               "<Name>%s</Name><IsTruncated>true</IsTruncated>" % escape(bucket)]
        for key in keys:
            out.append("<Contents><Key>%s</Key><ETag>\"e\"</ETag><Size>1</Size></Contents>"
                       % escape(key))
        out.append("<NextContinuationToken>%s</NextContinuationToken></ListBucketResult>"
                   % next_token)
        self.reply(200, "".join(out).encode(), {"Content-Type": "application/xml"})

    def list_uploads(self, bucket, q):
        """ListMultipartUploads: the uploads in flight under a prefix, one
        page (IsTruncated false)."""
        if not bucket or not os.path.isdir(os.path.join(ARGS.root, bucket)):
            return self.error_xml(404, "NoSuchBucket", "no such bucket: " + bucket)
        prefix = q.get("prefix", [""])[0]
        found = []
        top = os.path.join(ARGS.root, UPLOADS)
        for upload_id in os.listdir(top):
            try:
                with open(os.path.join(top, upload_id, "key")) as f:
                    b, _, key = f.read().partition("/")
                st = os.stat(os.path.join(top, upload_id))
            except OSError:
                continue  # a PUT's temp file, or an upload gone meanwhile
            if b == bucket and key.startswith(prefix):
                found.append((key, upload_id, st.st_mtime))
        found.sort()
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               "<Bucket>%s</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>"
               "<Prefix>%s</Prefix><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>"
               % (escape(bucket), escape(prefix))]
        for key, upload_id, mtime in found[:1000]:
            when = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc)
            out.append("<Upload><Key>%s</Key><UploadId>%s</UploadId>"
                       "<StorageClass>STANDARD</StorageClass><Initiated>%s</Initiated></Upload>"
                       % (escape(key), upload_id, when.strftime("%Y-%m-%dT%H:%M:%S.000Z")))
        out.append("</ListMultipartUploadsResult>")
        self.reply(200, "".join(out).encode(), {"Content-Type": "application/xml"})

    def list_objects(self, bucket, q):
        top = os.path.join(ARGS.root, bucket)
        if not bucket or not os.path.isdir(top):
            return self.error_xml(404, "NoSuchBucket", "no such bucket: " + bucket)
        prefix = q.get("prefix", [""])[0]
        if ARGS.list_repeat_token or ARGS.list_endless:
            return self.hostile_page(bucket, prefix, q)
        keys = []
        for d, dirs, files in os.walk(top):
            for name in files:
                key = os.path.relpath(os.path.join(d, name), top)
                if key.startswith(prefix):
                    keys.append(key)
        keys.sort()
        extra = []
        if ARGS.extra_keys_file:
            with open(ARGS.extra_keys_file) as f:
                extra = json.load(f)
        token = q.get("continuation-token", [""])[0]
        start = int(token) if token else 0
        page = keys[start:start + ARGS.page_size]
        more = start + ARGS.page_size < len(keys)
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>"
               "<MaxKeys>%d</MaxKeys><IsTruncated>%s</IsTruncated>"
               % (escape(bucket), escape(prefix), len(page), ARGS.page_size,
                  "true" if more else "false")]
        for key in page:
            st = os.stat(os.path.join(top, key))
            when = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
            out.append("<Contents><Key>%s</Key><LastModified>%s</LastModified>"
                       "<ETag>%s</ETag><Size>%d</Size><StorageClass>STANDARD</StorageClass>"
                       "</Contents>" % (escape(key), when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                                        escape(etag_of(st), {'"': "&quot;"}), st.st_size))
        if start == 0:
            for key in extra:  # whatever the prefix asked for
                out.append("<Contents><Key>%s</Key><ETag>\"x\"</ETag><Size>1</Size></Contents>"
                           % escape(key))
        if more:
            out.append("<NextContinuationToken>%d</NextContinuationToken>" % (start + len(page)))
        out.append("</ListBucketResult>")
        self.reply(200, "".join(out).encode(), {"Content-Type": "application/xml"})


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--log", default="")
    p.add_argument("--page-size", type=int, default=1000)
    p.add_argument("--access-key", default="")
    p.add_argument("--secret-key", default="")
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--drop-first", type=int, default=0)
    p.add_argument("--latency-ms", type=int, default=0)
    p.add_argument("--max-requests", type=int, default=100000)
    p.add_argument("--bearer-token-file", default="")
    p.add_argument("--read-only", action="store_true")
    p.add_argument("--max-put", type=int, default=64 << 20)
    p.add_argument("--metadata-token-file", default="")
    p.add_argument("--botocore", action="store_true")
    p.add_argument("--metadata-expires-in", type=int, default=3599)
    p.add_argument("--list-repeat-token", action="store_true")
    p.add_argument("--list-endless", action="store_true")
    p.add_argument("--extra-keys-file", default="")
    p.add_argument("--trickle", default="")
    p.add_argument("--from-zero", default="")
    p.add_argument("--min-part-size", type=int, default=5 << 20)
    p.add_argument("--stats", default="")
    ARGS = p.parse_args()
    ARGS.root = os.path.abspath(ARGS.root)
    os.makedirs(os.path.join(ARGS.root, UPLOADS), exist_ok=True)
    if ARGS.botocore:
        import botocore.auth  # noqa: F401 -- fail now, not at the first request
    # socketserver listens with a backlog of 5: a client opening dozens of
    # connections at once (a header walk's parts) would see SYNs dropped and
    # resent a second later, which no real store does.
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)  # the socket listens already
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
