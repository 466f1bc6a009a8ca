"""Reading through the service, with tf.data.experimental.service's names and semantics.

    dataset_id = tfdata.register_dataset(dispatcher.target, pipeline)
    for element in tfdata.from_dataset_id("distributed_epoch", dispatcher.target, dataset_id):
        ...

Each iteration of a DistributedDataset is one reader: it joins the job (a job of its own, or the
named one), reads until the job ends, and releases it when the iterator is closed, garbage
collected, or reaches the end.
"""

import base64
import binascii
import enum
import os

from tfdata import _native
from tfdata.pipeline import Pipeline, as_pipeline, make_element_spec, _to_cardinality


class ShardingPolicy(enum.IntEnum):
    """How the workers split a job's work (docs/guarantees.md). The values are proto/service.proto's."""

    OFF = 1            # parallel_epochs: every worker runs the whole pipeline
    DYNAMIC = 2        # distributed_epoch: the source is split among workers; each element once
    FILE = 3           # static: worker i of n reads files i, i+n, ... (needs worker_addresses)
    DATA = 4           # static: worker i of n keeps elements i, i+n, ...
    FILE_OR_DATA = 5   # FILE where the source is files, DATA otherwise
    HINT = 6           # shard ops marked hint get (n, i)


_MODE_NAMES = {
    "parallel_epochs": ShardingPolicy.OFF, "off": ShardingPolicy.OFF,
    "distributed_epoch": ShardingPolicy.DYNAMIC, "dynamic": ShardingPolicy.DYNAMIC,
    "file": ShardingPolicy.FILE, "data": ShardingPolicy.DATA,
    "file_or_data": ShardingPolicy.FILE_OR_DATA, "hint": ShardingPolicy.HINT,
}
_TARGET_WORKERS = {"auto": 0, "any": 1, "local": 2}
_COMPRESSIONS = {"auto": "auto", "snappy": "snappy", "none": "none"}


class CrossTrainerCache:
    """Share a job's elements among trainers (each reads the whole stream from the workers'
    sliding windows): ``from_dataset_id(..., job_name="shared", cross_trainer_cache=
    CrossTrainerCache(trainer_id="trainer 1"))``."""

    def __init__(self, trainer_id):
        if not isinstance(trainer_id, str) or not trainer_id:
            raise ValueError("CrossTrainerCache: trainer_id must be a non-empty str")
        self.trainer_id = trainer_id

    def __repr__(self):
        return f"tfdata.CrossTrainerCache(trainer_id={self.trainer_id!r})"


def _state_bytes(state):
    """The encoded read states in `state`: a state_dict() dict, its bytes, or a list of them (the
    states of every reader of a shared job). Raises ValueError/TypeError naming what is wrong."""
    items = list(state) if isinstance(state, (list, tuple)) else [state]
    if not items:
        raise ValueError("state: an empty list of read states")
    out = []
    for i, item in enumerate(items):
        where = "state" if len(items) == 1 else f"state[{i}]"
        if isinstance(item, (bytes, bytearray, memoryview)):
            out.append(bytes(item))
            continue
        if not isinstance(item, dict):
            raise TypeError(f"{where}: expected a read state (the dict state_dict() returns), got "
                            f"{type(item).__name__}")
        if item.get("tfdata_read_state") != 1 or not isinstance(item.get("state"), str):
            raise ValueError(f"{where}: not a tfdata read state (expected the dict state_dict() returns, with "
                             f"'tfdata_read_state': 1 and 'state'), got keys {sorted(item)}")
        try:
            out.append(base64.b64decode(item["state"], validate=True))
        except binascii.Error as e:
            raise ValueError(f"{where}: its 'state' is not base64 ({e})") from None
    return out


def _mode(processing_mode):
    if isinstance(processing_mode, ShardingPolicy):
        return processing_mode
    if isinstance(processing_mode, str) and processing_mode.lower() in _MODE_NAMES:
        return _MODE_NAMES[processing_mode.lower()]
    raise ValueError(f"processing_mode: unknown processing mode {processing_mode!r} (available: "
                     "'parallel_epochs' (ShardingPolicy.OFF), 'distributed_epoch' (ShardingPolicy.DYNAMIC), "
                     "or ShardingPolicy.FILE, DATA, FILE_OR_DATA, HINT)")


def _address(service):
    """The dispatcher's address from a DispatchServer, "grpc://host:port", "host:port" or
    ("grpc", "host:port")."""
    from tfdata.servers import DispatchServer
    if isinstance(service, DispatchServer):
        return service.target
    if isinstance(service, tuple) and len(service) == 2:
        protocol, address = service
        if protocol != "grpc":
            raise ValueError(f"service: only the grpc protocol is supported, got {protocol!r}")
        return address
    if isinstance(service, str) and service:
        return service
    raise TypeError(f"service: expected the dispatcher's address (e.g. 'grpc://localhost:5050') or a "
                    f"DispatchServer, got {service!r}")


def _compression(compression):
    if compression is None:
        return "none"
    if isinstance(compression, str) and compression.lower() in _COMPRESSIONS:
        return compression.lower()
    raise ValueError(f"compression: {compression!r} is not one of 'auto', 'snappy', None")


def register_dataset(service, dataset, dataset_id=None, compression="AUTO", element_spec=None):
    """Registers a pipeline with the dispatcher and returns its dataset id.

    `dataset` is a Pipeline, pipeline text, or the path of a pipeline file. It is validated here
    first, as ``tfdata register`` does. Registering the same pipeline again returns the same id;
    `dataset_id` chooses the id (an id that names another pipeline is an AlreadyExistsError).
    `compression`: "AUTO" (workers compress when it makes the transfer faster), "SNAPPY", or None.
    `element_spec` is accepted for TensorFlow compatibility and ignored: the engine knows it.
    """
    pipeline = as_pipeline(dataset)
    if dataset_id is not None and (not isinstance(dataset_id, str) or not dataset_id):
        raise ValueError(f"dataset_id: expected a non-empty str, got {dataset_id!r}")
    return _native.register_dataset(address=_address(service), text=pipeline.to_text(), name="<pipeline>",
                                    dataset_id=dataset_id or "", compression=_compression(compression))


class DistributedDataset:
    """A registered dataset read through the service. Iterate it (each iteration is one reader);
    ``element_spec`` is known before the first element."""

    def __init__(self, service, dataset_id, mode, job_name, consumer_index, num_consumers,
                 max_outstanding_requests, data_transfer_protocol, cross_trainer_cache, target_workers,
                 worker_tag, element_spec, exactly_once=False, state=None, deterministic=False):
        self._service = service
        self._dataset_id = dataset_id
        self._mode = mode
        self._job_name = job_name or ""
        self._consumer_index = consumer_index or 0
        self._num_consumers = num_consumers or 0
        self._max_outstanding_requests = max_outstanding_requests
        self._protocol = data_transfer_protocol
        self._trainer_id = cross_trainer_cache.trainer_id if cross_trainer_cache else ""
        self._target_workers = target_workers
        self._worker_tag = worker_tag or ""
        self._given_spec = element_spec
        self._exactly_once = exactly_once
        self._states = _state_bytes(state) if state is not None else []
        self._deterministic = deterministic
        self._info = None

    def _dataset_info(self):
        if self._info is None:
            self._info = _native.dataset_info(self._service, self._dataset_id)
        return self._info

    @property
    def dataset_id(self):
        return self._dataset_id

    @property
    def processing_mode(self):
        return self._mode

    @property
    def pipeline(self):
        """The registered pipeline."""
        return Pipeline(self._dataset_info()[0])

    @property
    def element_spec(self):
        """The type of the elements (None when the pipeline cannot be built on this host, e.g.
        its files exist only on the workers)."""
        if self._given_spec is not None:
            return self._given_spec
        _, spec, names, _ = self._dataset_info()
        return make_element_spec(spec, names)

    def cardinality(self):
        """The pipeline's cardinality (of the whole pipeline, not of this reader's share)."""
        return _to_cardinality(self._dataset_info()[3])

    def __iter__(self):
        # The reader first: its errors (an unknown dataset, say) are the CLI's, word for word.
        it = _native.open_reader(
            address=self._service, dataset_id=self._dataset_id, mode=int(self._mode), job_name=self._job_name,
            num_consumers=self._num_consumers, consumer_index=self._consumer_index,
            max_outstanding_requests=self._max_outstanding_requests, target_workers=self._target_workers,
            worker_tag=self._worker_tag, trainer_id=self._trainer_id, protocol=self._protocol,
            exactly_once=self._exactly_once, deterministic=self._deterministic, states=self._states, names=None)
        names = self._dataset_info()[2]
        if names:
            it._set_names(list(names))
        if it.warning:
            import warnings
            warnings.warn(f"tfdata: {it.warning}", RuntimeWarning, stacklevel=2)
        return it

    def _resumed(self, state):
        """This dataset read from `state` (see from_dataset_id's state)."""
        import copy
        resumed = copy.copy(self)
        resumed._states = _state_bytes(state)
        resumed._exactly_once = self._exactly_once or self._mode == ShardingPolicy.DYNAMIC
        return resumed

    def as_numpy_iterator(self):
        """The same as iter(): elements are numpy arrays and Python scalars already."""
        return iter(self)

    def apply(self, transformation):
        return transformation(self)

    def __repr__(self):
        return (f"tfdata.DistributedDataset(dataset_id={self._dataset_id!r}, "
                f"processing_mode={self._mode.name}, service={self._service!r})")


def _positive_int(value, where, default):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: expected an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{where} must be at least 1, got {value}")
    return value


def from_dataset_id(processing_mode, service, dataset_id, element_spec=None, job_name=None,
                    consumer_index=None, num_consumers=None, max_outstanding_requests=None,
                    data_transfer_protocol=None, cross_trainer_cache=None, target_workers="AUTO",
                    worker_tag=None, exactly_once=False, state=None, deterministic=False):
    """Reads a registered dataset: returns a DistributedDataset to iterate.

    processing_mode: "parallel_epochs" / ShardingPolicy.OFF (every worker runs the whole pipeline),
      "distributed_epoch" / ShardingPolicy.DYNAMIC (each element once across the workers), or a
      static ShardingPolicy (FILE, DATA, FILE_OR_DATA, HINT; the dispatcher needs worker_addresses).
    job_name: readers of the same name share one job (and its elements).
    consumer_index, num_consumers: coordinated reads, round by round across num_consumers readers
      of one job (needs job_name and an infinite pipeline).
    cross_trainer_cache: a CrossTrainerCache: trainers of one job each read the whole stream.
    target_workers: "AUTO", "ANY" or "LOCAL" (workers in this process or on this host).
    worker_tag: read only from workers started with this tag.
    data_transfer_protocol: None or "auto" (default: the fastest plane that reaches each worker:
      in process, else shared memory on this host, else gRPC), "grpc", "shm" (workers on this
      host only) or "local" (workers in this process only, no copies).
    exactly_once: distributed_epoch only: every element once per epoch even when workers die (a
      lost worker's splits are produced again elsewhere; docs/guarantees.md). Each split goes
      through the pipeline on its own, so the pipeline must be deterministic per split (seeded
      shuffles) and have no take/skip/shard/cache after its source: the error names the op.
    state: resume from a read state: an iterator's state_dict() (or the list of those of every
      reader of a shared job, with a new job_name): each iteration delivers exactly what had not
      been handed out when it was taken, then ends the epoch. distributed_epoch (implies
      exactly_once) or static sharding (the same worker list and a deterministic pipeline). A state
      of another pipeline, or of a source whose files changed, is refused (docs/guarantees.md).
    deterministic: the same elements in the same order on every run, whatever the number of
      workers, their speed or their deaths (the job's split order; splits are fetched in parallel
      and put in order in the reader's buffer). Implies exactly_once; needs a job of its own (no
      job_name). With state=, a resumed run continues the very sequence an uninterrupted one sees.
    """
    mode = _mode(processing_mode)
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic: expected a bool, got {type(deterministic).__name__}")
    if deterministic:
        if mode != ShardingPolicy.DYNAMIC:
            raise ValueError("deterministic order needs processing_mode distributed_epoch")
        if job_name is not None:
            raise ValueError("deterministic order needs a reader alone in its job: no job_name")
        exactly_once = True
    if state is not None:
        _state_bytes(state)  # its form now; its fit at the first iteration
        if mode == ShardingPolicy.OFF:
            raise ValueError("state: resumable reads need processing_mode distributed_epoch or static sharding: "
                             "a parallel_epochs read has no position a new job could resume from")
        if num_consumers is not None:
            raise ValueError("state: coordinated reads (num_consumers) do not resume")
        exactly_once = exactly_once or mode == ShardingPolicy.DYNAMIC
    address = _address(service)
    if not isinstance(dataset_id, str) or not dataset_id:
        raise ValueError(f"dataset_id: expected a non-empty str (from register_dataset), got {dataset_id!r}")
    if job_name is not None and (not isinstance(job_name, str) or not job_name):
        raise ValueError(f"job_name: expected a non-empty str, got {job_name!r}")
    if (consumer_index is None) != (num_consumers is None):
        raise ValueError("consumer_index and num_consumers go together: give both or neither")
    if num_consumers is not None:
        num_consumers = _positive_int(num_consumers, "num_consumers", None)
        if isinstance(consumer_index, bool) or not isinstance(consumer_index, int):
            raise TypeError(f"consumer_index: expected an int, got {type(consumer_index).__name__}")
        if not 0 <= consumer_index < num_consumers:
            raise ValueError(f"consumer_index {consumer_index} is outside [0, num_consumers {num_consumers})")
        if job_name is None:
            raise ValueError("coordinated reads (num_consumers) need a job_name shared by the consumers")
        if mode not in (ShardingPolicy.OFF, ShardingPolicy.DYNAMIC):
            raise ValueError("coordinated reads need processing_mode parallel_epochs or distributed_epoch "
                             "(static sharding pins each reader to its local worker)")
    if cross_trainer_cache is not None:
        if not isinstance(cross_trainer_cache, CrossTrainerCache):
            raise TypeError("cross_trainer_cache: expected a tfdata.CrossTrainerCache")
        if job_name is None:
            raise ValueError("cross_trainer_cache needs a job_name shared by the trainers")
        if num_consumers is not None:
            raise ValueError("cross_trainer_cache and coordinated reads (num_consumers) do not go together")
    if not isinstance(target_workers, str) or target_workers.lower() not in _TARGET_WORKERS:
        raise ValueError(f"target_workers: {target_workers!r} is not one of 'AUTO', 'ANY', 'LOCAL'")
    protocol = data_transfer_protocol or "auto"
    if protocol not in ("auto", "grpc", "shm", "local"):
        raise ValueError(
            f"data_transfer_protocol: {data_transfer_protocol!r} is not one of 'auto', 'grpc', 'shm', 'local'")
    if worker_tag is not None and not isinstance(worker_tag, str):
        raise TypeError(f"worker_tag: expected a str, got {type(worker_tag).__name__}")
    if not isinstance(exactly_once, bool):
        raise TypeError(f"exactly_once: expected a bool, got {type(exactly_once).__name__}")
    if exactly_once and mode != ShardingPolicy.DYNAMIC:
        raise ValueError("exactly_once needs processing_mode distributed_epoch")
    if exactly_once and num_consumers is not None:
        raise ValueError("exactly_once and coordinated reads (num_consumers) do not go together")
    return DistributedDataset(
        address, dataset_id, mode, job_name, consumer_index, num_consumers,
        _positive_int(max_outstanding_requests, "max_outstanding_requests", 4), protocol, cross_trainer_cache,
        _TARGET_WORKERS[target_workers.lower()], worker_tag, element_spec, exactly_once, state, deterministic)


def distribute(processing_mode, service, job_name=None, consumer_index=None, num_consumers=None,
               max_outstanding_requests=None, data_transfer_protocol=None, compression="AUTO",
               cross_trainer_cache=None, target_workers="AUTO", worker_tag=None, exactly_once=False,
               deterministic=False):
    """Registers and reads in one step, as a transformation for ``pipeline.apply(...)``.

    Takes the arguments of from_dataset_id and register_dataset's compression; returns a function
    of a pipeline that returns its DistributedDataset.
    """
    # Check the arguments now, not when the transformation is applied.
    _mode(processing_mode)
    _address(service)
    _compression(compression)

    def _apply(dataset):
        dataset_id = register_dataset(service, dataset, compression=compression)
        return from_dataset_id(processing_mode, service, dataset_id, job_name=job_name,
                               consumer_index=consumer_index, num_consumers=num_consumers,
                               max_outstanding_requests=max_outstanding_requests,
                               data_transfer_protocol=data_transfer_protocol,
                               cross_trainer_cache=cross_trainer_cache, target_workers=target_workers,
                               worker_tag=worker_tag, exactly_once=exactly_once, deterministic=deterministic)
    return _apply
