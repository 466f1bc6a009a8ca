"""The pipeline builder: generated from proto/pipeline.proto, the engine's validation, run()."""

import json
import os
import re
import subprocess

import numpy as np
import pytest

import tfdata
from tfdata import fn, Pipeline
from conftest import SOURCE_DIR, tfdata_binary


def _doc_headings(section_start, section_end):
    text = open(os.path.join(SOURCE_DIR, "docs", "pipeline.md")).read()
    section = text[text.index(section_start):text.index(section_end)]
    return re.findall(r"^### (\w+)$", section, re.M)


def test_builder_covers_every_op_and_function_of_the_docs():
    ops = _doc_headings("## 8. Source ops", "## 10. Functions")
    functions = _doc_headings("## 10. Functions", "## 11.")
    assert len(ops) >= 20 and len(functions) >= 15
    for op in ops:
        assert callable(getattr(Pipeline, op)), op
    for f in functions:
        assert callable(getattr(fn, f)), f


def test_builder_follows_the_proto_not_a_copy():
    proto = open(os.path.join(SOURCE_DIR, "proto", "pipeline.proto")).read()
    op_block = proto[proto.index("message Op {"):proto.index("message Range")]
    kinds = re.findall(r"^\s+\w+ (\w+) = \d+;", op_block, re.M)
    for kind in kinds:
        assert hasattr(Pipeline, kind), kind
    batch_fields = re.findall(r"^\s+(?:\w+ )?\w+ (\w+) = \d+;",
                              proto[proto.index("message Batch {"):proto.index("message PaddedBatch")], re.M)
    assert batch_fields == ["batch_size", "drop_remainder"]
    assert "batch_size" in Pipeline.batch.__doc__ and "drop_remainder" in Pipeline.batch.__doc__


def test_range_like_python():
    assert list(Pipeline.range(5)) == [0, 1, 2, 3, 4]
    assert list(Pipeline.range(2, 8)) == [2, 3, 4, 5, 6, 7]
    assert list(Pipeline.range(10, 0, -3)) == [10, 7, 4, 1]
    assert list(Pipeline.range(stop=3)) == [0, 1, 2]


def test_issue_example_builds():
    p = tfdata.Pipeline.range(10).map(tfdata.fn.decode_jpeg(channels=3)).batch(4)
    text = p.to_text()
    assert "decode_jpeg" in text and "channels: 3" in text and "batch_size: 4" in text
    # The engine rejects it (range yields int64, decode_jpeg wants a string), with its message.
    with pytest.raises(tfdata.InvalidArgumentError, match=r"op 1 \(map\).*decode_jpeg"):
        p.validate()
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        p.run()


def test_map_filter_batch_values_and_text_round_trip():
    p = (Pipeline.range(20)
         .filter(fn.arith("mod", 2), fn.compare("eq", 0))
         .map(fn.arith("mul", 10), fn.arith("add", 1))
         .batch(4))
    got = [a.tolist() for a in p]
    assert got == [[1, 21, 41, 61], [81, 101, 121, 141], [161, 181]]
    q = Pipeline.from_text(p.to_text())
    assert q == p
    assert [a.tolist() for a in q] == got


def test_run_is_the_same_as_tfdata_run():
    binary = tfdata_binary()
    for name in ["map_filter_batch.pbtxt", "zip_select.pbtxt", "shuffle_repeat.pbtxt"]:
        path = os.path.join(SOURCE_DIR, "examples", name)
        out = subprocess.run([binary, "run", path, "--format", "jsonl", "-q"], capture_output=True, text=True,
                             timeout=60, cwd=SOURCE_DIR)
        assert out.returncode == 0, out.stderr
        cli = [json.loads(line) for line in out.stdout.splitlines()]
        py = [_jsonable(e) for e in Pipeline.from_file(path)]
        assert len(py) == len(cli) > 0
        assert json.dumps(py, sort_keys=True) == json.dumps(_normalize(cli), sort_keys=True), name


def _jsonable(e):
    if isinstance(e, tuple):
        return [_jsonable(x) for x in e]
    if isinstance(e, np.ndarray):
        return e.tolist()
    if isinstance(e, bytes):
        return e.decode()
    return e


def _normalize(cli):
    # jsonl writes one-component elements bare and tuples as lists; floats as numbers.
    return cli


def test_element_spec_and_cardinality():
    assert Pipeline.range(10).element_spec == tfdata.TensorSpec((), "int64")
    assert Pipeline.range(10).batch(3).element_spec == tfdata.TensorSpec((None,), "int64")
    assert Pipeline.range(10).batch(3, drop_remainder=True).element_spec == tfdata.TensorSpec((3,), "int64")
    assert Pipeline.range(10).batch(3).cardinality() == 4
    assert Pipeline.range(10).repeat().cardinality() == tfdata.INFINITE_CARDINALITY
    z = Pipeline.zip(Pipeline.range(3), Pipeline.range(3).map(fn.cast("float32")))
    assert z.element_spec == (tfdata.TensorSpec((), "int64"), tfdata.TensorSpec((), "float32"))
    assert list(z) == [(0, 0.0), (1, 1.0), (2, 2.0)]


def test_from_tensor_slices_numpy_and_strings():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    rows = list(Pipeline.from_tensor_slices(a))
    assert len(rows) == 4 and rows[1].dtype == np.float32 and rows[1].tolist() == [3.0, 4.0, 5.0]
    pairs = list(Pipeline.from_tensor_slices((np.array([1, 2]), np.array([b"a", b"b"]))))
    assert pairs == [(1, b"a"), (2, b"b")]
    assert list(Pipeline.from_tensor_slices(["x", "y"])) == [b"x", b"y"]
    strings = list(Pipeline.from_tensor_slices(np.array([["ab", "c"], ["d", "ef"]])))
    assert strings[0].dtype == object and strings[0].tolist() == [b"ab", b"c"]


def test_interleave_and_padded_batch(tmpdir_path):
    files = []
    for i in range(3):
        path = os.path.join(tmpdir_path, f"f{i}.tfrecord")
        tfdata.io.write_tfrecord(path, [f"{i}-{j}".encode() for j in range(2)])
        files.append(path)
    p = Pipeline.list_files(os.path.join(tmpdir_path, "*.tfrecord")).interleave(Pipeline().tfrecord(), cycle_length=3)
    assert list(p) == [b"0-0", b"1-0", b"2-0", b"0-1", b"1-1", b"2-1"]
    text = Pipeline.from_tensor_slices(["a b", "c d e"]).map(fn.tokenize())
    padded = list(text.padded_batch(2, padded_shape=[4]))
    assert padded[0].shape == (2, 4) and padded[0].tolist()[1] == [b"c", b"d", b"e", b""]


def test_parse_example_gives_dicts(tmpdir_path):
    path = os.path.join(tmpdir_path, "ex.tfrecord")
    tfdata.io.write_tfrecord(path, [tfdata.io.example(label=i, x=np.array([i, i + 0.5, 2.0], np.float32),
                                                      name=f"n{i}") for i in range(3)])
    p = Pipeline.tfrecord(path).map(fn.parse_example({"label": "int64", "x": {"dtype": "float32", "shape": [3]},
                                                      "name": "string"}))
    assert p.element_spec == {"label": tfdata.TensorSpec((), "int64", "label"),
                              "x": tfdata.TensorSpec((3,), "float32", "x"),
                              "name": tfdata.TensorSpec((), "string", "name")}
    got = list(p)
    assert [e["label"] for e in got] == [0, 1, 2]
    assert got[1]["x"].tolist() == [1.0, 1.5, 2.0] and got[2]["name"] == b"n2"
    same = Pipeline.tfrecord(path).map(fn.parse_example(tfdata.FeatureSpec("label", "int64"),
                                                        tfdata.FeatureSpec("name", np.bytes_)))
    assert [e["label"] for e in same] == [0, 1, 2]
    # select keeps names; a batch of dicts is a dict of batches.
    batched = list(p.map(fn.select([2, 0])).batch(3))
    assert list(batched[0]) == ["name", "label"] and batched[0]["label"].tolist() == [0, 1, 2]


def test_decode_jpeg_roundtrip(tmpdir_path):
    img = np.zeros((16, 24, 3), np.uint8)
    img[:, :, 0] = 200
    path = os.path.join(tmpdir_path, "img.tfrecord")
    tfdata.io.write_tfrecord(path, [tfdata.io.encode_jpeg(img, quality=95)] * 2)
    out = list(Pipeline.tfrecord(path).map(fn.decode_jpeg(channels=3), fn.resize(8, 12)))
    assert out[0].shape == (8, 12, 3) and out[0].dtype == np.float32
    assert abs(float(out[0][:, :, 0].mean()) - 200) < 4


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: Pipeline.range("10"), TypeError, r"range.stop: expected an int, got str"),
    (lambda: Pipeline.range(10).batch(2.5), TypeError, r"batch.batch_size: expected an int"),
    (lambda: Pipeline.range(10).batch(True), TypeError, r"batch.batch_size: expected an int, got bool"),
    (lambda: Pipeline.range(10).batch(4, sizes=3), ValueError, r"Batch has no field 'sizes'"),
    (lambda: Pipeline.range(10).batch(1, 2, 3), TypeError, r"at most 2 positional"),
    (lambda: fn.arith("pow", 2), ValueError, r"'pow' is not a ArithOp \(one of add, sub"),
    (lambda: fn.cast("complex64"), ValueError, r"not a DataType"),
    (lambda: Pipeline.range(10).map(3), TypeError, r"expected a function such as tfdata.fn"),
    (lambda: Pipeline.zip(Pipeline.range(2), 5), TypeError, r"expected a tfdata.Pipeline"),
    (lambda: fn.random_crop(2, 2, seed=-1), ValueError, r"random_crop.seed: must not be negative"),
    (lambda: Pipeline.range(2**70), ValueError, r"does not fit in 64 bits"),
    (lambda: fn.decode_jpeg(channels=2**40), ValueError, r"does not fit in 32 bits"),
    (lambda: Pipeline.from_text("op { range { stop: } }"), tfdata.InvalidArgumentError, r"<text>:1"),
    (lambda: Pipeline.from_text(5), TypeError, r"expected str"),
    (lambda: Pipeline.from_file("/nonexistent/p.pbtxt"), tfdata.NotFoundError, r"/nonexistent/p.pbtxt"),
    (lambda: Pipeline.range(10).batch(0).validate(), tfdata.InvalidArgumentError, r"op 1 \(batch\)"),
    (lambda: Pipeline.range(10).shuffle(-5).validate(), ValueError, r"op 1 \(shuffle\)"),
    (lambda: Pipeline().batch(2).validate(), tfdata.InvalidArgumentError, r"must start with a source"),
])
def test_bad_input_is_a_clear_error(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_every_function_kind_of_the_proto_is_in_fn():
    proto = open(os.path.join(SOURCE_DIR, "proto", "pipeline.proto")).read()
    block = proto[proto.index("message Function {"):proto.index("message ParseExample")]
    kinds = re.findall(r"^\s+\w+ (\w+) = \d+;", block, re.M)
    assert len(kinds) >= 15
    for kind in kinds:
        assert callable(getattr(fn, kind)), kind


def test_the_ops_and_functions_not_run_elsewhere(tmp_path):
    text = tmp_path / "lines.txt"
    text.write_text("a\nbb\nccc\n")
    assert list(Pipeline.text_line(str(text))) == [b"a", b"bb", b"ccc"]
    assert list(Pipeline.range(6).batch(3).unbatch()) == list(range(6))
    assert list(Pipeline.range(10).skip(2).take(3)) == [2, 3, 4]
    assert list(Pipeline.range(4).prefetch(2)) == [0, 1, 2, 3]
    assert list(Pipeline.range(3).cache().repeat(2)) == [0, 1, 2, 0, 1, 2]
    cached = tmp_path / "cache.bin"
    assert list(Pipeline.range(3).cache(filename=str(cached)).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert cached.exists()
    assert list(Pipeline.range(10).shard(num_shards=3, index=1)) == [1, 4, 7]
    image = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    (crop,) = list(Pipeline.from_tensor_slices(image[None]).map(fn.center_crop(height=2, width=2)))
    assert crop.shape == (2, 2, 3) and (crop == image[1:3, 2:4]).all()
    flips = [a for a in Pipeline.from_tensor_slices(np.repeat(image[None], 16, 0)).map(
        fn.random_flip_left_right(seed=3))]
    assert all((a == image).all() or (a == image[:, ::-1]).all() for a in flips)
    assert any((a == image[:, ::-1]).all() for a in flips) and any((a == image).all() for a in flips)
    assert list(Pipeline.range(3).map(fn.spin(10))) == [0, 1, 2]
