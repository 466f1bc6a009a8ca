"""Writing data in the formats pipelines read, without TensorFlow: TFRecord files of
tf.train.Example records, and JPEG images.

    records = [tfdata.io.example(image=tfdata.io.encode_jpeg(img), label=3) for img in images]
    tfdata.io.write_tfrecord("/data/train-0.tfrecord", records)
"""

import os

import numpy as np

from tfdata import _native


def write_tfrecord(path, records, compression=None):
    """Writes `records` (bytes or str each) to a TFRecord file; compression None, "GZIP" or "ZLIB"."""
    if isinstance(records, (str, bytes)):
        raise TypeError("write_tfrecord: records must be a list of records (bytes or str), not one "
                        f"{type(records).__name__}")
    _native.write_tfrecord(os.fspath(path), list(records), (compression or "none").lower())


def _feature(name, value):
    if isinstance(value, (bytes, str)):
        return ("bytes", [value])
    arr = np.asarray(value)
    if arr.dtype.kind in "biu":
        return ("int64", [int(v) for v in arr.reshape(-1)])
    if arr.dtype.kind == "f":
        return ("float", [float(v) for v in arr.reshape(-1)])
    if arr.dtype.kind in "USO":
        return ("bytes", [v if isinstance(v, (bytes, str)) else bytes(v) for v in arr.reshape(-1)])
    raise TypeError(f"example: feature '{name}' has unsupported type {arr.dtype}")


def example(features=None, **kwargs):
    """A serialized tf.train.Example: ints and bools as int64_list, floats as float_list, bytes and
    str as bytes_list; numpy arrays are flattened (row-major)."""
    all_features = dict(features or {}, **kwargs)
    return _native.serialize_example({name: _feature(name, v) for name, v in all_features.items()})


def encode_jpeg(image, quality=90):
    """JPEG bytes of a uint8 image [height, width, 1 or 3] (a numpy array)."""
    arr = np.ascontiguousarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3:
        raise ValueError(f"encode_jpeg: expected a uint8 array [height, width, channels], got "
                         f"{arr.dtype}{list(arr.shape)}")
    return _native.encode_jpeg(arr.tobytes(), arr.shape[0], arr.shape[1], arr.shape[2], int(quality))
