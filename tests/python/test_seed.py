"""The seed example of tf.data service, with tfdata in place of tf.data.experimental.service."""

import os
import subprocess
import sys

from conftest import SOURCE_DIR


def test_seed_example_as_written():
    import tfdata as service  # the example's one change: tfdata for tf.data.experimental.service
    import tfdata as tf_data

    dispatcher = service.DispatchServer()
    dispatcher_address = dispatcher.target.split("://")[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher_address))
    dataset = tf_data.Dataset.range(10)
    dataset = dataset.apply(service.distribute(processing_mode="parallel_epochs", service=dispatcher.target))
    assert list(dataset.as_numpy_iterator()) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    worker.stop()
    dispatcher.stop()


def test_seed_example_file_prints_the_list():
    path = os.path.join(SOURCE_DIR, "examples", "python", "seed.py")
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"


def test_example_distributed_epoch_over_tfrecord():
    path = os.path.join(SOURCE_DIR, "examples", "python", "distributed_epoch_tfrecord.py")
    out = subprocess.run([sys.executable, path, "--files", "6", "--records", "50"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "read 300 records of 300; 300 exactly once"


def test_example_jax_feed():
    import pytest
    pytest.importorskip("jax")
    path = os.path.join(SOURCE_DIR, "examples", "python", "jax_feed.py")
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "sum of 2x over range(64)" in out.stdout and "4032.0" in out.stdout
