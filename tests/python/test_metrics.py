"""Prometheus metrics (`--metrics-port`) of `tfdata dispatcher` and `tfdata worker` processes: each
metric read from /metrics after real traffic, and its value checked (docs/operations.md lists
them). Bad flags and a taken port fail the process with a clear error."""

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import tfdata
from conftest import ProcessCluster, tfdata_binary


def _scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def _port(path):
    return int(ProcessCluster._read_port(path))


def _wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def metrics_cluster(tmpdir_path):
    d_file, w_file = os.path.join(tmpdir_path, "dm.port"), os.path.join(tmpdir_path, "wm.port")
    c = ProcessCluster(tmpdir_path, dispatcher_args=["--metrics-port", "0", "--metrics-port-file", d_file,
                                                     "--worker-timeout", "1s"],
                       worker_args=["--metrics-port", "0", "--metrics-port-file", w_file])
    c.dispatcher_metrics, c.worker_metrics = _port(d_file), _port(w_file)
    yield c
    c.stop()


def test_dispatcher_and_worker_metrics_after_a_read(metrics_cluster, tmpdir_path):
    c = metrics_cluster
    # The worker registers with its first heartbeat, which may come after its port file.
    assert _wait_for(lambda: _scrape(c.dispatcher_metrics)['tfdata_dispatcher_workers{state="alive"}'] == 1)
    d = _scrape(c.dispatcher_metrics)
    assert d['tfdata_dispatcher_workers{state="suspected"}'] == 0
    assert d["tfdata_dispatcher_datasets"] == 0 and d["tfdata_dispatcher_readers"] == 0
    assert d['tfdata_dispatcher_rpcs_total{code="OK",method="WorkerHeartbeat"}'] >= 1

    dataset_id = tfdata.register_dataset(c.target, tfdata.Pipeline.range(100))
    ds = tfdata.from_dataset_id("parallel_epochs", c.target, dataset_id)
    it = iter(ds)
    assert next(it) == 0
    d = _scrape(c.dispatcher_metrics)
    assert d["tfdata_dispatcher_datasets"] == 1
    assert d['tfdata_dispatcher_jobs{mode="parallel_epochs"}'] == 1
    assert d['tfdata_dispatcher_jobs{mode="distributed_epoch"}'] == 0
    assert d["tfdata_dispatcher_readers"] == 1 and d["tfdata_dispatcher_active_iterations"] == 1
    assert d['tfdata_dispatcher_rpcs_total{code="OK",method="RegisterDataset"}'] == 1
    assert d['tfdata_dispatcher_rpcs_total{code="OK",method="GetOrCreateJob"}'] == 1
    assert sum(1 for _ in it) == 99  # the rest
    w = _scrape(c.worker_metrics)
    assert w["tfdata_worker_tasks"] == 1
    assert w[f'tfdata_worker_elements_served_total{{dataset="{dataset_id}"}}'] == 100
    assert w[f'tfdata_worker_served_bytes_total{{dataset="{dataset_id}"}}'] == 800  # int64 scalars
    assert w[f'tfdata_worker_elements_produced_total{{dataset="{dataset_id}"}}'] == 100
    assert w[f'tfdata_worker_produced_bytes_total{{dataset="{dataset_id}"}}'] == 800
    assert w[f'tfdata_worker_buffered_elements{{dataset="{dataset_id}"}}'] == 0
    assert w[f'tfdata_worker_produce_seconds_total{{dataset="{dataset_id}"}}'] > 0
    assert w["tfdata_worker_get_elements_total"] >= 1

    with pytest.raises(tfdata.NotFoundError):
        list(tfdata.from_dataset_id("parallel_epochs", c.target, "no-such-dataset"))
    d = _scrape(c.dispatcher_metrics)
    assert d['tfdata_dispatcher_rpcs_total{code="NOT_FOUND",method="GetOrCreateJob"}'] == 1


def test_workers_removed_by_reason(metrics_cluster, tmpdir_path):
    c = metrics_cluster
    extra = [c._start(["worker", "--dispatcher", c.target, "--host", "127.0.0.1", "--port", "0",
                       "--heartbeat-interval", "100ms"]) for _ in range(2)]
    c.procs.extend(extra)
    assert _wait_for(lambda: _scrape(c.dispatcher_metrics)['tfdata_dispatcher_workers{state="alive"}'] == 3)
    extra[0].send_signal(signal.SIGTERM)  # leaves
    extra[1].kill()  # lost after --worker-timeout 1s
    assert _wait_for(lambda: _scrape(c.dispatcher_metrics)['tfdata_dispatcher_workers{state="alive"}'] == 1)
    d = _scrape(c.dispatcher_metrics)
    assert d['tfdata_dispatcher_workers_removed_total{reason="left"}'] == 1
    assert d['tfdata_dispatcher_workers_removed_total{reason="lost"}'] == 1


def test_metrics_flags_errors(metrics_cluster):
    taken = subprocess.run([tfdata_binary(), "dispatcher", "--host", "127.0.0.1", "--port", "0", "--metrics-port",
                            str(metrics_cluster.dispatcher_metrics)], capture_output=True, text=True, timeout=60)
    assert taken.returncode == 2 and re.search(r"metrics: cannot listen on 127\.0\.0\.1:\d+", taken.stderr)
    alone = subprocess.run([tfdata_binary(), "worker", "--dispatcher", metrics_cluster.target, "--port", "0",
                            "--metrics-port-file", "/tmp/x"], capture_output=True, text=True, timeout=60)
    assert alone.returncode != 0 and "--metrics-port-file needs --metrics-port" in alone.stderr
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{metrics_cluster.dispatcher_metrics}/nothing", timeout=10)
    assert e.value.code == 404


def test_journal_splits_and_latency_histograms(tmpdir_path):
    d_file, w_file = os.path.join(tmpdir_path, "dm.port"), os.path.join(tmpdir_path, "wm.port")
    c = ProcessCluster(tmpdir_path, dispatcher_args=["--metrics-port", "0", "--metrics-port-file", d_file,
                                                     "--work-dir", os.path.join(tmpdir_path, "work"),
                                                     "--fault-tolerant"],
                       worker_args=["--metrics-port", "0", "--metrics-port-file", w_file])
    try:
        # The worker's registration (its first heartbeat may come after its port file).
        assert _wait_for(lambda: _scrape(_port(d_file))["tfdata_dispatcher_journal_appends_total"] >= 1)
        before = _scrape(_port(d_file))
        ds = tfdata.Pipeline.range(1000).apply(tfdata.distribute("distributed_epoch", c.target))
        assert sorted(ds.as_numpy_iterator()) == list(range(1000))
        d = _scrape(_port(d_file))
        appends = d["tfdata_dispatcher_journal_appends_total"]
        assert appends > before["tfdata_dispatcher_journal_appends_total"] + 2  # dataset, job, splits, ...
        assert d["tfdata_dispatcher_journal_appended_bytes_total"] > 0
        assert d["tfdata_dispatcher_journal_bytes"] >= d["tfdata_dispatcher_journal_appended_bytes_total"]
        assert d["tfdata_dispatcher_journal_append_seconds_count"] == appends
        assert d['tfdata_dispatcher_journal_append_seconds_bucket{le="+Inf"}'] == appends
        assert d['tfdata_dispatcher_journal_append_seconds_bucket{le="10"}'] == appends
        assert 0 < d["tfdata_dispatcher_journal_append_seconds_sum"] < 10 * appends
        assert d["tfdata_dispatcher_splits_assigned_total"] >= 1
        assert d["tfdata_dispatcher_splits_lost_total"] == 0
        assert d['tfdata_dispatcher_jobs{mode="distributed_epoch"}'] == 1
        w = _scrape(_port(w_file))
        calls = w["tfdata_worker_get_elements_seconds_count"]
        assert calls >= w["tfdata_worker_get_elements_total"] >= 1
        assert w['tfdata_worker_get_elements_seconds_bucket{le="+Inf"}'] == calls
        # Buckets are cumulative.
        buckets = [v for k, v in w.items() if k.startswith("tfdata_worker_get_elements_seconds_bucket")]
        assert buckets == sorted(buckets)
    finally:
        c.stop()
