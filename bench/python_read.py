"""Reads a pipeline through the service from Python, touching each element, and prints one JSON
line: steady-state rate after a warm-up, and where the time went (bench/python.sh runs it).

    python bench/python_read.py PIPELINE --dispatcher HOST:PORT [--duration 4] [--warmup 1] [--transfer auto]
        [--mode parallel_epochs] [--compression none]
"""
import argparse
import json
import time

import numpy as np

import tfdata


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pipeline")
    parser.add_argument("--dispatcher", required=True)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--source", choices=["service", "local"], default="service",
                        help="local: pipeline.run() in this process (no service), for the per-element cost")
    parser.add_argument("--transfer", choices=["auto", "grpc", "shm"], default="auto",
                        help="the data plane (data_transfer_protocol)")
    parser.add_argument("--mode", choices=["parallel_epochs", "distributed_epoch"], default="parallel_epochs")
    parser.add_argument("--compression", choices=["none", "snappy", "auto"], default="none",
                        help="the registered dataset's compression")
    args = parser.parse_args()
    pipeline = tfdata.Pipeline.from_file(args.pipeline)
    if args.source == "service":
        compression = None if args.compression == "none" else args.compression.upper()
        dataset_id = tfdata.register_dataset(args.dispatcher, pipeline, compression=compression)
        it = iter(tfdata.from_dataset_id(args.mode, args.dispatcher, dataset_id,
                                         data_transfer_protocol=args.transfer))
    else:
        it = pipeline.run()
    start = time.perf_counter()
    # Warm-up: job start-up (the worker learns of its task at its next heartbeat) is not counted.
    while time.perf_counter() - start < args.warmup:
        next(it)
    s0 = it.stats()
    t0 = time.perf_counter()
    n = nbytes = 0
    touched = 0
    end = t0 + args.duration
    # Check the clock every 256 elements: perf_counter costs as much as a scalar element.
    while True:
        for _ in range(256):
            e = next(it)
            if isinstance(e, np.ndarray):
                touched += int(e.flat[0])  # touch the element: read its first value
                nbytes += e.nbytes
            else:
                touched += e
                nbytes += 8
        n += 256
        if time.perf_counter() >= end:
            break
    elapsed = time.perf_counter() - t0
    s1 = it.stats()
    it.close()
    waited = s1.get("wait_seconds", 0.0) - s0.get("wait_seconds", 0.0)
    print(json.dumps({
        "elements": n, "bytes": nbytes, "seconds": elapsed,
        "elements_per_s": n / elapsed, "bytes_per_s": nbytes / elapsed,
        # Time __next__ spent waiting for the data plane (GIL released), and the rest: Python's
        # loop, the conversion to numpy, and taking the element from the reader's buffer.
        "wait_seconds": waited,
        "python_us_per_element": (elapsed - waited) / n * 1e6,
    }))


if __name__ == "__main__":
    main()
