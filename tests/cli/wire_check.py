"""The protobuf wire format read by hand, for the tests' independent readers
(tfrecord_check.py: tf.train.Example; arrayrecord_check.py: riegeli's
simple chunks and ArrayRecord's footer). No tfrecordfs code and no protobuf
library: protobuf's encoding.md, followed by hand. A message is a run of
fields, each a varint key (field number << 3 | wire type) and a value:
VARINT (0), I64 (1: 8 bytes), LEN (2: a varint length, then that many
bytes) or I32 (5: 4 bytes). A varint is 7 bits a byte, low bits first, the
top bit set on every byte but the last.
"""


class WireError(ValueError):
    """The bytes are not protobuf wire format."""


def varint(buf, i):
    """(value, index after it) of the varint at buf[i]."""
    shift = value = 0
    while True:
        if i >= len(buf):
            raise WireError("varint past the end")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def fields(buf, wire_types=(0, 1, 2, 5)):
    """Yields (field number, wire type, value) of the message `buf`: an int
    for VARINT, the bytes of the others. A wire type not in `wire_types` is
    a WireError."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire not in wire_types:
            raise WireError("wire type %d" % wire)
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = bytes(buf[i:i + 8]), i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            value, i = bytes(buf[i:i + n]), i + n
        else:
            value, i = bytes(buf[i:i + 4]), i + 4
        yield field, wire, value
