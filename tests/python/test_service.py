"""Reading through the service from Python: every call, every mode, the guarantees, the errors."""

import gc
import os
import re
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import tfdata
from tfdata import fn, Pipeline
from conftest import Cluster, tfdata_binary, wait_for


def read_all(dataset):
    return list(dataset)


def test_register_dataset_ids(cluster):
    p = Pipeline.range(7)
    a = tfdata.register_dataset(cluster.target, p)
    assert isinstance(a, str) and a
    assert tfdata.register_dataset(cluster.target, p) == a  # the same pipeline: the same id
    assert tfdata.register_dataset(cluster.target, p.to_text()) == a  # text works too
    assert tfdata.register_dataset(cluster.target, Pipeline.range(8), dataset_id="eight") == "eight"
    with pytest.raises(tfdata.AlreadyExistsError, match="eight"):
        tfdata.register_dataset(cluster.target, Pipeline.range(9), dataset_id="eight")
    # The same pipeline with other compression is another dataset.
    assert tfdata.register_dataset(cluster.target, p, compression=None) != a
    assert tfdata.register_dataset(cluster.dispatcher, p) == a  # a DispatchServer as the service
    assert tfdata.register_dataset(("grpc", cluster.target.split("://")[1]), p) == a


def test_register_a_pipeline_file(cluster):
    from conftest import SOURCE_DIR
    path = os.path.join(SOURCE_DIR, "examples", "range.pbtxt")
    ds = tfdata.from_dataset_id("parallel_epochs", cluster.target, tfdata.register_dataset(cluster.target, path))
    assert read_all(ds) == list(range(10))


def test_from_dataset_id_knows_the_spec_before_the_first_element(cluster):
    dataset_id = tfdata.register_dataset(cluster.target, Pipeline.range(10).batch(4, drop_remainder=True))
    ds = tfdata.from_dataset_id(tfdata.ShardingPolicy.OFF, cluster.target, dataset_id)
    assert ds.element_spec == tfdata.TensorSpec((4,), "int64")
    assert ds.cardinality() == 2
    assert ds.pipeline.to_text() == Pipeline.range(10).batch(4, drop_remainder=True).to_text()
    assert [a.tolist() for a in ds] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [a.tolist() for a in ds] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # each iteration is a new reader


def test_parallel_epochs_two_workers_give_each_element_twice(cluster2):
    ds = Pipeline.range(50).apply(tfdata.distribute("parallel_epochs", cluster2.target))
    assert sorted(read_all(ds)) == sorted(list(range(50)) * 2)


def test_distributed_epoch_is_exactly_once(cluster2):
    ds = Pipeline.range(5000).apply(tfdata.distribute("distributed_epoch", cluster2.target))
    got = read_all(ds)
    assert sorted(got) == list(range(5000))
    ds = Pipeline.range(300).map(fn.arith("mul", 3)).batch(7).apply(
        tfdata.distribute(tfdata.ShardingPolicy.DYNAMIC, cluster2.target, max_outstanding_requests=2))
    got = np.concatenate(read_all(ds))
    assert sorted(got.tolist()) == [3 * i for i in range(300)]


def test_a_shared_job_splits_the_elements_between_its_readers(cluster2):
    dataset_id = tfdata.register_dataset(cluster2.target, Pipeline.range(400))
    ds = tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id, job_name="shared-job")
    a, b = iter(ds), iter(ds)
    got_a, got_b = [], []
    done_a = done_b = False
    while not (done_a and done_b):
        for it, got, name in ((a, got_a, "a"), (b, got_b, "b")):
            if (name == "a" and done_a) or (name == "b" and done_b):
                continue
            try:
                got.append(next(it))
            except StopIteration:
                if name == "a":
                    done_a = True
                else:
                    done_b = True
    # Readers of their own jobs would get 400 elements each: the job is shared, each element once.
    assert sorted(got_a + got_b) == list(range(400))


def test_coordinated_reads_two_consumers(cluster):
    dataset_id = tfdata.register_dataset(cluster.target, Pipeline.range(1000000).repeat())
    results = {}

    def consume(index):
        ds = tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id, job_name="rounds",
                                    consumer_index=index, num_consumers=2)
        with iter(ds) as it:
            results[index] = [next(it) for _ in range(20)]

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # One worker: every round is two consecutive elements of its stream, (2k, 2k+1) for some k;
    # consumer i gets the i-th of each round, and both see the rounds in the same order.
    assert all(a % 2 == 0 and b == a + 1 for a, b in zip(results[0], results[1])), results
    assert len(set(results[0])) == 20


def test_cross_trainer_cache_each_trainer_reads_the_stream(cluster):
    dataset_id = tfdata.register_dataset(cluster.target, Pipeline.range(100000).repeat())
    its = [iter(tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id, job_name="ctc",
                                       cross_trainer_cache=tfdata.CrossTrainerCache(f"trainer {i}")))
           for i in range(2)]
    seqs = [[], []]
    for _ in range(30):
        for i in range(2):
            seqs[i].append(next(its[i]))
    for it in its:
        it.close()
    assert seqs[0] == seqs[1] == list(range(30))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_static_sharding_data(tmpdir_path):
    ports = [_free_port(), _free_port()]
    addresses = [f"localhost:{p}" for p in ports]
    dispatcher = tfdata.DispatchServer(host="127.0.0.1", worker_addresses=addresses)
    workers = [tfdata.WorkerServer(dispatcher.target, port=p, host="127.0.0.1", heartbeat_interval_ms=100)
               for p in ports]
    try:
        wait_for(lambda: dispatcher.num_workers == 2)
        dataset_id = tfdata.register_dataset(dispatcher, Pipeline.range(100))
        got = read_all(tfdata.from_dataset_id(tfdata.ShardingPolicy.DATA, dispatcher, dataset_id))
        assert sorted(got) == list(range(100))
    finally:
        for w in workers:
            w.stop()
        dispatcher.stop()


def test_worker_tags_and_target_workers():
    c = Cluster(num_workers=0)
    try:
        c.add_worker(worker_tags=["fast"])
        c.add_worker(worker_tags=["slow"])
        dataset_id = tfdata.register_dataset(c.target, Pipeline.range(20))
        got = read_all(tfdata.from_dataset_id("parallel_epochs", c.target, dataset_id, worker_tag="fast"))
        assert sorted(got) == list(range(20))  # one worker's stream, not two
        got = read_all(tfdata.from_dataset_id("parallel_epochs", c.target, dataset_id, target_workers="LOCAL"))
        assert sorted(got) == sorted(list(range(20)) * 2)  # both workers are in this process
    finally:
        c.stop()


def test_local_data_transfer_protocol(cluster):
    dataset_id = tfdata.register_dataset(cluster.target, Pipeline.range(30).batch(10))
    ds = tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id, data_transfer_protocol="local")
    got = read_all(ds)
    assert [a.tolist() for a in got] == [list(range(0, 10)), list(range(10, 20)), list(range(20, 30))]
    assert not got[0].flags.writeable  # the worker's own buffers: shared, so read-only


def test_compression_snappy_round_trips(cluster):
    p = Pipeline.from_tensor_slices(np.zeros((4, 1 << 17), np.int64)).map(fn.arith("add", 7))
    ds = p.apply(tfdata.distribute("parallel_epochs", cluster.target, compression="snappy"))
    got = read_all(ds)
    assert len(got) == 4 and all((a == 7).all() and a.shape == (1 << 17,) for a in got)


def test_dicts_from_parse_example_through_the_service(cluster, tmpdir_path):
    path = os.path.join(tmpdir_path, "ex.tfrecord")
    tfdata.io.write_tfrecord(path, [tfdata.io.example(label=i, w=[0.5 * i, 1.0]) for i in range(5)])
    p = Pipeline.tfrecord(path).map(fn.parse_example({"label": "int64", "w": {"dtype": "float32", "shape": [2]}}))
    ds = p.apply(tfdata.distribute("parallel_epochs", cluster.target))
    assert ds.element_spec == {"label": tfdata.TensorSpec((), "int64", "label"),
                               "w": tfdata.TensorSpec((2,), "float32", "w")}
    got = read_all(ds)
    assert [e["label"] for e in got] == [0, 1, 2, 3, 4]
    assert got[3]["w"].tolist() == [1.5, 1.0]


def test_zero_copy_arrays_point_into_the_received_buffer(cluster):
    n = 1 << 17  # 1 MiB of int64
    p = Pipeline.from_tensor_slices(np.arange(4 * n, dtype=np.int64).reshape(4, n))
    # Over gRPC: the in-process workers would otherwise be read in process ("auto").
    ds = p.apply(tfdata.distribute("parallel_epochs", cluster.target, compression=None,
                                   data_transfer_protocol="grpc"))
    it = iter(ds)
    arrays = [next(it), next(it)]
    for a in arrays:
        owner = a.base
        assert isinstance(owner, tfdata._native.TensorBuffer)
        address = a.__array_interface__["data"][0]
        assert address == owner.data_address
        assert owner.buffer_address <= address and address + a.nbytes <= owner.buffer_address + owner.buffer_size
        # Inside the received message, behind its frame header: a copy would be a block of its own
        # that starts at the data and is exactly as large.
        assert address > owner.buffer_address and owner.buffer_size > a.nbytes
        assert a.flags.writeable  # the received message belongs to this array alone
    it.close()
    del it, ds
    gc.collect()
    # The buffers outlive the reader: the values are still there.
    assert arrays[0][5] == 5 and arrays[1][-1] == 2 * n - 1
    assert int(arrays[1].sum()) == sum(range(n, 2 * n))


def test_closing_or_collecting_the_iterator_releases_the_job():
    c = Cluster(num_workers=1, job_gc_timeout_ms=200, client_timeout_ms=60000)
    try:
        dataset_id = tfdata.register_dataset(c.target, Pipeline.range(10).repeat())
        ds = tfdata.from_dataset_id("parallel_epochs", c.target, dataset_id)
        it = iter(ds)
        assert next(it) == 0
        time.sleep(0.6)  # longer than the GC timeout: a reader that is still open keeps its job
        assert c.workers[0].num_tasks == 1
        it.close()
        wait_for(lambda: c.workers[0].num_tasks == 0)
        with pytest.raises(StopIteration):
            next(it)
        it = iter(ds)
        assert next(it) == 0
        wait_for(lambda: c.workers[0].num_tasks == 1)
        del it
        gc.collect()
        wait_for(lambda: c.workers[0].num_tasks == 0)
    finally:
        c.stop()


def test_keyboard_interrupt_stops_a_blocked_read(cluster):
    # One element every 10 s (the most a sleep may ask): __next__ blocks waiting for the first.
    p = Pipeline.range(10).map(fn.sleep(10_000_000))
    ds = tfdata.from_dataset_id("parallel_epochs", cluster.target, tfdata.register_dataset(cluster.target, p))
    it = iter(ds)
    sent = []
    timer = threading.Timer(0.5, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT)))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(it)
    elapsed = time.monotonic() - sent[0]
    assert elapsed < 0.5, f"KeyboardInterrupt took {elapsed:.3f} s"
    it.close()


def _cli_error(args):
    out = subprocess.run([tfdata_binary()] + args, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    m = re.search(r"tfdata: error: (.*)", out.stderr)
    assert m, out.stderr
    return m.group(1)


def _strip_location(message):
    return re.sub(r"^[^:]*:\d+:\d+: ", "", message)


def test_errors_carry_the_cli_message(cluster, tmpdir_path):
    # Unknown dataset.
    with pytest.raises(tfdata.NotFoundError) as e:
        read_all(tfdata.from_dataset_id("parallel_epochs", cluster.target, "no-such-dataset"))
    assert str(e.value) == _cli_error(["read", "--dispatcher", cluster.target, "--dataset-id", "no-such-dataset"])
    assert isinstance(e.value, LookupError)
    # Unreachable dispatcher (port 1 on loopback: nothing listens).
    path = os.path.join(tmpdir_path, "p.pbtxt")
    with open(path, "w") as f:
        f.write(Pipeline.range(3).to_text())
    with pytest.raises(tfdata.UnavailableError) as e:
        tfdata.register_dataset("localhost:1", path)
    assert str(e.value) == _cli_error(["register", path, "--dispatcher", "localhost:1"])
    assert isinstance(e.value, ConnectionError)
    # A pipeline that does not validate.
    bad = Pipeline.range(3).batch(0)
    with open(path, "w") as f:
        f.write(bad.to_text())
    with pytest.raises(tfdata.InvalidArgumentError) as e:
        tfdata.register_dataset(cluster.target, bad)
    assert _strip_location(str(e.value)) == _strip_location(_cli_error(["register", path, "--dispatcher",
                                                                         cluster.target]))
    # A pipeline that fails on the worker, at run time: the same dataset read by both; only the
    # task (a new one per reader) differs.
    failing = Pipeline.from_tensor_slices(["not an example"]).map(fn.parse_example({"x": "int64"}))
    dataset_id = tfdata.register_dataset(cluster.target, failing)
    with pytest.raises(tfdata.InvalidArgumentError) as e:
        read_all(tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id))
    cli = _cli_error(["read", "--dispatcher", cluster.target, "--dataset-id", dataset_id, "--format", "null"])
    assert re.sub(r"task \d+", "task N", str(e.value)) == re.sub(r"task \d+", "task N", cli)
    assert "parse_example" in str(e.value)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: tfdata.from_dataset_id("sideways", t, "1"), ValueError, "unknown processing mode 'sideways'"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, 17), ValueError, "dataset_id"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", 5, "1"), TypeError, "service"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", num_consumers=2), ValueError, "both or neither"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", num_consumers=2, consumer_index=2,
                                      job_name="j"), ValueError, r"outside \[0, num_consumers 2\)"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", num_consumers=2, consumer_index=0),
     ValueError, "need a job_name"),
    (lambda t: tfdata.from_dataset_id("file", t, "1", num_consumers=2, consumer_index=0, job_name="j"),
     ValueError, "coordinated reads need"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", cross_trainer_cache=tfdata.CrossTrainerCache("a")),
     ValueError, "cross_trainer_cache needs a job_name"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", max_outstanding_requests=0), ValueError,
     "at least 1"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", max_outstanding_requests="4"), TypeError, "int"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", target_workers="NEAR"), ValueError,
     "target_workers"),
    (lambda t: tfdata.from_dataset_id("parallel_epochs", t, "1", data_transfer_protocol="udp"), ValueError,
     "data_transfer_protocol"),
    (lambda t: tfdata.register_dataset(t, Pipeline.range(3), compression="zstd"), ValueError, "compression"),
    (lambda t: tfdata.register_dataset(t, 42), TypeError, "expected a tfdata.Pipeline"),
    (lambda t: tfdata.register_dataset("localhost", Pipeline.range(3)), tfdata.InvalidArgumentError, "not an address"),
    (lambda t: tfdata.CrossTrainerCache(""), ValueError, "trainer_id"),
    (lambda t: tfdata.DispatchServer(port=-1), ValueError, "port"),
    (lambda t: tfdata.DispatchServer(fault_tolerant_mode=True), ValueError, "work_dir"),
    (lambda t: tfdata.WorkerServer(tfdata.WorkerConfig()), ValueError, "dispatcher_address"),
    (lambda t: tfdata.WorkerServer(t, worker_tags="gpu"), TypeError, "worker_tags"),
    (lambda t: tfdata.WorkerServer(t, heartbeat_interval_ms=0), ValueError, "heartbeat_interval_ms"),
])
def test_bad_arguments_are_value_or_type_errors(cluster, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(cluster.target)


def test_dispatch_server_takes_the_port_positionally():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tfdata.DispatchServer(port) as d:
        assert d.port == port and d.target == f"grpc://localhost:{port}"


def test_set_log_level():
    tfdata.set_log_level("error")
    tfdata.set_log_level("warn")
    with pytest.raises(ValueError, match="log level"):
        tfdata.set_log_level("loud")


def test_worker_config_fields():
    # A cluster of its own: the worker added here is stopped, and would stay listed by the shared one.
    c = Cluster(num_workers=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tfdata.WorkerConfig(dispatcher_address=c.target, port=port, host="127.0.0.1",
                                 worker_address="127.0.0.1:%port%", heartbeat_interval_ms=100,
                                 dispatcher_timeout_ms=2000, cross_trainer_cache_size_bytes=1 << 20,
                                 allow_plugins=False, worker_tags=["config-test"])
    try:
        with tfdata.WorkerServer(config) as w:
            assert w.worker_address == f"127.0.0.1:{port}"
            wait_for(lambda: c.dispatcher.num_workers == 2)
            dataset_id = tfdata.register_dataset(c.target, Pipeline.range(4))
            ds = tfdata.from_dataset_id("parallel_epochs", c.target, dataset_id, worker_tag="config-test")
            assert ds.dataset_id == dataset_id and ds.processing_mode == tfdata.ShardingPolicy.OFF
            assert list(ds) == [0, 1, 2, 3]  # from this worker alone: its tag
    finally:
        c.stop()


def test_servers_api(tmpdir_path):
    d = tfdata.DispatchServer(tfdata.DispatcherConfig(port=0, host="127.0.0.1", work_dir=tmpdir_path,
                                                      fault_tolerant_mode=True))
    assert d.target == f"grpc://localhost:{d.port}" and d.port > 0
    w = tfdata.WorkerServer(d, port=0, host="127.0.0.1", heartbeat_interval_ms=100)
    assert re.fullmatch(r"localhost:\d+", w.worker_address)
    wait_for(lambda: d.num_workers == 1)
    dataset_id = tfdata.register_dataset(d, Pipeline.range(3))
    assert read_all(tfdata.from_dataset_id("parallel_epochs", d, dataset_id)) == [0, 1, 2]
    assert os.path.exists(os.path.join(tmpdir_path, "journal"))
    joined = threading.Event()
    t = threading.Thread(target=lambda: (d.join(), joined.set()))
    t.start()
    assert not joined.wait(0.3)  # join() blocks while the server runs
    w.stop()
    d.stop()
    assert joined.wait(5)
    d.stop()  # idempotent
    # A fault-tolerant dispatcher restarted on the same work_dir knows the dataset.
    d2 = tfdata.DispatchServer(host="127.0.0.1", work_dir=tmpdir_path, fault_tolerant_mode=True)
    with tfdata.WorkerServer(d2, host="127.0.0.1", heartbeat_interval_ms=100):
        # The stopped worker left (journaled): the restarted dispatcher knows only the new one.
        wait_for(lambda: d2.num_workers == 1)
        assert read_all(tfdata.from_dataset_id("parallel_epochs", d2, dataset_id)) == [0, 1, 2]
    d2.stop()
    with tfdata.DispatchServer(start=False) as lazy:
        assert lazy._native_server is None
        lazy.start()
        assert lazy.port > 0


def test_stats(cluster):
    it = iter(Pipeline.range(100).apply(tfdata.distribute("parallel_epochs", cluster.target)))
    assert sum(it) == sum(range(100))
    s = it.stats()
    assert s["elements"] == 100 and s["bytes"] == 800 and s["tasks"] == 1 and s["tasks_dropped"] == 0


def test_against_tfdata_processes(process_cluster):
    """The built binary's dispatcher and worker, read from Python; and the CLI reads what Python registered."""
    target = process_cluster.target
    dataset_id = tfdata.register_dataset(target, Pipeline.range(12).map(fn.arith("mul", 2)))
    got = read_all(tfdata.from_dataset_id("distributed_epoch", target, dataset_id))
    assert sorted(got) == [2 * i for i in range(12)]
    out = subprocess.run([process_cluster.binary, "read", "--dispatcher", target, "--dataset-id", dataset_id,
                          "--format", "jsonl", "-q"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(int(x) for x in out.stdout.split()) == sorted(got)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_reading_a_million_elements_leaves_rss_flat(cluster):
    # Arrays (each with its own TensorBuffer owner), so the zero-copy path is the one measured.
    p = Pipeline.from_tensor_slices(np.zeros((1000, 16), np.int64)).repeat(1000)
    it = iter(p.apply(tfdata.distribute("parallel_epochs", cluster.target)))
    n = 0
    start = None
    for a in it:
        n += 1
        if n == 100_000:
            gc.collect()
            start = rss_bytes()
    gc.collect()
    grown = rss_bytes() - start
    assert n == 1_000_000
    assert grown < 16 << 20, f"RSS grew {grown / 2**20:.1f} MiB over 900k elements"


def test_a_blocked_read_releases_the_gil(cluster):
    # 300 ms per element on the worker: next() waits, and another Python thread must run meanwhile.
    p = Pipeline.range(3).map(fn.sleep(300_000))
    it = iter(tfdata.from_dataset_id("parallel_epochs", cluster.target, tfdata.register_dataset(cluster.target, p)))
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    got = list(it)
    stop.set()
    t.join()
    assert got == [0, 1, 2]
    assert len(ticks) > 100, f"the other thread ran only {len(ticks)} times in about 1 s of waiting"


def test_a_port_in_use_is_an_error(cluster):
    with pytest.raises(tfdata.UnavailableError, match="port in use"):
        tfdata.DispatchServer(port=cluster.dispatcher.port, host="127.0.0.1")
    with pytest.raises(tfdata.UnavailableError, match="port in use"):
        tfdata.WorkerServer(cluster.target, port=cluster.dispatcher.port, host="127.0.0.1")
    lazy = tfdata.DispatchServer(start=False)
    with pytest.raises(RuntimeError, match="not started"):
        lazy.target


def test_normalize_takes_mean_and_std_positionally():
    assert fn.normalize([0.5], [0.25]) == fn.normalize(mean=[0.5], std=[0.25])
    assert fn.normalize(0.5, 0.25) == fn.normalize(mean=[0.5], std=[0.25])
    assert list(Pipeline.from_tensor_slices(np.array([[1.0]], np.float32)).map(fn.normalize(0.5, 0.25))) == \
        [np.array([2.0], np.float32)]


def test_a_task_over_its_memory_budget_raises_and_the_worker_serves_on():
    c = Cluster(num_workers=0)
    try:
        c.add_worker(max_task_memory_bytes=64 << 20)
        bad = tfdata.Dataset.range(10).repeat().batch(99999999999)
        with pytest.raises(tfdata.errors.ResourceExhaustedError, match=r"op 2 \(batch\): a batch of 99999999999"):
            next(iter(bad.apply(tfdata.distribute("parallel_epochs", c.target))))
        good = tfdata.Dataset.range(5).apply(tfdata.distribute("parallel_epochs", c.target))
        assert [int(x) for x in good] == [0, 1, 2, 3, 4]
        with pytest.raises(ValueError, match="max_task_memory_bytes"):
            tfdata.WorkerServer(tfdata.WorkerConfig(dispatcher_address=c.target, max_task_memory_bytes=-1))
    finally:
        c.stop()
