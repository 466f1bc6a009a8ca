"""Several network hosts on this machine: one Linux network namespace per host, connected through a
bridge, so that tfdata processes talk over real (virtual) network interfaces with their own
addresses, links that can be cut and links that can be slowed.

    with Hosts(["dispatcher", "worker1", "worker2", "trainer"]) as hosts:
        hosts.addr("worker1")                     # "10.213.K.2": the host's address on the bridge
        p = hosts.popen("worker1", [binary, "worker", ...])   # runs `ip netns exec NS binary worker ...`
        hosts.set_link("worker1", up=False)       # pull its cable (the switch port goes down)
        hosts.netem("worker1", rate_mbit=1000)    # shape its link (tc; netem, or tbf for a rate alone)

Layout: each host is a namespace `tfdnh<pid>-<name>` with loopback up and one interface, `eth0`,
holding 10.213.K.<i+1>/24 (K = pid % 256: a private subnet that exists only inside these
namespaces). `eth0` is one end of a veth pair whose other end, `p<i>`, is a port of the bridge
`br0` in a namespace of its own (`tfdnh<pid>--bridge`). Nothing is added to the root namespace:
no interface, no address, no route, so no traffic leaves the namespaces.

Cleanup (`close()`: the context manager's exit and atexit) kills every process started here and
every process left inside the namespaces, then deletes the namespaces. A new Hosts also deletes
namespaces with the prefix left by an earlier run whose process is gone (a crashed test run).

Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2 (`ip`, `tc`); without them the
constructor raises HostsUnavailable, whose message says what is missing (tests skip with it).
"""

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

PREFIX = "tfdnh"
_NAME = re.compile(r"^[a-z][a-z0-9]{0,15}$")
_created = set()  # namespaces made by this process (so a stale one with our pid is told apart)
_created_lock = threading.Lock()


class HostsUnavailable(Exception):
    """Network namespaces cannot be made here; the message says why."""


def _ip(*args, check=True, timeout=10):
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
    return out


def _has_cap_net_admin():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    caps = int(line.split()[1], 16)
                    return bool(caps & (1 << 12)) and bool(caps & (1 << 21))  # NET_ADMIN, SYS_ADMIN
    except OSError:
        pass
    return False


def unavailable_reason():
    """Why namespaces cannot be made here, or None when they can (checked without making any)."""
    if sys.platform != "linux":
        return f"network namespaces need Linux (this is {sys.platform})"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the `{tool}` command is missing (install iproute2: scripts/install-deps.sh)"
    if os.geteuid() != 0 and not _has_cap_net_admin():
        return "network namespaces need root (or CAP_NET_ADMIN and CAP_SYS_ADMIN); this process has neither"
    return None


def _pids_in(ns):
    out = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def _kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _delete_namespace(ns):
    # Processes left inside keep nothing alive (the namespace goes with its last reference), but
    # they are ours: end them, by pid, before the namespace goes.
    _kill_pids(_pids_in(ns))
    _ip("netns", "del", ns, check=False)


def remove_stale_namespaces():
    """Deletes namespaces with our prefix whose creating process is gone (a crashed run)."""
    out = _ip("netns", "list", check=False)
    for line in out.stdout.splitlines():
        ns = line.split()[0] if line.split() else ""
        m = re.match(rf"^{PREFIX}(\d+)-", ns)
        if not m:
            continue
        pid = int(m.group(1))
        with _created_lock:
            ours = ns in _created
        alive = os.path.exists(f"/proc/{pid}")
        if ours or (alive and pid != os.getpid()):
            continue  # this run's, or another live run's
        _delete_namespace(ns)


class Hosts:
    """Network hosts (namespaces) on one bridge. See the module's docstring."""

    def __init__(self, names, log_dir=None):
        reason = unavailable_reason()
        if reason:
            raise HostsUnavailable(reason)
        names = list(names)
        if len(set(names)) != len(names):
            raise ValueError(f"host names must be unique: {names}")
        for n in names:
            if not _NAME.match(n):
                raise ValueError(f"host name {n!r}: lower-case letters and digits, at most 16, starting with a letter")
        if len(names) > 250:
            raise ValueError("at most 250 hosts")
        self.pid = os.getpid()
        self.subnet_id = self.pid % 256
        self.names = names
        self.bridge_ns = f"{PREFIX}{self.pid}--bridge"
        self._ns = {n: f"{PREFIX}{self.pid}-{n}" for n in names}
        self._addr = {n: f"10.213.{self.subnet_id}.{i + 1}" for i, n in enumerate(names)}
        self._port = {n: f"p{i}" for i, n in enumerate(names)}
        self._procs = []
        self._closed = False
        self._netem_ok = None
        self._own_log_dir = log_dir is None
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="netns-hosts-")
        remove_stale_namespaces()
        atexit.register(self.close)
        try:
            self._make()
        except Exception as e:
            self.close()
            if isinstance(e, (RuntimeError, subprocess.TimeoutExpired)):
                raise HostsUnavailable(f"cannot make network namespaces here: {e}") from e
            raise

    # --- construction -----------------------------------------------------------------------

    def _add_namespace(self, ns):
        # A namespace of this name left by an earlier process with our pid (pid namespaces reuse
        # pids) is stale: this Hosts has not made it yet.
        with _created_lock:
            if ns not in _created and os.path.exists(f"/run/netns/{ns}"):
                _delete_namespace(ns)
            _created.add(ns)
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def _make(self):
        br = self.bridge_ns
        self._add_namespace(br)
        _ip("-n", br, "link", "add", "br0", "type", "bridge")
        _ip("-n", br, "link", "set", "br0", "up")
        for n in self.names:
            ns, port = self._ns[n], self._port[n]
            self._add_namespace(ns)
            # Made in the bridge's namespace, the peer born in the host's: the root namespace never
            # holds either end.
            _ip("-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", br, "link", "set", port, "master", "br0")
            _ip("-n", br, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{self._addr[n]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        self._wait_connected()

    def _wait_connected(self, timeout=10.0):
        """Until every eth0 is up with carrier (veth ports come up asynchronously)."""
        deadline = time.monotonic() + timeout
        for n in self.names:
            while True:
                out = _ip("-n", self._ns[n], "-o", "link", "show", "eth0", check=False).stdout
                if "LOWER_UP" in out:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"host {n}: eth0 did not come up: {out.strip()}")
                time.sleep(0.02)

    # --- queries ----------------------------------------------------------------------------

    def ns(self, name):
        """The namespace name of host `name`."""
        return self._ns[name]

    def addr(self, name):
        """Host `name`'s IPv4 address on the bridge."""
        return self._addr[name]

    def link_stats(self, name):
        """Bytes and packets through host `name`'s eth0: {"tx_bytes", "rx_bytes", "tx_packets", "rx_packets"}."""
        return self._iface_stats(self._ns[name], "eth0")

    def loopback_stats(self, name):
        """The same for host `name`'s loopback (traffic between its own processes)."""
        return self._iface_stats(self._ns[name], "lo")

    @staticmethod
    def _iface_stats(ns, iface):
        base = f"/sys/class/net/{iface}/statistics"
        script = "; ".join(f"cat {base}/{k}" for k in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets"))
        # /sys shows the namespace of the process that mounted it: `ip netns exec` remounts it.
        out = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script], capture_output=True, text=True,
                             timeout=10)
        if out.returncode != 0:
            raise RuntimeError(f"{ns}: {iface} statistics: {out.stderr.strip()}")
        values = [int(v) for v in out.stdout.split()]
        return dict(zip(("tx_bytes", "rx_bytes", "tx_packets", "rx_packets"), values))

    # --- processes --------------------------------------------------------------------------

    def popen(self, name, argv, log=None, **kwargs):
        """Starts `argv` on host `name` (`ip netns exec NS argv...`). stdout and stderr go to a log
        file (the returned Popen's `.log`, read with `read_log`) unless given in kwargs. The process
        is killed at cleanup."""
        if self._closed:
            raise RuntimeError("hosts are closed")
        if log is None:
            base = os.path.basename(str(argv[1] if len(argv) > 1 else argv[0]))
            log = os.path.join(self.log_dir, f"{name}-{base}-{len(self._procs)}.log")
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        opened = None
        if "stdout" not in kwargs:
            opened = open(log, "wb")
            kwargs["stdout"] = opened
            kwargs.setdefault("stderr", subprocess.STDOUT)
        try:
            # Its own process group: cleanup ends it and any child it started (e.g. Python helpers).
            p = subprocess.Popen(["ip", "netns", "exec", self._ns[name], *map(str, argv)], start_new_session=True,
                                 **kwargs)
        finally:
            if opened is not None:
                opened.close()
        p.log = log if opened is not None else None
        p.host = name
        self._procs.append(p)
        return p

    def run(self, name, argv, timeout=60, **kwargs):
        """Runs `argv` on host `name` to its end (bounded by `timeout`): a CompletedProcess with text
        stdout and stderr."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(["ip", "netns", "exec", self._ns[name], *map(str, argv)], timeout=timeout,
                              stdin=subprocess.DEVNULL, **kwargs)

    def http_get(self, name, url, timeout=5.0):
        """GETs `url` from host `name` (e.g. a /metrics page across the bridge): the body as text."""
        code = ("import sys, urllib.request; "
                "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])).read().decode())")
        out = self.run(name, [sys.executable, "-c", code, url, str(timeout)], timeout=timeout + 10)
        if out.returncode != 0:
            raise RuntimeError(f"GET {url} from {name}: {out.stderr.strip()[-500:]}")
        return out.stdout

    @staticmethod
    def read_log(proc):
        """What a process started with popen wrote to its log file ("" when its output went elsewhere)."""
        if proc.log is None or not os.path.exists(proc.log):
            return ""
        with open(proc.log, errors="replace") as f:
            return f.read()

    def stop(self, proc, sig=signal.SIGKILL, timeout=10.0):
        """Signals one process started here (by its pid) and waits for it."""
        if proc.poll() is None:
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            return proc.wait(timeout=timeout)

    @staticmethod
    def _kill(proc):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group made by start_new_session: ours
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass

    # --- links ------------------------------------------------------------------------------

    def set_link(self, name, up):
        """Connects (up=True) or disconnects host `name` from the bridge, as a pulled cable or a
        dead switch port: the bridge's port goes down, so the host's eth0 loses carrier and keeps
        its address; packets either way are dropped (no resets: peers see time-outs)."""
        _ip("-n", self.bridge_ns, "link", "set", self._port[name], "up" if up else "down")
        if up:
            deadline = time.monotonic() + 10
            while "LOWER_UP" not in _ip("-n", self._ns[name], "-o", "link", "show", "eth0").stdout:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"host {name}: eth0 did not regain carrier")
                time.sleep(0.02)

    def cut(self, a, b):
        """Partitions hosts `a` and `b` from each other only (both keep their other paths): a
        blackhole route to the other's address in each, so packets between them are discarded
        (established connections time out; new ones fail at once)."""
        for x, y in ((a, b), (b, a)):
            _ip("-n", self._ns[x], "route", "replace", "blackhole", f"{self._addr[y]}/32")

    def heal(self, a, b):
        """Undoes cut(a, b)."""
        for x, y in ((a, b), (b, a)):
            _ip("-n", self._ns[x], "route", "del", "blackhole", f"{self._addr[y]}/32", check=False)

    def netem_supported(self):
        """Whether the kernel has the netem qdisc (sch_netem); tbf (a rate alone) is enough without it."""
        if self._netem_ok is None:
            out = subprocess.run(["tc", "-n", self.bridge_ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                                  "1ms"], capture_output=True, text=True, timeout=10)
            self._netem_ok = out.returncode == 0
            if self._netem_ok:
                subprocess.run(["tc", "-n", self.bridge_ns, "qdisc", "del", "dev", "lo", "root"], capture_output=True,
                               timeout=10)
        return self._netem_ok

    def netem(self, name, delay_ms=None, rate_mbit=None, loss_pct=None):
        """Shapes host `name`'s link in both directions (its eth0's egress and its bridge port's
        egress): `delay_ms` one way, `rate_mbit`, `loss_pct`. Uses netem; when the kernel lacks it,
        a rate alone is applied with tbf, and a delay or loss raises HostsUnavailable."""
        if delay_ms is None and rate_mbit is None and loss_pct is None:
            raise ValueError("netem: give delay_ms, rate_mbit or loss_pct")
        if self.netem_supported():
            qdisc = ["netem"]
            if delay_ms is not None:
                qdisc += ["delay", f"{delay_ms}ms"]
            if loss_pct is not None:
                qdisc += ["loss", f"{loss_pct}%"]
            if rate_mbit is not None:
                qdisc += ["rate", f"{rate_mbit}mbit"]
                # netem's default queue (1000 packets) drops at high rates with delay: room for it.
                qdisc += ["limit", "100000"]
        elif delay_ms is None and loss_pct is None:
            rate_bytes = rate_mbit * 1e6 / 8
            burst = max(int(rate_bytes * 0.005), 64 * 1024)  # 5 ms at the rate: enough at any HZ
            qdisc = ["tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst), "latency", "100ms"]
        else:
            raise HostsUnavailable("tc netem (delay, loss) needs the kernel's sch_netem, which this kernel lacks")
        for ns, dev in ((self._ns[name], "eth0"), (self.bridge_ns, self._port[name])):
            out = subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", *qdisc], capture_output=True,
                                 text=True, timeout=10)
            if out.returncode != 0:
                raise RuntimeError(f"tc qdisc replace dev {dev} root {' '.join(qdisc)}: {out.stderr.strip()}")
        return qdisc[0]

    def clear_netem(self, name):
        """Removes the shaping netem() put on host `name`'s link."""
        for ns, dev in ((self._ns[name], "eth0"), (self.bridge_ns, self._port[name])):
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=10)

    # --- cleanup ----------------------------------------------------------------------------

    def kill_all(self):
        """Kills every process started with popen (their process groups), and waits for them."""
        for p in self._procs:
            self._kill(p)
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._procs = [p for p in self._procs if p.poll() is None]

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            self.kill_all()
        finally:
            for ns in [*self._ns.values(), self.bridge_ns]:
                with _created_lock:
                    made = ns in _created
                if made:
                    _delete_namespace(ns)
                    with _created_lock:
                        _created.discard(ns)
            if self._own_log_dir and os.environ.get("TFDATA_KEEP_HOST_LOGS") != "1":
                shutil.rmtree(self.log_dir, ignore_errors=True)
            try:
                atexit.unregister(self.close)
            except Exception:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
