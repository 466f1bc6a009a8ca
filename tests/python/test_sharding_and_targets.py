"""Every processing mode from Python: the static sharding policies over a fixed worker list,
target_workers, and coordinated reads in distributed_epoch."""

import os
import socket
import threading

import pytest

import tfdata
from tfdata import Pipeline
from conftest import Cluster, wait_for


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def fixed_cluster():
    """A dispatcher with the fixed list of its two workers (what static sharding needs)."""
    ports = [_free_port(), _free_port()]
    dispatcher = tfdata.DispatchServer(host="127.0.0.1", worker_addresses=[f"localhost:{p}" for p in ports])
    workers = [tfdata.WorkerServer(dispatcher.target, port=p, host="127.0.0.1", heartbeat_interval_ms=100)
               for p in ports]
    wait_for(lambda: dispatcher.num_workers == 2)
    yield dispatcher
    for w in workers:
        w.stop()
    dispatcher.stop()


@pytest.fixture(scope="module")
def record_files(tmp_path_factory):
    """Four TFRecord files of 5 records each: b"f<file>-r<record>"."""
    d = tmp_path_factory.mktemp("records")
    paths = []
    for f in range(4):
        path = str(d / f"part-{f}.tfrecord")
        tfdata.io.write_tfrecord(path, [f"f{f}-r{r}".encode() for r in range(5)])
        paths.append(path)
    return paths


def _all_records():
    return sorted(f"f{f}-r{r}".encode() for f in range(4) for r in range(5))


@pytest.mark.parametrize("policy", [tfdata.ShardingPolicy.FILE, tfdata.ShardingPolicy.FILE_OR_DATA, "file",
                                    "file_or_data"])
def test_file_sharding_reads_every_record_once(fixed_cluster, record_files, policy):
    dataset_id = tfdata.register_dataset(fixed_cluster, Pipeline.tfrecord(*record_files))
    got = list(tfdata.from_dataset_id(policy, fixed_cluster, dataset_id))
    assert sorted(got) == _all_records()


def test_file_sharding_with_list_files(fixed_cluster, record_files):
    pattern = os.path.join(os.path.dirname(record_files[0]), "part-*.tfrecord")
    p = Pipeline.list_files(pattern).interleave(Pipeline().tfrecord(), cycle_length=2)
    got = list(tfdata.from_dataset_id("file", fixed_cluster, tfdata.register_dataset(fixed_cluster, p)))
    assert sorted(got) == _all_records()


def test_file_or_data_on_a_range_shards_the_data(fixed_cluster):
    dataset_id = tfdata.register_dataset(fixed_cluster, Pipeline.range(30))
    got = list(tfdata.from_dataset_id(tfdata.ShardingPolicy.FILE_OR_DATA, fixed_cluster, dataset_id))
    assert sorted(got) == list(range(30))


def test_hint_sharding_fills_in_the_shard_op(fixed_cluster):
    p = Pipeline.range(40).shard(num_shards=1, index=0, hint=True)
    dataset_id = tfdata.register_dataset(fixed_cluster, p)
    # Read outside the service, the hint is a shard(1, 0): everything.
    assert list(p) == list(range(40))
    got = list(tfdata.from_dataset_id(tfdata.ShardingPolicy.HINT, fixed_cluster, dataset_id))
    assert sorted(got) == list(range(40))  # each worker its half: every element once, not twice


def test_file_sharding_with_too_few_files_is_an_error(fixed_cluster, record_files):
    dataset_id = tfdata.register_dataset(fixed_cluster, Pipeline.tfrecord(record_files[0]))
    with pytest.raises(tfdata.InvalidArgumentError, match="every worker needs at least one file"):
        list(tfdata.from_dataset_id("file", fixed_cluster, dataset_id))


def test_static_sharding_needs_a_worker_list(cluster):
    dataset_id = tfdata.register_dataset(cluster.target, Pipeline.range(3))
    with pytest.raises(tfdata.Error, match="--worker-addresses"):
        list(tfdata.from_dataset_id("data", cluster.target, dataset_id))


def test_target_workers_any_reads_every_worker(cluster2):
    dataset_id = tfdata.register_dataset(cluster2.target, Pipeline.range(15))
    got = list(tfdata.from_dataset_id("parallel_epochs", cluster2.target, dataset_id, target_workers="ANY"))
    assert sorted(got) == sorted(list(range(15)) * 2)
    # AUTO in a process that runs workers means LOCAL, and both workers are local: the same.
    got = list(tfdata.from_dataset_id("parallel_epochs", cluster2.target, dataset_id, target_workers="auto"))
    assert sorted(got) == sorted(list(range(15)) * 2)


def test_a_worker_tag_no_worker_has_is_an_error_naming_the_workers(cluster):
    dataset_id = tfdata.register_dataset(cluster.target, Pipeline.range(3))
    with pytest.raises(tfdata.Error, match="gpu") as e:
        list(tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id, worker_tag="gpu"))
    assert cluster.workers[0].worker_address in str(e.value)


def test_coordinated_reads_in_distributed_epoch():
    c = Cluster(num_workers=2)
    try:
        dataset_id = tfdata.register_dataset(c.target, Pipeline.range(100000).repeat())
        results = {}

        def consume(index):
            ds = tfdata.from_dataset_id("distributed_epoch", c.target, dataset_id, job_name="de-rounds",
                                        consumer_index=index, num_consumers=2)
            with iter(ds) as it:
                results[index] = [int(next(it)) for _ in range(40)]

        threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 2
        # The workers share the splits: no element goes to both consumers, and none twice to one.
        both = results[0] + results[1]
        assert len(set(both)) == len(both) == 80
    finally:
        c.stop()
