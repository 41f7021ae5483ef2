#!/usr/bin/env python3
"""Independent checks of ExampleListWithContext (ELWC) shards and their mount.

Reads TFRecord files with tests/cli/tfrecord_check.py (no tfrecordfs code)
and walks each payload's protobuf wire by hand:
    ExampleListWithContext { repeated Example examples = 1; Example context = 2; }

  elwc_check.py tree SHARD SHARD_DIR [--eie]
      For every record, the files the mount must show under SHARD_DIR/<record>/
      (context/ when the payload has a context field, examples/<i>/ per
      example: int64/float lists one value a line, single-line text .txt,
      kindless .none, one other bytes value <name>.<ext>, several a folder of
      <i>.<ext>; a serialized tensor is only checked to exist, as .png/.npy)
      compared with what SHARD_DIR holds. One line per record:
        <i> ok examples:<n> context:<none|empty|<k> features>
        <i> DIFF <path>: <what>
      then `records <n>`. With --eie the records are TF-Ranking
      Example-in-Example (an Example of serialized_context, one serialized
      Example, and serialized_examples, serialized Examples), shown as
      serialized_context/ and serialized_examples/<i>/.
  elwc_check.py kept BEFORE AFTER
      Compares two shards record by record by the wire alone. One line per
      record that differs:
        <i> fields:<the top-level fields, `=` kept byte for byte or `*`
        changed, `e` an example, `c` the context, in wire order> changed:<for
        each changed Example, `e<k>` or `c`, its map entries that are not byte
        for byte in the original, key=kind:values>
      then `records <n> same <s>`.
  elwc_check.py kept-eie BEFORE AFTER
      The same for Example-in-Example shards, one line per record that differs:
        <i> context:<= kept | * changed | - absent> examples:<per value, `=`
        byte for byte a value of the original record, `*` new>
        entries:<the outer map entries kept byte for byte, by key>
  elwc_check.py same SHARD [--eie]
      Whether the two records of SHARD say the same thing as ELWCs (the same
      examples in order, each with the same features whatever their entry
      order, and the same context or none): prints `same`, else `DIFF`.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli"))
import tfrecord_check as t  # noqa: E402


def walk(buf):
    """(field, whole field bytes, body) of a message of LEN fields only."""
    i = 0
    while i < len(buf):
        start = i
        key, i = t._varint(buf, i)
        if key & 7 != 2:
            raise ValueError("wire type %d at byte %d" % (key & 7, start))
        n, i = t._varint(buf, i)
        if i + n > len(buf):
            raise ValueError("field past the end at byte %d" % start)
        yield key >> 3, bytes(buf[start:i + n]), bytes(buf[i:i + n])
        i += n


def elwc(payload):
    """([(whole field, Example body)], (whole field, context body) or None, order)."""
    examples, context, order = [], None, []
    for f, whole, body in walk(payload):
        if f == 1:
            examples.append((whole, body))
            order.append("e")
        elif f == 2:
            if context is not None:
                raise ValueError("two context fields")
            context = (whole, body)
            order.append("c")
        else:
            raise ValueError("field %d" % f)
    return examples, context, order


def eie(payload):
    """The same as elwc() for an Example-in-Example: values, not fields."""
    examples, context, order = [], None, []
    for key, whole, value in entries(payload):
        kind, values = t._feature(value)
        if key == "serialized_context":
            context = (whole, values[0])
            order.append("c")
        elif key == "serialized_examples":
            examples = [(v, v) for v in values]
            order.append("e")
        else:
            raise ValueError("feature %s" % key)
    return examples, context, order


def entries(example):
    """[(key, whole entry bytes, Feature body)] of an Example, in wire order."""
    out = []
    for f, _, features in walk(example):
        if f != 1:
            raise ValueError("Example field %d" % f)
        for g, whole, entry in walk(features):
            key, value = "", b""
            for h, _, v in walk(entry):
                if h == 1:
                    key = v.decode("utf-8")
                elif h == 2:
                    value = v
            out.append((key, whole, value))
    return out


def single_line_text(v):
    try:
        s = v.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ord(c) >= 0x20 and c != "\x7f" or c == "\t" for c in s)


def looks_like_tensor(v):
    # A TensorProto as tf.io.serialize_tensor writes it: dtype (field 1,
    # varint) first, then the shape (field 2).
    return len(v) > 2 and v[0] == 0x08 and b"\x12" in v[:4]


def number_text(kind, values):
    if kind == "int64":
        return "".join("%d\n" % v for v in values).encode()
    return "".join(repr(float(v)) + "\n" for v in values).encode()


def expected_files(example):
    """{relative path: bytes or None (exists, content not compared)}, plus
    {relative path prefix: None} for values whose extension is sniffed."""
    files, stems = {}, {}
    table = {}
    for key, _, value in entries(example):
        table[key] = t._feature(value)  # the last entry of a key wins
    for name, (kind, values) in table.items():
        if kind == "none":
            files[name + ".none"] = b""
        elif kind in ("int64", "float"):
            files[name] = number_text(kind, values)
        elif all(single_line_text(v) for v in values):
            files[name + ".txt"] = b"".join(v + b"\n" for v in values)
        elif len(values) == 1:
            stems[name + "."] = None if looks_like_tensor(values[0]) else values[0]
        else:
            for i, v in enumerate(values):
                stems["%s/%d." % (name, i)] = None if looks_like_tensor(v) else v
    return files, stems


def check_folder(prefix, example, tree, problems):
    files, stems = expected_files(example)
    mine = {p[len(prefix):]: c for p, c in tree.items() if p.startswith(prefix)}
    for path, content in files.items():
        if path not in mine:
            problems.append("%s%s: missing" % (prefix, path))
        elif mine.pop(path) != content:
            problems.append("%s%s: content differs" % (prefix, path))
    for stem, content in stems.items():
        hits = [p for p in mine if p.startswith(stem) and "/" not in p[len(stem):]]
        if len(hits) != 1:
            problems.append("%s%s*: %d files" % (prefix, stem, len(hits)))
            continue
        got = mine.pop(hits[0])
        if content is not None and got != content:
            problems.append("%s%s: content differs" % (prefix, hits[0]))
    for path in mine:
        problems.append("%s%s: unexpected" % (prefix, path))


def tree_command(shard, shard_dir, as_eie=False):
    split = eie if as_eie else elwc
    context_dir = "serialized_context" if as_eie else "context"
    examples_dir = "serialized_examples" if as_eie else "examples"
    records = t.read_records(shard)
    names = sorted(os.listdir(shard_dir), key=int)
    if len(names) != len(records):
        print("DIFF %d record folders, %d records" % (len(names), len(records)))
    for i, payload in enumerate(records):
        folder = os.path.join(shard_dir, names[i])
        tree = t.read_tree(folder)
        dirs = set()
        for d, subdirs, _ in os.walk(folder):
            for s in subdirs:
                dirs.add(os.path.relpath(os.path.join(d, s), folder))
        examples, context, _ = split(payload)
        problems = []
        width = max(3, len(str(max(len(examples) - 1, 0))))
        want_dirs = {examples_dir}
        if context is not None:
            want_dirs.add(context_dir)
            check_folder(context_dir + "/", context[1], tree, problems)
        for k, (_, body) in enumerate(examples):
            name = "%s/%0*d" % (examples_dir, width, k)
            want_dirs.add(name)
            check_folder(name + "/", body, tree, problems)
        top = {d for d in dirs if d == context_dir or d == examples_dir or
               (d.startswith(examples_dir + "/") and d.count("/") == 1)}
        if top != want_dirs:
            problems.append("folders %s, want %s" % (sorted(top), sorted(want_dirs)))
        for p in sorted(tree):
            if not (p.startswith(context_dir + "/") or p.startswith(examples_dir + "/")):
                problems.append("%s: unexpected" % p)
        if problems:
            for p in problems:
                print(i, "DIFF", p)
        else:
            ctx = "none" if context is None else (
                "empty" if not entries(context[1]) else "%d features" % len(entries(context[1])))
            print(i, "ok", "examples:%d" % len(examples), "context:" + ctx)
    print("records", len(records))


def show(value):
    kind, values = t._feature(value)
    if kind == "bytes":
        values = [v.decode("utf-8", "backslashreplace") for v in values]
    elif kind == "float":
        values = ["%g" % v for v in values]
    return kind + ":" + ",".join(str(v) for v in values)


def kept_command(before, after):
    old, new = t.read_records(before), t.read_records(after)
    if len(old) != len(new):
        print("DIFF %d records, %d before" % (len(new), len(old)))
    same = 0
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            same += 1
            continue
        ea, ca, _ = elwc(a)
        eb, cb, order = elwc(b)
        originals = {whole for whole, _ in ea} | ({ca[0]} if ca else set())
        fields, changed, k = [], [], 0
        for kind in order:
            if kind == "e":
                whole, body = eb[k]
                label = "e%d" % k
                k += 1
            else:
                whole, body = cb
                label = "c"
            kept = whole in originals
            fields.append(kind + ("=" if kept else "*"))
            if not kept:
                old_entries = set()
                for _, body0 in ea + ([ca] if ca else []):
                    old_entries |= {w for _, w, _ in entries(body0)}
                news = ["%s=%s" % (key, show(v)) for key, w, v in entries(body)
                        if w not in old_entries]
                changed.append(label + "[" + " ".join(news) + "]")
        print(i, "fields:" + "".join(fields), "changed:" + " ".join(changed))
    print("records", len(old), "same", same)


def meaning(payload, as_eie=False):
    examples, context, _ = (eie if as_eie else elwc)(payload)
    ctx = None if context is None else t.describe_example(context[1])
    return [t.describe_example(body) for _, body in examples], ctx


def same_command(shard, as_eie=False):
    a, b = t.read_records(shard)
    ma, mb = meaning(a, as_eie), meaning(b, as_eie)
    print("same" if ma == mb else "DIFF %r %r" % (ma, mb))


def kept_eie_command(before, after):
    old, new = t.read_records(before), t.read_records(after)
    if len(old) != len(new):
        print("DIFF %d records, %d before" % (len(new), len(old)))
    same = 0
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            same += 1
            continue
        ea, ca, _ = eie(a)
        eb, cb, _ = eie(b)
        ctx = "-" if cb is None else ("=" if ca is not None and ca[1] == cb[1] else "*")
        values = {v for v, _ in ea}
        marks = "".join("=" if v in values else "*" for v, _ in eb)
        outer = {w for _, w, _ in entries(a)}
        kept = [k for k, w, _ in entries(b) if w in outer]
        print(i, "context:" + ctx, "examples:" + marks, "entries:" + ",".join(kept))
    print("records", len(old), "same", same)


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "tree":
        tree_command(sys.argv[2], sys.argv[3], sys.argv[4:] == ["--eie"])
    elif len(sys.argv) == 4 and sys.argv[1] == "kept-eie":
        kept_eie_command(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "kept":
        kept_command(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "same":
        same_command(sys.argv[2], sys.argv[3:] == ["--eie"])
    else:
        raise SystemExit(__doc__)
