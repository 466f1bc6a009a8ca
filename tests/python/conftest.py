"""Fixtures: real servers, started from Python (in this process) or as `tfdata` processes."""

import os
import subprocess
import tempfile
import time

import pytest

import tfdata

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def tfdata_binary():
    path = os.environ.get("TFDATA_BINARY", os.path.join(SOURCE_DIR, "build", "tfdata"))
    if not os.path.exists(path):
        pytest.skip(f"the tfdata binary is not built ({path})")
    return path


class Cluster:
    """A dispatcher and `num_workers` workers in this process, on loopback."""

    def __init__(self, num_workers=1, **dispatcher_args):
        self.dispatcher = tfdata.DispatchServer(host="127.0.0.1", **dispatcher_args)
        self.workers = []
        for _ in range(num_workers):
            self.add_worker()

    def add_worker(self, **kwargs):
        kwargs.setdefault("heartbeat_interval_ms", 100)
        w = tfdata.WorkerServer(tfdata.WorkerConfig(dispatcher_address=self.dispatcher.target, host="127.0.0.1",
                                                    **kwargs))
        self.workers.append(w)
        wait_for(lambda: self.dispatcher.num_workers >= len([x for x in self.workers if not x._native_server.stopped]))
        return w

    @property
    def target(self):
        return self.dispatcher.target

    def stop(self):
        for w in self.workers:
            w.stop()
        self.dispatcher.stop()


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(num_workers=1)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def cluster2():
    c = Cluster(num_workers=2)
    yield c
    c.stop()


@pytest.fixture
def tmpdir_path():
    with tempfile.TemporaryDirectory() as d:
        yield d


class ProcessCluster:
    """A `tfdata dispatcher` process and `tfdata worker` processes (the built binary)."""

    def __init__(self, tmp, num_workers=1, worker_args=(), dispatcher_args=()):
        self.binary = tfdata_binary()
        self.procs = []
        port_file = os.path.join(tmp, "dispatcher.port")
        self.procs.append(self._start(["dispatcher", "--host", "127.0.0.1", "--port", "0", "--port-file", port_file,
                                       *dispatcher_args]))
        self.port = int(self._read_port(port_file))
        self.target = f"grpc://localhost:{self.port}"
        for i in range(num_workers):
            wport = os.path.join(tmp, f"worker{i}.port")
            self.procs.append(self._start(["worker", "--dispatcher", self.target, "--host", "127.0.0.1",
                                           "--port", "0", "--port-file", wport, "--heartbeat-interval", "100ms",
                                           *worker_args]))
            self._read_port(wport)

    def _start(self, args):
        return subprocess.Popen([self.binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @staticmethod
    def _read_port(path, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return text
            time.sleep(0.02)
        raise AssertionError(f"{path} did not appear")

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait(timeout=10)


@pytest.fixture
def process_cluster(tmpdir_path):
    c = ProcessCluster(tmpdir_path)
    yield c
    c.stop()
