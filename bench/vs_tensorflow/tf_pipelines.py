"""The TensorFlow twins of the tfdata pipelines that bench/vs_tensorflow.sh compares: the same
sources, sizes and operations as the bench/pipelines/*.pbtxt files named beside each."""
import os

import tensorflow as tf
from tensorflow.python.data.experimental.ops import testing

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(REPO, "build", "bench-data", "*.tfrecord")


def service_1mib_cached():  # service_1mib_cached.pbtxt: one int64[131072] (1 MiB), replayed
    return tf.data.Dataset.from_tensors(tf.range(131072, dtype=tf.int64)).repeat()


def service_scalars():  # service_scalars.pbtxt
    return tf.data.Dataset.range(10**9)


def sleep_2ms():  # the scaling rows: a latency-bound map, 2 ms per element, one at a time
    return tf.data.Dataset.range(10**9).apply(testing.sleep(2000))


def range_batch():  # range_batch.pbtxt
    return tf.data.Dataset.range(2**63 - 1).batch(1024)


def _files():
    return tf.data.Dataset.list_files(DATA, shuffle=False)


def _parse(record):
    return tf.io.parse_single_example(record, {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "weights": tf.io.FixedLenFeature([4], tf.float32),
    })


def _jpeg(record):
    f = tf.io.parse_single_example(record, {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    })
    image = tf.io.decode_jpeg(f["image"], channels=3)
    return tf.image.resize(image, [224, 224]), f["label"]


def _calls(threads):  # one thread: a plain map, as a TF user writes it (tfdata: num_parallel_calls 1)
    return None if threads == 1 else threads


def tfrecord_parse(threads):  # tfrecord_parse_p{1,2}.pbtxt
    return tf.data.TFRecordDataset(_files()).map(_parse, num_parallel_calls=_calls(threads)).repeat()


def jpeg_resize(threads):  # jpeg_resize_p{1,2}.pbtxt
    return tf.data.TFRecordDataset(_files()).map(_jpeg, num_parallel_calls=_calls(threads)).repeat()


def by_name(name):
    table = {
        "service_1mib_cached": service_1mib_cached,
        "service_scalars": service_scalars,
        "sleep_2ms": sleep_2ms,
        "range_batch": range_batch,
        "tfrecord_parse_p1": lambda: tfrecord_parse(1),
        "tfrecord_parse_p2": lambda: tfrecord_parse(2),
        "jpeg_resize_p1": lambda: jpeg_resize(1),
        "jpeg_resize_p2": lambda: jpeg_resize(2),
    }
    return table[name]()


def threads_of(name):
    return 2 if name.endswith("_p2") else 1
