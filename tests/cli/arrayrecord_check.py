#!/usr/bin/env python3
"""An independent ArrayRecord (riegeli/records) reader for the tests: no
tfrecordfs code, the wire format followed by hand from
google/riegeli doc/riegeli_records_file_format.md and google/array_record
cpp/layout.proto, array_record_reader.cc.

  * every 64 KiB (a block boundary) a 24-byte block header interrupts the
    bytes: header_hash, previous_chunk (boundary - chunk begin), next_chunk
    (chunk end - boundary), little-endian u64;
  * a chunk: a 40-byte header (header_hash, data_size, data_hash,
    chunk_type | num_records << 8, decoded_data_size), data_size bytes of
    data (block headers not counted), padding up to its end:
    max(begin + header and data with block headers,
        the first possible chunk boundary at or after begin + num_records);
  * the first 64 bytes: the signature (a block header and chunk 's');
  * simple chunk 'r': compression byte (0 none, 'b' brotli, 'z' zstd,
    's' snappy), varint size of the compressed sizes, the sizes (a varint per
    record), the values; a compressed buffer starts with the varint of its
    decompressed size;
  * ArrayRecord: the last 64 KiB begin with the postscript chunk (three
    RiegeliPostscript {1 footer_offset, 2 magic}); the footer chunk at
    footer_offset holds RiegeliFooterMetadata {1 ArrayRecordMetadata
    {1 version, 2 num_chunks, 3 num_records, 4 writer_options}} and one
    ArrayRecordFooter {1 chunk_offset, 2 decoded_data_size, 3 num_records}
    per data chunk.

The HighwayHash hashes are NOT checked here (no implementation in Python's
standard library); every distance, size and count is, and the chunks are
found twice, by walking the file from the signature and by the footer,
which must agree. brotli, zstandard and snappy are Debian's python3-brotli,
python3-zstandard and python3-snappy (scripts/setup).

  arrayrecord_check.py dump FILE
      options <writer options>
      group <records per chunk, the reader's rule: the first chunk's count>
      chunk <offset> <records> <compression> <sha256 of header and data>
      record <i> <hex payload>
      example <i> <tfrecord_check.describe_example line>   (Example payloads)
      records <n>
Exit status 1 and a line `ERROR <why>` when the file breaks the format.
"""
import hashlib
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402
import wire_check  # noqa: E402

BLOCK = 1 << 16
BLOCK_HEADER = 24
USABLE = BLOCK - BLOCK_HEADER
CHUNK_HEADER = 40
MAGIC = 0x71930E704FDAE05E
SIGNATURE = bytes.fromhex(
    "83af70d10d884a3f00000000000000004000000000000000"
    "91bac23c9287e1a90000000000000000e19f13c0e9b1c372"
    "73000000000000000000000000000000")


class FormatError(Exception):
    pass


varint = wire_check.varint


def chunk_bytes(f, begin, n):
    """n chunk bytes from `begin`, block headers skipped and checked to
    point at `begin` (their next_chunk is returned for the caller)."""
    out = bytearray()
    pos = begin
    nexts = []
    while len(out) < n:
        if pos % BLOCK == 0:
            h = f[pos:pos + BLOCK_HEADER]
            if len(h) < BLOCK_HEADER:
                raise FormatError("block header past the end at %d" % pos)
            _, prev, nxt = struct.unpack("<QQQ", h)
            if prev != pos - begin:
                raise FormatError("block header at %d: previous_chunk %d, chunk begins %d back"
                                  % (pos, prev, pos - begin))
            nexts.append((pos, nxt))
            pos += BLOCK_HEADER
        take = min(n - len(out), BLOCK - pos % BLOCK)
        piece = f[pos:pos + take]
        if len(piece) < take:
            raise FormatError("chunk at %d runs past the end" % begin)
        out += piece
        pos += take
    return bytes(out), pos, nexts


def possible_boundary(pos):
    r = (-pos) % BLOCK
    return pos + (r - (USABLE - 1) if r > USABLE - 1 else 0)


def read_chunk(f, begin):
    """(header dict, header+data bytes, end) of the chunk at `begin`."""
    head, _, nexts = chunk_bytes(f, begin, CHUNK_HEADER)
    _, data_size, _, type_records, decoded = struct.unpack("<QQQQQ", head)
    raw, pos, more = chunk_bytes(f, begin, CHUNK_HEADER + data_size)
    nexts += more
    num_records = type_records >> 8
    end = max(pos, possible_boundary(begin + num_records))
    # Padding: block headers inside it point at the chunk too.
    while pos < end:
        if pos % BLOCK == 0:
            _, prev, nxt = struct.unpack("<QQQ", f[pos:pos + BLOCK_HEADER])
            if prev != pos - begin:
                raise FormatError("block header at %d in padding" % pos)
            nexts.append((pos, nxt))
            pos += BLOCK_HEADER
        else:
            pos = min(end, pos + BLOCK - pos % BLOCK)
    for at, nxt in nexts:
        if at + nxt != end:
            raise FormatError("block header at %d: next_chunk %d, the chunk ends at %d"
                              % (at, nxt, end))
    h = {"type": chr(type_records & 0xFF), "records": num_records, "decoded": decoded,
         "data": raw[CHUNK_HEADER:]}
    return h, raw, end


def decompress(compression, buf):
    if compression == 0:
        return bytes(buf)
    size, i = varint(buf, 0)
    body = bytes(buf[i:])
    if compression == ord("b"):
        import brotli
        out = brotli.decompress(body)
    elif compression == ord("z"):
        import zstandard
        out = zstandard.ZstdDecompressor().decompress(body, max_output_size=size)
    elif compression == ord("s"):
        import snappy
        out = snappy.uncompress(body)
    else:
        raise FormatError("compression byte %d" % compression)
    if len(out) != size:
        raise FormatError("decompressed %d bytes, declared %d" % (len(out), size))
    return out


def simple_records(h):
    data = h["data"]
    if h["type"] != "r":
        raise FormatError("chunk type %r is not a simple chunk" % h["type"])
    compression = data[0]
    n, i = varint(data, 1)
    sizes = decompress(compression, data[i:i + n])
    values = decompress(compression, data[i + n:])
    out, j, at = [], 0, 0
    while j < len(sizes):
        s, j = varint(sizes, j)
        out.append(values[at:at + s])
        at += s
    if len(out) != h["records"] or at != len(values) or at != h["decoded"]:
        raise FormatError("simple chunk: %d records of %d bytes, header says %d of %d"
                          % (len(out), at, h["records"], h["decoded"]))
    return compression, out


def fields(buf):
    """(field, value) of a message of VARINT and LEN fields only (the
    postscript's, the footer's)."""
    for field, _, value in wire_check.fields(buf, wire_types=(0, 2)):
        yield field, value


def read(path):
    with open(path, "rb") as fh:
        f = fh.read()
    if f[:64] != SIGNATURE:
        raise FormatError("no riegeli signature")
    if len(f) % BLOCK != 0 or len(f) < 2 * BLOCK:
        raise FormatError("size %d is not whole blocks" % len(f))
    # By the postscript and the footer.
    ph, _, _ = read_chunk(f, len(f) - BLOCK)
    _, posts = simple_records(ph)
    if len(posts) != 3 or posts[0] != posts[1] or posts[0] != posts[2]:
        raise FormatError("postscript: %d records" % len(posts))
    ps = dict(fields(posts[0]))
    if ps.get(2) != MAGIC:
        raise FormatError("postscript magic")
    fh_, _, _ = read_chunk(f, ps[1])
    _, footer = simple_records(fh_)
    meta = dict(fields(dict(fields(footer[0]))[1]))
    if meta.get(1) != 1:
        raise FormatError("version %r" % meta.get(1))
    entries = [dict(fields(e)) for e in footer[1:]]
    if meta.get(2, 0) != len(entries):
        raise FormatError("num_chunks %d, %d entries" % (meta.get(2, 0), len(entries)))
    # By walking the file: the data chunks in order, padding skipped.
    walked = []
    pos = 64
    while pos < ps[1]:
        h, raw, end = read_chunk(f, pos)
        if h["type"] == "r":
            walked.append((pos, h, raw))
        elif h["type"] != "p":
            raise FormatError("chunk type %r at %d" % (h["type"], pos))
        pos = end
    if pos != ps[1]:
        raise FormatError("the walk ends at %d, the footer is at %d" % (pos, ps[1]))
    if [w[0] for w in walked] != [e.get(1, 0) for e in entries]:
        raise FormatError("footer offsets %s, chunks walked at %s"
                          % ([e.get(1, 0) for e in entries], [w[0] for w in walked]))
    chunks, records = [], []
    for (pos, h, raw), e in zip(walked, entries):
        if e.get(3, 0) != h["records"] or e.get(2, 0) != h["decoded"]:
            raise FormatError("footer entry of the chunk at %d disagrees with it" % pos)
        compression, recs = simple_records(h)
        chunks.append((pos, h["records"], compression, hashlib.sha256(raw).hexdigest()))
        records += recs
    if meta.get(3, 0) != len(records):
        raise FormatError("num_records %d, %d read" % (meta.get(3, 0), len(records)))
    group = chunks[0][1] if chunks else 0
    for c in chunks[:-1]:
        if c[1] != group:
            raise FormatError("the chunk at %d holds %d records, the first %d: the reference "
                              "reader would find records in the wrong chunk" % (c[0], c[1], group))
    options = meta.get(4, b"").decode("utf-8")
    return options, group, chunks, records


def main(argv):
    if len(argv) != 3 or argv[1] != "dump":
        print(__doc__, file=sys.stderr)
        return 2
    try:
        options, group, chunks, records = read(argv[2])
    except (FormatError, wire_check.WireError, IndexError, KeyError, struct.error) as e:
        print("ERROR %s" % e)
        return 1
    names = {0: "none", ord("b"): "brotli", ord("z"): "zstd", ord("s"): "snappy"}
    print("options %s" % options)
    print("group %d" % group)
    for pos, n, compression, digest in chunks:
        print("chunk %d %d %s %s" % (pos, n, names.get(compression, "?"), digest))
    for i, r in enumerate(records):
        print("record %d %s" % (i, r.hex()))
        try:
            line = tc.describe_example(r) if r else ""
        except Exception:  # not an Example
            line = ""
        if line:
            print("example %d %s" % (i, line))
    print("records %d" % len(records))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
