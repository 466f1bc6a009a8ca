"""Measures one TensorFlow pipeline for bench/vs_tensorflow.sh and prints one JSON line: the
steady-state rate after a warm-up. Either through TF's service (--service TARGET: the reader is
this process, TF's distribute(); the pipeline runs on the service's workers) or in this process
(tf.data alone, on --threads threads).

The elements are pulled inside a tf.function (a graph while-loop), so Python's per-element cost
is not counted. That loop still costs about 50 us per element here, more than a scalar or a parsed
record costs TF to make, so the loop takes every 64th element (`shard(64, 0)`, which skips the
others inside tf.data, as TF's own dataset benchmarks do with `skip`); the 64 all count. Every
element still arrives (from the service too); the one taken is touched (its first value).

    python tf_read.py PIPELINE [--service grpc://HOST:PORT --mode parallel_epochs --compression none]
"""
import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402

import tf_pipelines  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pipeline")
    parser.add_argument("--service", help="TF's dispatcher target; without it, tf.data in this process")
    parser.add_argument("--mode", default="parallel_epochs", choices=["parallel_epochs", "distributed_epoch"])
    parser.add_argument("--compression", default="none", choices=["none", "auto"])
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args()
    threads = tf_pipelines.threads_of(args.pipeline)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    ds = tf_pipelines.by_name(args.pipeline)
    if args.service:
        ds = ds.apply(tf.data.experimental.service.distribute(
            processing_mode=args.mode, service=args.service,
            compression="AUTO" if args.compression == "auto" else None))
    else:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        options.autotune.enabled = False  # the pipeline's own parallelism, as tfdata's
        ds = ds.with_options(options)
    stride = 64
    it = iter(ds.shard(stride, 0))
    def first_of(e):  # the first component of an element (a tensor, tuple or dict)
        if isinstance(e, dict):
            return e[sorted(e)[0]]
        return e[0] if isinstance(e, tuple) else e

    first = first_of(ds.element_spec)
    element_bytes = first.shape.num_elements() * first.dtype.size if first.shape.is_fully_defined() else 0

    @tf.function
    def pull(n):
        touched = tf.constant(0, tf.float64)
        for _ in tf.range(n):
            x = tf.reshape(first_of(next(it)), [-1])[0]
            if x.dtype == tf.string:
                x = tf.strings.length(x)
            touched += tf.cast(x, tf.float64)
        return touched

    # A chunk is about 10 ms of work, so the clock is read rarely and a chunk ends near the deadline.
    chunk = 1
    start = time.perf_counter()
    while time.perf_counter() - start < args.warmup:
        t = time.perf_counter()
        pull(tf.constant(chunk))
        if time.perf_counter() - t < 0.01:
            chunk *= 2
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.duration:
        pull(tf.constant(chunk))
        n += chunk * stride
    elapsed = time.perf_counter() - t0
    print(json.dumps({"elements": n, "seconds": elapsed, "elements_per_s": n / elapsed,
                      "bytes_per_s": n * element_bytes / elapsed}))


if __name__ == "__main__":
    main()
