"""bench/python_functions.sh's measurements, side by side in one run (see that script)."""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import tfdata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_functions_module as m  # noqa: E402

SECS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_functions_module.py")


def rate(iterable_factory, min_elements=50):
    """Elements per second over about SECS, after one warm-up element."""
    it = iter(iterable_factory())
    next(it)
    n, start = 0, time.perf_counter()
    for _ in it:
        n += 1
        if n >= min_elements and time.perf_counter() - start >= SECS:
            break
    return n / (time.perf_counter() - start)


def service_rate(pipeline, helpers, n):
    dispatcher = tfdata.DispatchServer(host="127.0.0.1")
    worker = tfdata.WorkerServer(dispatcher_address=dispatcher.target, host="127.0.0.1",
                                 python_modules=[MODULE], python_helpers=helpers)
    try:
        ds = pipeline.apply(tfdata.distribute(processing_mode="parallel_epochs", service=dispatcher.target))
        return rate(lambda: ds.as_numpy_iterator())
    finally:
        worker.stop()
        dispatcher.stop()


def run_rate(function, helpers, parallel, estimate):
    """Elements/s of `tfdata run` (the pipeline consumed in the worker's process: no data plane),
    from two runs of different lengths, so that start-up (importing numpy in the helpers) cancels."""
    binary = os.environ.get("TFDATA_BINARY", os.path.join(os.path.dirname(MODULE), "..", "build", "tfdata"))
    with tempfile.NamedTemporaryFile("w", suffix=".pbtxt") as f:
        f.write('op { range { stop: 1000000000 } } '
                f'op {{ map {{ fn {{ python {{ name: "{function}" }} }} num_parallel_calls: {parallel} }} }}')
        f.flush()

        def timed(n):
            start = time.perf_counter()
            subprocess.run([binary, "run", f.name, "--take", str(n), "--format", "null", "-q", "--python-module",
                            MODULE, "--python", sys.executable, "--python-helpers", str(helpers)], check=True)
            return time.perf_counter() - start
        short, extra = 20, max(50, int(estimate * SECS))
        return extra / (timed(short + extra) - timed(short))


def torch_rate(workers):
    import torch

    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 20

        def __getitem__(self, i):
            return m.augment(i)

    extra = {"prefetch_factor": 8} if workers > 0 else {}
    loader = torch.utils.data.DataLoader(Images(), batch_size=None, num_workers=workers, **extra)
    return rate(lambda: loader)


def main():
    tfdata.set_log_level("error")
    scalars = tfdata.Pipeline.range(1 << 40)
    rows = []
    noop1 = service_rate(scalars.map(tfdata.py("bench_noop")), helpers=1, n=0)
    plain = service_rate(scalars, helpers=1, n=0)
    rows.append(("no function: int64 scalars read from Python (the reader's ceiling)", f"{plain / 1e3:.0f} k/s", ""))
    rows.append(("trivial function on int64 scalars, 1 helper, read from Python", f"{noop1 / 1e3:.0f} k calls/s", ""))
    noop_run = run_rate("bench_noop", 1, 1, noop1)
    rows.append(("trivial function on int64 scalars, 1 helper, tfdata run (no data plane)",
                 f"{noop_run / 1e3:.0f} k calls/s", ""))
    even1 = service_rate(scalars.filter(tfdata.py("bench_even")), helpers=1, n=0)
    rows.append(("filter with a Python predicate on int64 scalars, 1 helper", f"{even1 / 1e3:.0f} k elements/s", ""))
    images = tfdata.Pipeline.range(1 << 40)
    one = service_rate(images.map(tfdata.py("bench_augment")), helpers=1, n=0)
    two = service_rate(images.map(tfdata.py("bench_augment"), num_parallel_calls=2), helpers=2, n=0)
    rows.append(("numpy augment 224x224x3, 1 worker, 1 helper", f"{one:.0f} images/s", "1.00x"))
    rows.append(("numpy augment 224x224x3, 1 worker, num_parallel_calls 2, 2 helpers", f"{two:.0f} images/s",
                  f"{two / one:.2f}x"))
    run1 = run_rate("bench_augment", 1, 1, one)
    run2 = run_rate("bench_augment", 2, 2, two)
    rows.append(("numpy augment, tfdata run (no data plane), 1 helper", f"{run1:.0f} images/s", "1.00x"))
    rows.append(("numpy augment, tfdata run (no data plane), num_parallel_calls 2, 2 helpers", f"{run2:.0f} images/s",
                 f"{run2 / run1:.2f}x"))
    try:
        t0 = torch_rate(0)
        t2 = torch_rate(2)
        rows.append(("same function, torch DataLoader(num_workers=0)", f"{t0:.0f} images/s", f"{t0 / one:.2f}x"))
        rows.append(("same function, torch DataLoader(num_workers=2)", f"{t2:.0f} images/s", f"{t2 / one:.2f}x"))
        rows.append(("tfdata (2 helpers) / torch DataLoader(num_workers=2)", "", f"{two / t2:.2f}x"))
    except ImportError:
        rows.append(("torch DataLoader", "torch not installed (TFDATA_WITH_TORCH=1 scripts/python-env.sh)", ""))
    width = max(len(r[0]) for r in rows)
    for name, value, ratio in rows:
        print(f"{name:<{width}}  {value:>18}  {ratio}")


if __name__ == "__main__":
    main()
