"""Dispatcher and worker servers in this Python process, as tf.data.experimental.service has them.

The servers are the C++ ones (the same as `tfdata dispatcher` and `tfdata worker`): they run on
their own threads and never take the GIL, so a trainer process can host a worker next to its
training loop. Times are in milliseconds, as in TensorFlow's configs.
"""

import dataclasses
import os
import sys
import time
from typing import Optional, Sequence

from tfdata import _native


@dataclasses.dataclass
class DispatcherConfig:
    """tf.data.experimental.service.DispatcherConfig, with tfdata's extras (host)."""

    port: int = 0
    protocol: str = "grpc"
    work_dir: Optional[str] = None
    fault_tolerant_mode: bool = False
    worker_addresses: Optional[Sequence[str]] = None
    job_gc_check_interval_ms: Optional[int] = None  # accepted for TF compatibility; the check runs every second
    job_gc_timeout_ms: Optional[int] = None          # default 5 minutes; -1: never
    client_timeout_ms: Optional[int] = None          # default 5 minutes
    worker_timeout_ms: Optional[int] = None          # default 10 minutes
    host: str = "0.0.0.0"
    # Directories list_files may list (dispatcher --allowed-path); None: any (as `tfdata local`).
    allowed_paths: Optional[Sequence[str]] = None
    # TLS and the shared token (dispatcher --tls-cert, --tls-key, --tls-ca, --auth-token-file): PEM
    # files; with tls_ca, clients must present a certificate signed by it (mutual TLS).
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    tls_ca: Optional[str] = None
    auth_token_file: Optional[str] = None


@dataclasses.dataclass
class WorkerConfig:
    """tf.data.experimental.service.WorkerConfig, with tfdata's extras (host, allow_plugins)."""

    dispatcher_address: str = ""
    worker_address: Optional[str] = None  # default "localhost:%port%"
    port: int = 0
    protocol: str = "grpc"
    heartbeat_interval_ms: Optional[int] = None    # default 1 s
    dispatcher_timeout_ms: Optional[int] = None    # how long a task retries an unreachable dispatcher; default 30 s
    data_transfer_protocol: Optional[str] = None   # accepted for TF compatibility; readers choose the plane
    worker_tags: Sequence[str] = ()
    cross_trainer_cache_size_bytes: Optional[int] = None  # default 256 MiB
    max_task_memory_bytes: Optional[int] = None  # what one task's pipeline may hold; default a quarter of RAM
    allow_plugins: bool = False
    host: str = "0.0.0.0"
    # Directories pipelines may open files under, checked after symlinks are resolved (worker
    # --allowed-path); None: any file this process can read (as `tfdata local`).
    allowed_paths: Optional[Sequence[str]] = None
    # TLS and the shared token, for both the worker's server and its calls to the dispatcher (worker
    # --tls-cert, --tls-key, --tls-ca, --auth-token-file).
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    tls_ca: Optional[str] = None
    auth_token_file: Optional[str] = None
    # Python functions (docs/python.md): modules whose @tfdata.function registrations pipelines may
    # call, run in `python_helpers` helper processes (0: one per core) of the interpreter `python`
    # (default: this one). Without modules, the functions registered in this process run here.
    python_modules: Sequence[str] = ()
    python: Optional[str] = None
    python_helpers: int = 0
    python_call_timeout_ms: Optional[int] = None  # default 60 s


def _python_modules(modules):
    if isinstance(modules, (str, os.PathLike)):
        raise TypeError("python_modules: expected a list of module names or .py paths, got one str")
    return [os.fspath(m) for m in modules]


def _seconds(ms, default_s, where, allow_never=True):
    if ms is None:
        return default_s
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        raise TypeError(f"{where}: expected milliseconds as a number, got {type(ms).__name__}")
    if ms == -1 and allow_never:
        return -1.0
    if ms <= 0:
        raise ValueError(f"{where}: must be positive{' (or -1 for never)' if allow_never else ''}, got {ms}")
    return ms / 1000.0


def _paths(paths):
    if paths is None:
        return []
    if isinstance(paths, (str, bytes)) or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise TypeError(f"allowed_paths: expected a list of directories, got {paths!r}")
    return [os.fspath(p) for p in paths]


def _file(path, where):
    if path is None:
        return ""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{where}: expected a file path, got {type(path).__name__}")
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{where}: empty path (give None for none)")
    return path


def _security(c):
    return dict(tls_cert=_file(c.tls_cert, "tls_cert"), tls_key=_file(c.tls_key, "tls_key"),
                tls_ca=_file(c.tls_ca, "tls_ca"), auth_token_file=_file(c.auth_token_file, "auth_token_file"))


def set_client_security(tls_ca=None, tls_cert=None, tls_key=None, auth_token_file=None):
    """Makes this process's clients (readers, register_dataset, from_dataset_id) use TLS and a token.

    tls_ca verifies the servers' certificates (TLS on); tls_cert and tls_key are the client
    certificate for servers that require one (mutual TLS); auth_token_file holds the token the
    servers were started with. Applies to clients made from now on; call it before the first read.
    With no argument, back to plaintext without a token. Servers in this process take theirs from
    their configs.
    """
    _native.set_client_security(tls_cert=_file(tls_cert, "tls_cert"), tls_key=_file(tls_key, "tls_key"),
                                tls_ca=_file(tls_ca, "tls_ca"),
                                auth_token_file=_file(auth_token_file, "auth_token_file"))


def _check_port(port):
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port: expected an int, got {type(port).__name__}")
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be 0..65535, got {port}")


def _check_protocol(protocol):
    if protocol not in ("grpc", None):
        raise ValueError(f"protocol: only 'grpc' is supported, got {protocol!r}")


class _Server:
    _native_server = None

    def _init(self, config, start):
        _check_port(config.port)
        _check_protocol(config.protocol)
        self._config = config
        if start:
            self.start()

    def start(self):
        """Starts the server (when created with start=False). Idempotent."""
        if self._native_server is None:
            self._native_server = self._create(self._config)

    def _started(self):
        if self._native_server is None:
            raise RuntimeError(f"{type(self).__name__} is not started: call start() first")
        return self._native_server

    @property
    def port(self):
        """The port the server listens on (chosen by the system for port 0)."""
        return self._started().port

    def join(self):
        """Blocks until the server is stopped (Ctrl-C raises KeyboardInterrupt here)."""
        while self._native_server is not None and not self._native_server.stopped:
            time.sleep(0.1)

    def stop(self):
        """Stops the server: calls in flight are cancelled. Idempotent."""
        if self._native_server is not None:
            self._native_server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __del__(self):
        try:
            self.stop()
        except Exception:  # interpreter shutdown: nothing to report to
            pass


class DispatchServer(_Server):
    """A dispatcher, in this process.

    ``DispatchServer()`` listens on a free port; ``.target`` is the address readers and workers
    use (``"grpc://localhost:PORT"``). Takes a DispatcherConfig or its fields as keywords.
    """

    def __init__(self, config=None, start=True, **kwargs):
        if isinstance(config, int) and not isinstance(config, bool):
            kwargs["port"] = config
            config = None
        if config is None:
            config = DispatcherConfig(**kwargs)
        elif kwargs:
            raise TypeError("DispatchServer: give a DispatcherConfig or keyword arguments, not both")
        elif not isinstance(config, DispatcherConfig):
            raise TypeError(f"DispatchServer: expected a DispatcherConfig, got {type(config).__name__}")
        if config.fault_tolerant_mode and not config.work_dir:
            raise ValueError("fault_tolerant_mode needs a work_dir (where the journal is kept)")
        if isinstance(config.worker_addresses, str):
            raise TypeError("worker_addresses: expected a list of 'host:port' strings, got one str")
        self._init(config, start)

    @staticmethod
    def _create(c):
        return _native.DispatchServer(
            port=c.port, host=c.host, work_dir=c.work_dir or "", fault_tolerant=c.fault_tolerant_mode,
            worker_addresses=list(c.worker_addresses or []),
            worker_timeout_s=_seconds(c.worker_timeout_ms, 600.0, "worker_timeout_ms"),
            client_timeout_s=_seconds(c.client_timeout_ms, 300.0, "client_timeout_ms"),
            job_gc_timeout_s=_seconds(c.job_gc_timeout_ms, 300.0, "job_gc_timeout_ms"),
            allowed_paths=_paths(c.allowed_paths), **_security(c))

    @property
    def target(self):
        """``"grpc://localhost:PORT"``: pass it as ``service=`` or as a worker's dispatcher_address."""
        return f"grpc://localhost:{self.port}"

    @property
    def num_workers(self):
        """Workers registered (and not lost) at the moment."""
        return self._started().num_workers

    def __repr__(self):
        return f"tfdata.DispatchServer(target={self.target!r})"


class WorkerServer(_Server):
    """A worker, in this process: ``WorkerServer(dispatcher.target)`` or a WorkerConfig.

    The dispatcher address may be a DispatchServer, ``"grpc://host:port"`` or ``"host:port"``.
    """

    def __init__(self, config=None, start=True, **kwargs):
        if isinstance(config, DispatchServer):
            config = config.target
        if isinstance(config, str):
            kwargs["dispatcher_address"] = config
            config = None
        if config is None:
            config = WorkerConfig(**kwargs)
        elif kwargs:
            raise TypeError("WorkerServer: give a WorkerConfig or keyword arguments, not both")
        elif not isinstance(config, WorkerConfig):
            raise TypeError(f"WorkerServer: expected a WorkerConfig or a dispatcher address, "
                            f"got {type(config).__name__}")
        if isinstance(config.dispatcher_address, DispatchServer):
            config.dispatcher_address = config.dispatcher_address.target
        if not isinstance(config.dispatcher_address, str) or not config.dispatcher_address:
            raise ValueError("WorkerServer: dispatcher_address is required (e.g. dispatcher.target)")
        if isinstance(config.worker_tags, str):
            raise TypeError("worker_tags: expected a list of str, got one str")
        self._init(config, start)

    @staticmethod
    def _create(c):
        cache = c.cross_trainer_cache_size_bytes
        memory = c.max_task_memory_bytes
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
            raise ValueError(f"max_task_memory_bytes: expected a positive number of bytes, got {memory!r}")
        return _native.WorkerServer(
            dispatcher_address=c.dispatcher_address, port=c.port, host=c.host,
            worker_address=c.worker_address or "localhost:%port%", tags=list(c.worker_tags),
            heartbeat_interval_s=_seconds(c.heartbeat_interval_ms, 1.0, "heartbeat_interval_ms", allow_never=False),
            allow_plugins=bool(c.allow_plugins),
            cross_trainer_cache_bytes=256 << 20 if cache is None else cache,
            dispatcher_retry_s=_seconds(c.dispatcher_timeout_ms, 30.0, "dispatcher_timeout_ms"),
            max_task_memory_bytes=0 if memory is None else memory,
            allowed_paths=_paths(c.allowed_paths),
            python_modules=_python_modules(c.python_modules), python=c.python or sys.executable,
            python_helpers=c.python_helpers,
            python_call_timeout_s=_seconds(c.python_call_timeout_ms, 60.0, "python_call_timeout_ms",
                                           allow_never=False),
            **_security(c))

    def stop(self, leave=True):
        """Stops the worker. Idempotent. `leave` (the default): it first tells the dispatcher, which
        removes it and its tasks at once (readers stop asking it; in distributed_epoch the splits
        it had not started go to other workers), as ``tfdata worker`` does on SIGTERM. With
        ``leave=False`` it stops as a crash would: the dispatcher finds out after
        ``worker_timeout_ms`` or from readers' reports."""
        if self._native_server is not None:
            self._native_server.stop(leave=leave)

    @property
    def worker_address(self):
        """The address the worker gives the dispatcher and readers (``"localhost:PORT"``)."""
        return self._started().address

    @property
    def num_tasks(self):
        """Tasks the worker runs at the moment."""
        return self._started().num_tasks

    def __repr__(self):
        return f"tfdata.WorkerServer(worker_address={self.worker_address!r})"
