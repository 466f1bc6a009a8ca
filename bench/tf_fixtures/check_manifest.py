#!/usr/bin/env python3
"""Reads tests/fixtures/tf/manifest.txt the way a C++ test would and checks it is consistent:
every file named exists, every .bin has the size its dtype and shape imply, every case names
known files, and the expected tensor's dtype/shape agree with its 'tensor' line.
Needs only the standard library.   python3 bench/tf_fixtures/check_manifest.py [DIR]
"""

import os
import struct
import sys

SIZES = {"uint8": 1, "int64": 8, "float32": 4}


def parse_line(line):
    kind, *tokens = line.split(" ")
    kv = {}
    for t in tokens:
        k, sep, v = t.partition("=")
        assert sep and k and k not in kv, f"bad token {t!r} in {line!r}"
        kv[k] = v
    return kind, kv


def dims(shape):
    return [] if shape == "scalar" else [int(d) for d in shape.split(",")]


def string_count(data):
    n, off = 0, 0
    while off < len(data):
        (length,) = struct.unpack_from("<I", data, off)
        off += 4 + length
        n += 1
    assert off == len(data)
    return n


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "tests", "fixtures", "tf")
    raw, tensors, cases = set(), {}, []
    with open(os.path.join(d, "manifest.txt")) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, kv = parse_line(line)
            path = os.path.join(d, kv.get("file", kv.get("expected", "")))
            if kind in ("jpeg", "example"):
                assert os.path.getsize(path) == int(kv["bytes"]), line
                raw.add(kv["file"])
            elif kind == "tensor":
                n = 1
                for x in dims(kv["shape"]):
                    n *= x
                data = open(path, "rb").read()
                if kv["dtype"] == "string":
                    assert string_count(data) == n, line
                else:
                    assert len(data) == n * SIZES[kv["dtype"]], line
                tensors[kv["file"]] = (kv["dtype"], kv["shape"])
            elif kind == "case":
                cases.append(kv)
            else:
                raise AssertionError(f"unknown line kind: {line}")
    ops = {}
    for c in cases:
        assert c["input"] in raw or c["input"] in tensors, c
        if c["expected"] != "none":
            assert tensors[c["expected"]] == (c["dtype"], c["shape"]), c
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    on_disk = set(os.listdir(d)) - {"manifest.txt", "README.md"}
    assert on_disk == raw | set(tensors), on_disk ^ (raw | set(tensors))
    print(f"ok: {len(cases)} cases ({', '.join(f'{k} {v}' for k, v in sorted(ops.items()))}), "
          f"{len(raw)} encoded inputs, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
