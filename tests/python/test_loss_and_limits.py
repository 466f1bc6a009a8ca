"""A read never ends silently short: lost data is a DataLossWarning (the CLI's exit code 4), a read
that got nothing because every worker was unreachable is an UnavailableError. And the limits a
worker sets from Python: allowed_paths, the memory of Pipeline.run()."""

import os
import re
import subprocess
import warnings

import numpy as np
import pytest

import tfdata
from tfdata import Pipeline, fn
from conftest import Cluster, tfdata_binary, wait_for


def test_a_read_that_loses_a_worker_ends_with_a_data_loss_warning():
    c = Cluster(num_workers=2)
    try:
        # 20 ms per element: each worker's pass takes about 0.8 s, so one can be stopped midway.
        p = Pipeline.range(40).map(fn.sleep(20_000))
        it = iter(p.apply(tfdata.distribute("parallel_epochs", c.target)))
        got = [next(it) for _ in range(4)]
        lost = c.workers[1]
        lost_address = lost.worker_address
        lost.stop()
        with pytest.warns(tfdata.DataLossWarning) as record:
            got += list(it)
        message = str(record[0].message)
        assert re.fullmatch(rf"tfdata: the read lost data: 1 task\(s\) dropped: worker unreachable: "
                            rf"{re.escape(lost_address)}", message), message
        assert len(got) < 80  # the stopped worker's pass was cut short
        stats = it.stats()
        assert stats["tasks_dropped"] == 1 and stats["dropped_workers"] == [lost_address]
    finally:
        c.stop()


def test_a_data_loss_warning_can_be_made_an_error():
    c = Cluster(num_workers=2)
    try:
        it = iter(Pipeline.range(40).map(fn.sleep(20_000)).apply(tfdata.distribute("parallel_epochs", c.target)))
        next(it)
        c.workers[0].stop()
        with warnings.catch_warnings():
            warnings.simplefilter("error", tfdata.DataLossWarning)
            with pytest.raises(tfdata.DataLossWarning, match="1 task\\(s\\) dropped"):
                for _ in it:
                    pass
    finally:
        c.stop()


def test_a_full_read_has_no_warning_and_no_dropped_workers(cluster):
    it = iter(Pipeline.range(10).apply(tfdata.distribute("parallel_epochs", cluster.target)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(it) == list(range(10))
    assert it.stats()["dropped_workers"] == []


def test_a_read_of_only_unreachable_workers_is_an_error_with_the_cli_message():
    c = Cluster(num_workers=1)
    try:
        dataset_id = tfdata.register_dataset(c.target, Pipeline.range(10))
        dead = c.workers[0].worker_address
        c.workers[0].stop(leave=False)  # a crash: the dispatcher lists it until --worker-timeout
        with pytest.raises(tfdata.UnavailableError) as e:
            list(tfdata.from_dataset_id("parallel_epochs", c.target, dataset_id))
        assert dead in str(e.value)
        out = subprocess.run([tfdata_binary(), "read", "--dispatcher", c.target, "--dataset-id", dataset_id,
                              "--format", "null"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, out.stderr
        cli = re.search(r"tfdata: error: (.*)", out.stderr).group(1)
        assert re.sub(r"task \d+", "task N", str(e.value)) == re.sub(r"task \d+", "task N", cli)
    finally:
        c.stop()


def test_a_read_from_an_unreachable_dispatcher_has_the_cli_message():
    with pytest.raises(tfdata.UnavailableError) as e:
        list(tfdata.from_dataset_id("parallel_epochs", "localhost:1", "1"))
    out = subprocess.run([tfdata_binary(), "read", "--dispatcher", "localhost:1", "--dataset-id", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert str(e.value) == re.search(r"tfdata: error: (.*)", out.stderr).group(1)


def test_worker_allowed_paths(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    inside = data / "ok.tfrecord"
    tfdata.io.write_tfrecord(str(inside), [b"a", b"b"])
    outside = tmp_path / "secret.tfrecord"
    tfdata.io.write_tfrecord(str(outside), [b"secret"])
    os.symlink(outside, data / "link.tfrecord")
    c = Cluster(num_workers=0, allowed_paths=[str(data)])
    try:
        c.add_worker(allowed_paths=[str(data)])
        assert list(Pipeline.tfrecord(str(inside)).apply(tfdata.distribute("parallel_epochs", c.target))) == \
            [b"a", b"b"]
        for path in (outside, data / "link.tfrecord", "/etc/passwd"):
            ds = Pipeline.tfrecord(str(path)).apply(tfdata.distribute("parallel_epochs", c.target))
            with pytest.raises(tfdata.PermissionDeniedError, match="outside the allowed paths"):
                list(ds)
        # The dispatcher lists files for distributed_epoch: its own allowed_paths bound list_files.
        ds = Pipeline.list_files(str(tmp_path / "*.tfrecord")).apply(
            tfdata.distribute("distributed_epoch", c.target))
        with pytest.raises(tfdata.Error, match=r"op 0 \(list_files\): .*secret.tfrecord is outside the allowed paths"):
            list(ds)
    finally:
        c.stop()


@pytest.mark.parametrize("config, error, pattern", [
    (dict(allowed_paths="/data"), TypeError, "allowed_paths"),
    (dict(allowed_paths=[3]), TypeError, "allowed_paths"),
    (dict(allowed_paths=["/no/such/directory"]), tfdata.InvalidArgumentError, "no such directory"),
])
def test_bad_allowed_paths(cluster, config, error, pattern):
    with pytest.raises(error, match=pattern):
        tfdata.WorkerServer(cluster.target, host="127.0.0.1", **config)
    with pytest.raises(error, match=pattern):
        tfdata.DispatchServer(host="127.0.0.1", **config)


def test_run_max_memory():
    p = Pipeline.range(100).batch(10)
    assert len(list(p.run(max_memory=1 << 20))) == 10
    with pytest.raises(tfdata.ResourceExhaustedError, match=r"op 2 \(batch\): a batch of 1048576 int64\[\] elements needs 8.0 MiB, over the memory limit \(run max_memory\) of 1.0 MiB"):
        next(Pipeline.range(100).repeat().batch(1 << 20).run(max_memory=1 << 20))
    with pytest.raises(ValueError, match="max_memory"):
        Pipeline.range(3).run(max_memory=0)
    with pytest.raises(TypeError, match="max_memory"):
        Pipeline.range(3).run(max_memory="1G")


def test_write_tfrecord_refuses_a_single_string(tmp_path):
    with pytest.raises(TypeError, match="records"):
        tfdata.io.write_tfrecord(str(tmp_path / "x.tfrecord"), "abc")


def test_a_worker_that_leaves_is_removed_at_once_and_one_that_crashes_is_not():
    c = Cluster(num_workers=3)
    try:
        assert c.dispatcher.num_workers == 3
        c.workers[0].stop()  # leave=True: it tells the dispatcher
        assert c.dispatcher.num_workers == 2
        c.workers[1].stop(leave=False)  # as a crash: listed until worker_timeout_ms
        assert c.dispatcher.num_workers == 2
        # A new read is not given the worker that left.
        ds = Pipeline.range(5).apply(tfdata.distribute("parallel_epochs", c.target))
        it = iter(ds)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = list(it)
        # The crashed one is still listed: its task is dropped (that loss is reported).
        assert sorted(got) == list(range(5))
        assert it.stats()["dropped_workers"] == [c.workers[1].worker_address]
        assert any(issubclass(w.category, tfdata.DataLossWarning) for w in caught)
    finally:
        c.stop()
