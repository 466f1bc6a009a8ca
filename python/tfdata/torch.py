"""PyTorch: tfdata's elements as torch tensors, without copies.

    from tfdata.torch import IterableDataset
    ds = IterableDataset(tfdata.from_dataset_id("distributed_epoch", service, dataset_id))
    for batch in torch.utils.data.DataLoader(ds, batch_size=None, pin_memory=True):
        ...

Arrays become tensors through torch.from_numpy, which shares their memory (the received buffer);
Python scalars become 0-d tensors. Batch in the pipeline (``.batch(n)``), not in the DataLoader:
use ``batch_size=None`` and ``num_workers=0``. The service's workers do the preprocessing, and
DataLoader worker processes would each open a reader of their own.

torch is imported here only: ``import tfdata`` works without it.
"""

import numpy as np
import torch
import torch.utils.data


def to_torch(element):
    """An element (array, scalar, bytes, tuple or dict) with every numeric part as a torch tensor.
    bytes and string arrays (object dtype) stay as they are: torch has no string tensors."""
    if isinstance(element, np.ndarray):
        if element.dtype == object:
            return element
        return torch.from_numpy(element)
    if isinstance(element, (bool, int, float)):
        return torch.tensor(element)
    if isinstance(element, tuple):
        return tuple(to_torch(e) for e in element)
    if isinstance(element, dict):
        return {k: to_torch(v) for k, v in element.items()}
    return element


class IterableDataset(torch.utils.data.IterableDataset):
    """A torch IterableDataset over a tfdata dataset: a DistributedDataset (from_dataset_id or
    distribute) read through the service, or a Pipeline run in this process. Each iteration opens
    a new reader (for a DistributedDataset: a new job, unless it has a job_name).

    It is Stateful for ``torchdata.stateful_dataloader.StatefulDataLoader`` (exactly-once service
    reads): state_dict() is where the current iteration stands, and after load_state_dict() the
    next iteration resumes from there, delivering exactly what had not been yielded."""

    def __init__(self, dataset):
        super().__init__()
        if not hasattr(dataset, "__iter__"):
            raise TypeError(f"IterableDataset: expected a tfdata DistributedDataset or Pipeline, "
                            f"got {type(dataset).__name__}")
        self.dataset = dataset
        self._iterator = None  # the current iteration's, for state_dict()
        self._resume = None  # a loaded state, for the next iteration

    @property
    def element_spec(self):
        return self.dataset.element_spec

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError("tfdata.torch.IterableDataset: use DataLoader(num_workers=0); the service's "
                               "workers do the preprocessing, and each DataLoader worker would read the whole "
                               "dataset again")
        dataset = self.dataset
        if self._resume is not None:
            if not hasattr(dataset, "_resumed"):
                raise TypeError("tfdata.torch.IterableDataset: only a DistributedDataset read with "
                                "exactly_once=True resumes from a state")
            dataset, self._resume = dataset._resumed(self._resume), None
        self._iterator = iter(dataset)
        for element in self._iterator:
            yield to_torch(element)

    def state_dict(self):
        """{"tfdata": the current iteration's read state}; None before the first iteration."""
        if self._iterator is None:
            return {"tfdata": self._resume}
        return {"tfdata": self._iterator.state_dict()}

    def load_state_dict(self, state_dict):
        """The next iteration resumes from `state_dict` (from state_dict(); its "tfdata" entry may
        also be the list of the states of every rank of a shared job)."""
        if not isinstance(state_dict, dict) or "tfdata" not in state_dict:
            raise ValueError("load_state_dict: expected the dict state_dict() returns, with a 'tfdata' entry")
        self._resume = state_dict["tfdata"]


def consumer_args():
    """``consumer_index`` and ``num_consumers`` from torch.distributed (rank, world size), for
    coordinated reads: ``from_dataset_id(..., job_name="train", **consumer_args())``. One process
    without torch.distributed is consumer 0 of 1."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return {"consumer_index": torch.distributed.get_rank(),
                "num_consumers": torch.distributed.get_world_size()}
    return {"consumer_index": 0, "num_consumers": 1}
