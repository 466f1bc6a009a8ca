"""The shared-memory data plane from Python: a worker process on this host, read through shared
memory (data_transfer_protocol "shm", and "auto", the default, which picks it)."""
import numpy as np
import pytest

import tfdata

from conftest import ProcessCluster

# int64[8192] per element: 64 KiB, so the arrays alias the reader's shared region.
PIPELINE = tfdata.Pipeline.range(8192 * 40).batch(8192)


@pytest.mark.parametrize("protocol", ["shm", "auto", None, "grpc"])
def test_values_and_writable_arrays(process_cluster, protocol):
    dataset_id = tfdata.register_dataset(process_cluster.target, PIPELINE)
    ds = tfdata.from_dataset_id("parallel_epochs", process_cluster.target, dataset_id,
                                data_transfer_protocol=protocol)
    batches = list(ds)
    assert len(batches) == 40
    for i, b in enumerate(batches):
        assert b.dtype == np.int64 and b.shape == (8192,)
        assert b[0] == i * 8192 and b[-1] == i * 8192 + 8191
    # The reader's own memory, as over gRPC: a consumer may change it in place, and only its
    # own array changes.
    batches[0][0] = -1
    assert batches[0][0] == -1
    assert batches[1][0] == 8192
    assert batches[0].flags.writeable


def test_arrays_outlive_the_reader(process_cluster):
    dataset_id = tfdata.register_dataset(process_cluster.target, PIPELINE)
    it = iter(tfdata.from_dataset_id("parallel_epochs", process_cluster.target, dataset_id,
                                     data_transfer_protocol="shm"))
    kept = [next(it) for _ in range(5)]
    it.close()
    del it
    assert [int(b[0]) for b in kept] == [0, 8192, 16384, 24576, 32768]


def test_shm_to_a_worker_without_it_names_the_reason(tmpdir_path):
    cluster = ProcessCluster(tmpdir_path, worker_args=["--no-shared-memory"])
    try:
        dataset_id = tfdata.register_dataset(cluster.target, tfdata.Pipeline.range(10))
        with pytest.raises(tfdata.UnavailableError, match="could not be reached"):
            list(tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id,
                                        data_transfer_protocol="shm"))
        # auto reads it over gRPC.
        assert list(tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id)) == list(range(10))
    finally:
        cluster.stop()


def test_an_unknown_protocol_is_a_value_error(process_cluster):
    with pytest.raises(ValueError, match="'auto', 'grpc', 'shm', 'local'"):
        tfdata.from_dataset_id("parallel_epochs", process_cluster.target, "1", data_transfer_protocol="udp")
