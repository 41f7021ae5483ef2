"""An independent TFRecord reader for the tests (no tfrecordfs code).

The framing, from TensorFlow's record_writer.cc:
  uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
  | data[length] | uint32 masked_crc32c(data)
masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2**32).
GZIP and ZLIB files are decompressed with Python's zlib module first.
CRC32C (Castagnoli, reflected polynomial 0x82F63B78) is computed by Debian's
python3-crcmod (its C extension; scripts/setup installs it) where it imports,
else here with a table (~40x slower: 2.4 s for a 12 MB shard); both are
checked against the RFC 3720 test vectors below, and against each other.
read_tree reads a whole file tree (a mount and its twin are compared so).
"""
import os
import sys
import zlib

_POLY = 0x82F63B78
_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def _crc32c_table(data: bytes) -> int:
    c = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


try:
    import crcmod.predefined  # Debian's python3-crcmod

    _crc32c_crcmod = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
except ImportError:
    _crc32c_crcmod = None


def crc32c(data: bytes) -> int:
    if _crc32c_crcmod is not None:
        return _crc32c_crcmod(data)
    return _crc32c_table(data)


for _crc in (_crc32c_table, _crc32c_crcmod):
    if _crc is not None:
        assert _crc(b"123456789") == 0xE3069283
        assert _crc(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros
        assert _crc(bytes(range(32))) == 0x46DD794E  # RFC 3720 B.4: incrementing
if _crc32c_crcmod is not None:
    _sample = bytes((i * 131 + 7) % 256 for i in range(4099))
    assert all(_crc32c_crcmod(_sample[:n]) == _crc32c_table(_sample[:n])
               for n in (0, 1, 3, 64, 1000, 4099))


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def codec_of(raw: bytes) -> str:
    if raw[:2] == b"\x1f\x8b":
        return "gzip"
    if len(raw) >= 2 and (raw[0] & 0x0F) == 8 and ((raw[0] << 8) | raw[1]) % 31 == 0:
        # A plain shard may start like this too: it must then parse as framing.
        try:
            zlib.decompress(raw)
            return "zlib"
        except zlib.error:
            return "none"
    return "none"


def decompress(raw: bytes, codec: str) -> bytes:
    if codec == "gzip":
        return zlib.decompress(raw, 16 + zlib.MAX_WBITS)
    if codec == "zlib":
        return zlib.decompress(raw)
    return raw


def read_records(path: str, codec: str = None):
    """The payloads of `path`, every CRC checked; raises ValueError on damage."""
    with open(path, "rb") as f:
        raw = f.read()
    if codec is None:
        codec = codec_of(raw)
    data = decompress(raw, codec)
    out = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            raise ValueError(f"{path}: truncated header at {pos}")
        header = data[pos:pos + 8]
        n = int.from_bytes(header, "little")
        if int.from_bytes(data[pos + 8:pos + 12], "little") != masked_crc(header):
            raise ValueError(f"{path}: length CRC at {pos}")
        end = pos + 12 + n + 4
        if end > len(data):
            raise ValueError(f"{path}: truncated record at {pos}")
        payload = data[pos + 12:pos + 12 + n]
        if int.from_bytes(data[end - 4:end], "little") != masked_crc(payload):
            raise ValueError(f"{path}: data CRC at {pos}")
        out.append(payload)
        pos = end
    return out


def frame(payload: bytes) -> bytes:
    header = len(payload).to_bytes(8, "little")
    return (header + masked_crc(header).to_bytes(4, "little") + payload +
            masked_crc(payload).to_bytes(4, "little"))


# ---- tf.train.Example, decoded from the protobuf wire format by hand ----
# (example.proto / feature.proto: Example.features = 1; Features.feature = 1,
# a map<string, Feature> of entries key = 1, value = 2; Feature is one of
# bytes_list = 1, float_list = 2, int64_list = 3, each a list whose values
# are field 1, packed or not.)
import struct

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire_check  # noqa: E402

# The wire walk itself is wire_check.py's (shared with arrayrecord_check.py).
_varint = wire_check.varint
_fields = wire_check.fields


def _feature(buf: bytes):
    kind, values = "none", []
    for field, _, body in _fields(buf):
        kind = {1: "bytes", 2: "float", 3: "int64"}.get(field, kind)
        for f, wire, v in _fields(body):
            if f != 1:
                continue
            if field == 1:
                values.append(bytes(v))
            elif field == 2:  # packed (wire 2) or one value (wire 5)
                values.extend(struct.unpack("<%df" % (len(v) // 4), v))
            elif wire == 2:
                j = 0
                while j < len(v):
                    x, j = _varint(v, j)
                    values.append(x - (1 << 64) if x >= 1 << 63 else x)
            else:
                values.append(v - (1 << 64) if v >= 1 << 63 else v)
    return kind, values


def decode_example(payload: bytes) -> dict:
    """{feature name: (kind, [values])} of a serialized tf.train.Example."""
    out = {}
    for field, _, features in _fields(payload):
        if field != 1:
            continue
        for f, _, entry in _fields(features):
            if f != 1:
                continue
            key, value = None, b""
            for ef, _, ev in _fields(entry):
                if ef == 1:
                    key = bytes(ev).decode("utf-8")
                elif ef == 2:
                    value = ev
            out[key] = _feature(value)
    return out


def describe_example(payload: bytes) -> str:
    """One line: `name:kind:v1,v2 ...` per feature in name order (bytes as
    UTF-8 with backslash escapes, floats as %g)."""
    parts = []
    for name, (kind, values) in sorted(decode_example(payload).items()):
        if kind == "bytes":
            shown = [v.decode("utf-8", "backslashreplace") for v in values]
        elif kind == "float":
            shown = ["%g" % v for v in values]
        else:
            shown = [str(v) for v in values]
        parts.append("%s:%s:%s" % (name, kind, ",".join(shown)))
    return " ".join(parts)


def read_tree(root: str) -> dict:
    """Every file below `root`: its path relative to `root` -> its bytes,
    walked in sorted order."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out
