"""Functions for bench/python_functions.sh (loaded by workers with --python-module)."""

import numpy as np

import tfdata


@tfdata.function("bench_noop")
def noop(x):
    return x


@tfdata.function("bench_even")
def even(x):
    return x % 2 == 0


def augment(seed):
    """CPU-bound numpy work on a 224x224x3 image, about as costly as a few torchvision transforms."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (224, 224, 3), dtype=np.uint8).astype(np.float32)
    for _ in range(3):
        img = np.clip(img * 1.1 - 5.0, 0, 255)
        img = (img + np.roll(img, 1, axis=0) + np.roll(img, 1, axis=1)) / 3.0
    img = img[:, ::-1]
    return ((img - 127.5) / 64.0).astype(np.float32)


@tfdata.function("bench_augment")
def augment_fn(seed):
    return augment(int(seed))
