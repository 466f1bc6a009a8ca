"""tfdata across network hosts: a dispatcher host, two worker hosts and a trainer host, each a
network namespace with its own address on a private bridge (netns_hosts.Hosts), running the
`tfdata` binary. What a worker advertises, --target-workers local, compression auto over a shaped
link and over loopback, distributed_epoch across hosts, and a worker host cut off mid-read.

Needs root (ip netns, veth, bridge, tc); skipped with the reason otherwise. Every wait is bounded."""

import os
import re
import subprocess
import threading
import time

import pytest

from conftest import tfdata_binary
from netns_hosts import Hosts, HostsUnavailable

HOSTS = ["dispatcher", "worker1", "worker2", "trainer"]
HEARTBEAT = "100ms"


def sum_by_label(metrics, name):
    """A labelled family's samples added up (the worker's figures are by dataset); 0 for none."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


@pytest.fixture(scope="module")
def hosts():
    tfdata_binary()  # skips when the binary is not built
    try:
        h = Hosts(HOSTS)
    except HostsUnavailable as e:
        pytest.skip(f"tests across network hosts need network namespaces: {e}")
    with h:
        yield h


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def _read_file(path, timeout=20.0):
    def content():
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
        return ""
    return _wait(content, timeout, f"{path} to be written")


def parse_metrics(text):
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


class Server:
    def __init__(self, proc, host, address, metrics_url):
        self.proc, self.host, self.address, self.metrics_url = proc, host, address, metrics_url


class NetCluster:
    """tfdata processes on the hosts; what a test starts is killed at its end."""

    def __init__(self, hosts, tmp):
        self.hosts, self.tmp, self.binary = hosts, tmp, tfdata_binary()
        self.n = 0
        self.dispatcher = None

    def _file(self, name):
        self.n += 1
        return os.path.join(self.tmp, f"{name}-{self.n}")

    def start_dispatcher(self, *args, host="dispatcher"):
        port_file, metrics_file = self._file("dispatcher.port"), self._file("dispatcher.metrics")
        addr = self.hosts.addr(host)
        proc = self.hosts.popen(host, [self.binary, "dispatcher", "--host", addr, "--port", "0", "--port-file",
                                       port_file, "--metrics-port", "0", "--metrics-port-file", metrics_file, *args])
        port, mport = _read_file(port_file), _read_file(metrics_file)
        self.dispatcher = Server(proc, host, f"{addr}:{port}", f"http://{addr}:{mport}/metrics")
        return self.dispatcher

    def start_worker(self, host, advertise="host", bind="0.0.0.0", args=()):
        """A worker on `host`, listening on `bind`, advertising `advertise`: "host" for the host's
        address, None for the default (localhost:%port%), else that text."""
        port_file, metrics_file = self._file(f"{host}.port"), self._file(f"{host}.metrics")
        flags = [] if advertise is None else [
            "--worker-address", f"{self.hosts.addr(host)}:%port%" if advertise == "host" else advertise]
        proc = self.hosts.popen(host, [self.binary, "worker", "--dispatcher", self.dispatcher.address, "--host", bind,
                                       "--port", "0", "--port-file", port_file, "--heartbeat-interval", HEARTBEAT,
                                       "--metrics-port", "0", "--metrics-port-file", metrics_file, *flags, *args])
        _read_file(port_file)
        mport = _read_file(metrics_file)
        # The worker prints its advertised address before it writes the port file.
        address = re.search(r"worker listening on grpc://(\S+) ", Hosts.read_log(proc)).group(1)
        # Registered: the dispatcher logs the address the worker advertises.
        _wait(lambda: f"dispatcher: worker {address} registered" in self.dispatcher_log(), 10,
              f"the dispatcher to register worker {address}")
        metrics_host = "127.0.0.1" if bind == "0.0.0.0" else bind
        return Server(proc, host, address, f"http://{metrics_host}:{mport}/metrics")

    def dispatcher_log(self):
        return Hosts.read_log(self.dispatcher.proc)

    def metrics(self, server, from_host=None):
        """A server's metrics, scraped from `from_host` (default: the server's own host)."""
        return parse_metrics(self.hosts.http_get(from_host or server.host, server.metrics_url))

    def served(self, worker):
        return sum_by_label(self.metrics(worker), "tfdata_worker_elements_served_total")

    def read_args(self, *args):
        return [self.binary, "read", "--dispatcher", self.dispatcher.address, *args]

    def read(self, host, *args, timeout=60):
        """`tfdata read` on `host` to its end: (exit code, the elements as ints, stderr)."""
        out = self.hosts.run(host, self.read_args(*args), timeout=timeout)
        return out.returncode, [int(x) for x in out.stdout.split()], out.stderr

    def logs(self):
        parts = []
        for p in self.hosts._procs:
            if p.log is not None:
                parts.append(f"--- {p.host}: {' '.join(map(str, p.args[4:6]))} ---\n{Hosts.read_log(p)[-3000:]}")
        return "\n".join(parts)


@pytest.fixture
def net(hosts, tmp_path):
    c = NetCluster(hosts, str(tmp_path))
    yield c
    hosts.kill_all()
    for h in HOSTS:
        hosts.set_link(h, up=True)
        hosts.clear_netem(h)
    hosts.heal("worker1", "dispatcher")


def _pipeline(tmp_path, name, text):
    path = tmp_path / f"{name}.pbtxt"
    path.write_text(text)
    return str(path)


# --- the harness -------------------------------------------------------------------------------

def test_without_the_ip_command_hosts_are_unavailable_with_the_reason(monkeypatch):
    import netns_hosts
    monkeypatch.setattr(netns_hosts.shutil, "which", lambda tool: None)
    with pytest.raises(HostsUnavailable, match=r"the `ip` command is missing \(install iproute2"):
        Hosts(["a"])


def test_namespaces_left_by_a_crashed_run_are_removed(hosts):
    import netns_hosts
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{netns_hosts.PREFIX}{dead.pid}-worker1"
    subprocess.run(["ip", "netns", "add", stale], check=True, timeout=10)
    try:
        netns_hosts.remove_stale_namespaces()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
        assert stale not in names
        assert hosts.ns("worker1") in names  # this run's stay
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True, timeout=10)


# --- what a worker advertises ------------------------------------------------------------------

def test_a_worker_registers_with_its_host_address_and_the_trainer_host_reads_it(net, hosts, tmp_path):
    net.start_dispatcher()
    w1 = net.start_worker("worker1")  # --worker-address 10.213.K.2:%port%
    assert w1.address.startswith(hosts.addr("worker1") + ":"), w1.address
    # The dispatcher knows it by that address and makes tasks there.
    assert f"dispatcher: worker {w1.address} registered" in net.dispatcher_log()
    before = hosts.link_stats("worker1")
    code, got, err = net.read("trainer", _pipeline(tmp_path, "r", "op { range { stop: 2000 } }"))
    assert code == 0, err + net.logs()
    assert got == list(range(2000))
    assert re.search(rf"created task \d+ of iteration \d+ on worker {re.escape(w1.address)}", net.dispatcher_log())
    # The elements came from worker1, across its link.
    assert net.served(w1) == 2000
    assert hosts.link_stats("worker1")["tx_bytes"] - before["tx_bytes"] > 2000 * 8
    # The dispatcher's metrics, scraped from the trainer host across the bridge.
    d = net.metrics(net.dispatcher, from_host="trainer")
    assert d['tfdata_dispatcher_workers{state="alive"}'] == 1


def test_a_worker_advertising_an_address_the_trainer_cannot_reach_is_reported_not_silently_used(
        net, hosts, tmp_path):
    net.start_dispatcher()
    good = net.start_worker("worker1")
    # Bound to its host's address, advertising the default localhost:%port%: from the trainer host
    # that is the trainer's own loopback, where nothing listens.
    bad = net.start_worker("worker2", advertise=None, bind=hosts.addr("worker2"))
    assert re.fullmatch(r"localhost:\d+", bad.address), bad.address
    # The dispatcher registers what the worker advertises, unchecked.
    assert f"dispatcher: worker {bad.address} registered" in net.dispatcher_log()
    pipeline = _pipeline(tmp_path, "r", "op { range { stop: 200 } }")
    for attempt in range(2):
        code, got, err = net.read("trainer", pipeline, timeout=60)
        # The read gives the unreachable worker's task up, says so, and exits 4 (data lost); the
        # reachable worker's whole pass arrives.
        assert code == 4, err + net.logs()
        assert sorted(got) == list(range(200)), f"attempt {attempt}"
        assert f"(1 task(s) dropped: worker unreachable: {bad.address})" in err, err
        assert "tfdata: warning: the read lost data:" in err and "exit code 4" in err, err
        # Every attempt: the worker heartbeats, so the dispatcher keeps giving it tasks (a reader's
        # report of it is cleared by its next heartbeat) and every read reports the loss.
    assert net.served(good) == 400
    assert net.served(bad) == 0
    d = net.metrics(net.dispatcher, from_host="trainer")
    assert d['tfdata_dispatcher_workers{state="alive"}'] == 2
    assert d['tfdata_dispatcher_workers{state="suspected"}'] == 0


# --- --target-workers local --------------------------------------------------------------------

def test_target_workers_local_reads_only_the_worker_on_the_trainers_host(net, hosts, tmp_path):
    net.start_dispatcher()
    workers = {h: net.start_worker(h) for h in ("worker1", "worker2", "trainer")}
    pipeline = _pipeline(tmp_path, "r", "op { range { stop: 300 } }")
    served = {h: net.served(w) for h, w in workers.items()}
    code, got, err = net.read("trainer", pipeline, "--target-workers", "local")
    assert code == 0, err + net.logs()
    assert sorted(got) == list(range(300))  # one worker's pass: parallel_epochs, one worker read
    delta = {h: net.served(w) - served[h] for h, w in workers.items()}
    assert delta == {"worker1": 0, "worker2": 0, "trainer": 300}, delta
    # The same read with any: every worker's pass, across the bridge.
    served = {h: net.served(w) for h, w in workers.items()}
    code, got, err = net.read("trainer", pipeline, "--target-workers", "any")
    assert code == 0, err + net.logs()
    assert sorted(got) == sorted(list(range(300)) * 3)
    delta = {h: net.served(w) - served[h] for h, w in workers.items()}
    assert delta == {"worker1": 300, "worker2": 300, "trainer": 300}, delta


# --- compression auto --------------------------------------------------------------------------

# 245 int64 batches of consecutive numbers (16 MB): snappy halves them.
COMPRESSIBLE = "op { range { stop: 2000000 } }\nop { batch { batch_size: 8192 } }\n"
COMPRESSIBLE_BYTES = 2000000 * 8
DECISION = (r"worker: task (\d+) \(dataset (\d+), compression auto\): snappy ratio ([0-9.]+) on (\d+) bytes, "
            r"compresses \d+ MB/s, decompresses \d+ MB/s; link (\d+) MB/s -> (compressing|not compressing) "
            r"\(estimated \d+ MB/s compressed\)")


def _decisions(worker):
    return re.findall(DECISION, Hosts.read_log(worker.proc))


def _served_bytes(net, worker):
    return sum_by_label(net.metrics(worker), "tfdata_worker_served_bytes_total")


def test_compression_auto_compresses_over_a_1_gbit_link_to_the_trainer_host(net, hosts, tmp_path):
    net.start_dispatcher()
    # The link is shaped to 1 Gbit/s both ways (tc), and the worker is told so (--link-gbps: auto
    # weighs compression against this figure; it does not measure the link).
    delay = 1 if hosts.netem_supported() else None
    hosts.netem("worker1", rate_mbit=1000, delay_ms=delay)
    w1 = net.start_worker("worker1", args=["--link-gbps", "1"])
    link, served = hosts.link_stats("worker1"), _served_bytes(net, w1)
    # Over gRPC (the data plane this is about; by default the reader would use shared memory).
    code, got, err = net.read("trainer", _pipeline(tmp_path, "c", COMPRESSIBLE), "--compression", "auto",
                              "--format", "null", "--transfer", "grpc")
    assert code == 0, err + net.logs()
    assert re.match(r"245 elements", err), err
    decisions = _decisions(w1)
    assert len(decisions) == 1, Hosts.read_log(w1.proc)
    task, dataset, ratio, measured, link_mb, decision = decisions[0]
    assert link_mb == "125" and decision == "compressing", decisions
    assert float(ratio) < 0.75 and int(measured) > 0
    assert re.search(rf"registered dataset {dataset} \(.*compression auto\)", net.dispatcher_log())
    # What crossed the link is the compressed bytes: well under what the worker served.
    served = _served_bytes(net, w1) - served
    sent = hosts.link_stats("worker1")["tx_bytes"] - link["tx_bytes"]
    assert served == COMPRESSIBLE_BYTES
    assert sent < 0.75 * served, (sent, served)


def test_compression_auto_does_not_compress_for_a_reader_over_loopback(net, hosts, tmp_path):
    net.start_dispatcher()
    # A worker on the trainer's host advertising its loopback address: the trainer reaches it there.
    local = net.start_worker("trainer", advertise="127.0.0.1:%port%", args=["--link-gbps", "1"])
    lo, served = hosts.loopback_stats("trainer"), _served_bytes(net, local)
    # Over gRPC (the data plane this is about; by default the reader would use shared memory).
    code, got, err = net.read("trainer", _pipeline(tmp_path, "c", COMPRESSIBLE), "--compression", "auto",
                              "--format", "null", "--transfer", "grpc")
    assert code == 0, err + net.logs()
    assert re.match(r"245 elements", err), err
    # No snappy measurement and no compression: the elements crossed loopback at full size.
    assert _decisions(local) == [], Hosts.read_log(local.proc)
    served = _served_bytes(net, local) - served
    assert served == COMPRESSIBLE_BYTES
    assert hosts.loopback_stats("trainer")["tx_bytes"] - lo["tx_bytes"] >= served


def test_compression_auto_does_not_compress_for_a_reader_on_the_workers_host_at_its_address(
        net, hosts, tmp_path):
    net.start_dispatcher()
    w1 = net.start_worker("worker1", args=["--link-gbps", "1"])  # advertises 10.213.K.2:%port%
    lo, served = hosts.loopback_stats("worker1"), _served_bytes(net, w1)
    # The reader on worker1's own host: it connects to the advertised address, a local one.
    code, got, err = net.read("worker1", _pipeline(tmp_path, "c", COMPRESSIBLE), "--compression", "auto",
                              "--format", "null", "--target-workers", "local", "--transfer", "grpc")
    assert code == 0, err + net.logs()
    served = _served_bytes(net, w1) - served
    assert served == COMPRESSIBLE_BYTES
    assert [d[5] for d in _decisions(w1)] in ([], ["not compressing"]), _decisions(w1)
    assert hosts.loopback_stats("worker1")["tx_bytes"] - lo["tx_bytes"] >= served


def test_a_reader_on_the_workers_host_reads_through_shared_memory_one_on_another_host_over_the_network(
        net, hosts, tmp_path):
    net.start_dispatcher()
    w1 = net.start_worker("worker1")  # advertises 10.213.K.2:%port%
    pipeline = _pipeline(tmp_path, "c", COMPRESSIBLE)
    # On worker1's host, by default: the shared-memory plane, so the elements cross no interface.
    lo, served = hosts.loopback_stats("worker1"), _served_bytes(net, w1)
    code, got, err = net.read("worker1", pipeline, "--format", "null", "--target-workers", "local")
    assert code == 0, err + net.logs()
    served = _served_bytes(net, w1) - served
    assert served == COMPRESSIBLE_BYTES
    assert hosts.loopback_stats("worker1")["tx_bytes"] - lo["tx_bytes"] < served / 10
    # Forced to shared memory from the trainer's host (another network namespace): the worker's
    # socket is not there, the task is dropped with the reason, nothing is read.
    code, got, err = net.read("trainer", pipeline, "--format", "null", "--transfer", "shm")
    assert code == 1, err
    assert "no shared-memory data plane on this host" in err, err


# --- distributed_epoch across hosts ------------------------------------------------------------

def test_distributed_epoch_across_two_worker_hosts_gives_every_element_once(net, hosts, tmp_path):
    net.start_dispatcher()
    w1, w2 = net.start_worker("worker1"), net.start_worker("worker2")
    n = 20000
    pipeline = _pipeline(tmp_path, "d", f"op {{ range {{ stop: {n} }} }}\nop {{ map {{ fn {{ sleep {{ micros: 50 }} }} }} }}\n")
    code, got, err = net.read("trainer", pipeline, "--mode", "distributed_epoch")
    assert code == 0, err + net.logs()
    assert len(got) == n and sorted(got) == list(range(n))  # every element, none twice
    s1, s2 = net.served(w1), net.served(w2)
    assert s1 > 0 and s2 > 0 and s1 + s2 == n, (s1, s2)  # both hosts served a share
    d = net.metrics(net.dispatcher, from_host="trainer")
    assert d["tfdata_dispatcher_splits_assigned_total"] == 64 and d["tfdata_dispatcher_splits_lost_total"] == 0


# --- a worker host cut off mid-read ------------------------------------------------------------

class LineReader:
    """`tfdata read` on a host, its stdout (one element per line) counted as it arrives."""

    def __init__(self, hosts, host, argv):
        self.proc = hosts.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.elements = []
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.elements.append(int(line))

    def wait(self, timeout):
        code = self.proc.wait(timeout=timeout)
        self.thread.join(10)
        return code, self.elements, self.proc.stderr.read().decode()


def test_a_partitioned_worker_host_mid_read_loses_what_the_docs_say_and_rejoins(net, hosts, tmp_path):
    # A worker silent for 3 s is lost; the partition lasts longer.
    net.start_dispatcher("--worker-timeout", "3s")
    w1, w2 = net.start_worker("worker1"), net.start_worker("worker2")
    # distributed_epoch over range(6400): 64 splits of 100 elements; 1 ms per element, so each
    # worker takes about 3 s for its half.
    n, split = 6400, 100
    pipeline = _pipeline(tmp_path, "p", f"op {{ range {{ stop: {n} }} }}\nop {{ map {{ fn {{ sleep {{ micros: 1000 }} }} }} }}\n")
    reader = LineReader(hosts, "trainer", net.read_args(pipeline, "--mode", "distributed_epoch"))
    _wait(lambda: len(reader.elements) >= 1500 or reader.proc.poll() is not None, 30, "1500 elements read")
    assert reader.proc.poll() is None, "the read ended before the partition"
    hosts.set_link("worker1", up=False)
    at_partition = len(reader.elements)
    w2_at_partition = net.served(w2)

    code, got, err = reader.wait(timeout=60)
    # The reader went on with worker2, then ended saying what was lost (guarantees.md,
    # distributed_epoch, "a worker dies mid-epoch"): its task dropped, N splits lost, exit 4.
    assert code == 4, err + net.logs()
    m = re.search(rf"\(1 task\(s\) dropped: worker unreachable: {re.escape(w1.address)}; (\d+) split\(s\) lost\)",
                  err)
    assert m, err
    lost = int(m.group(1))
    assert lost >= 1  # at least the split worker1 was in the middle of
    assert "tfdata: warning: the read lost data:" in err
    assert len(got) == len(set(got)) and set(got) <= set(range(n))  # at most once
    missing = set(range(n)) - set(got)
    # Every missing element lies in a counted split (a counted split may have arrived in part).
    assert len({x // split for x in missing}) <= lost, (sorted(missing)[:20], lost)
    assert len(got) >= n - lost * split
    assert len(got) > at_partition and net.served(w2) > w2_at_partition  # worker2 carried on

    # The dispatcher lost the worker and counts the same splits (scraped from the trainer host).
    d = net.metrics(net.dispatcher, from_host="trainer")
    assert d['tfdata_dispatcher_workers_removed_total{reason="lost"}'] == 1
    assert d['tfdata_dispatcher_workers{state="alive"}'] == 1
    assert d["tfdata_dispatcher_splits_lost_total"] == lost
    assert re.search(rf"worker {re.escape(w1.address)} lost \(silent for more than 3s\); its 1 task\(s\) removed; "
                     rf"{lost} split\(s\) it held are lost", net.dispatcher_log()), net.dispatcher_log()

    # The cable goes back in: the worker's heartbeats reach the dispatcher, which registers it anew.
    # TCP resends what the partition held back at its next retransmission (backed off during the
    # partition: seconds), so the first answers can come late; with a 3 s worker timeout the
    # dispatcher may lose the worker once more before its heartbeats flow. Wait for the worker to
    # hear the dispatcher again and the dispatcher to count it alive.
    hosts.set_link("worker1", up=True)
    _wait(lambda: "dispatcher reachable again" in Hosts.read_log(w1.proc) and
          net.metrics(net.dispatcher, from_host="trainer")['tfdata_dispatcher_workers{state="alive"}'] == 2,
          30, "worker1 alive again")
    assert net.dispatcher_log().count(f"dispatcher: worker {w1.address} registered") >= 2
    # And new reads use it again.
    served = net.served(w1)
    code, got, err = net.read("trainer", _pipeline(tmp_path, "r", "op { range { stop: 100 } }"))
    assert code == 0, err + net.logs()
    assert sorted(got) == sorted(list(range(100)) * 2)
    assert net.served(w1) - served == 100


def test_a_worker_cut_off_from_the_dispatcher_only_briefly_keeps_its_task(net, hosts, tmp_path):
    # The worker timeout is far longer than the cut: the dispatcher keeps the worker.
    net.start_dispatcher("--worker-timeout", "60s")
    w1 = net.start_worker("worker1")
    net.start_worker("worker2")
    n = 12800
    pipeline = _pipeline(tmp_path, "p", f"op {{ range {{ stop: {n} }} }}\nop {{ map {{ fn {{ sleep {{ micros: 1000 }} }} }} }}\n")
    reader = LineReader(hosts, "trainer", net.read_args(pipeline, "--mode", "distributed_epoch"))
    _wait(lambda: len(reader.elements) >= 1000 or reader.proc.poll() is not None, 30, "1000 elements read")
    # worker1 and the dispatcher cannot reach each other for 7 s (longer than one RPC's 5 s
    # deadline, far shorter than --dispatcher-retry); the trainer still reaches both.
    hosts.cut("worker1", "dispatcher")
    time.sleep(7)
    hosts.heal("worker1", "dispatcher")
    code, got, err = reader.wait(timeout=60)
    # The task waited for the dispatcher (--dispatcher-retry) instead of failing on a timed-out call.
    assert "GetSplits: no answer in time" not in Hosts.read_log(w1.proc), Hosts.read_log(w1.proc)
    assert code == 0 and "dropped" not in err, err
    assert sorted(got) == list(range(n))  # nothing lost: no worker was
