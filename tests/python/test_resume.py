"""Resumable reads from Python (issue 22): an iterator's state_dict() resumes exactly, also
through torchdata's StatefulDataLoader and for the ranks of a shared job; bad states are
refused with an error that says what."""

import json

import numpy as np
import pytest

import tfdata
from tfdata import Pipeline


def _values(elements):
    return sorted(int(v) for e in elements for v in np.atleast_1d(e))


def _dataset(cluster, **kwargs):
    p = Pipeline.range(3000).shuffle(64, seed=7).batch(10)
    dataset_id = tfdata.register_dataset(cluster.target, p)
    return dataset_id, tfdata.from_dataset_id("distributed_epoch", cluster.target, dataset_id, exactly_once=True,
                                              **kwargs)


def test_state_dict_resumes_exactly_though_the_read_went_on(cluster2):
    dataset_id, ds = _dataset(cluster2)
    it = iter(ds)
    handed = [next(it) for _ in range(37)]
    state = it.state_dict()
    assert json.loads(json.dumps(state)) == state  # JSON-serialisable, for any checkpoint format
    assert len(state["state"]) < 400
    handed_after = [next(it) for _ in range(20)]  # the trainer reads on, then crashes
    it.close()
    del handed_after
    resumed = tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id, state=state)
    rest = list(resumed)
    assert _values(handed + rest) == list(range(3000))
    # load_state_dict on a live iterator restarts it from the state.
    again = iter(ds)
    next(again)
    again.load_state_dict(state)
    assert _values(handed + list(again)) == list(range(3000))


def test_the_ranks_of_a_shared_job_resume_together(cluster2):
    dataset_id, _ = _dataset(cluster2)
    ranks = [iter(tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id, job_name="train",
                                         exactly_once=True, max_outstanding_requests=1)) for _ in range(2)]
    handed = []
    for _ in range(30):  # alternately: either may have fetched most of the job
        for r in ranks:
            element = next(r, None)
            if element is not None:
                handed.append(element)
    states = [r.state_dict() for r in ranks]
    for r in ranks:
        r.close()
    resumed = [iter(tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id,
                                           job_name="train-restart-1", state=states)) for _ in range(2)]
    rest = []
    done = [False, False]
    while not all(done):  # both ranks read their share, alternately
        for i, r in enumerate(resumed):
            if not done[i]:
                try:
                    rest.append(next(r))
                except StopIteration:
                    done[i] = True
    assert _values(handed + rest) == list(range(3000))


def test_bad_states_are_refused_naming_what(cluster):
    dataset_id, ds = _dataset(cluster)
    it = iter(ds)
    next(it)
    state = it.state_dict()
    it.close()
    with pytest.raises(ValueError, match="not a tfdata read state"):
        tfdata.from_dataset_id("distributed_epoch", cluster.target, dataset_id, state={"step": 3})
    with pytest.raises(ValueError, match="resumable reads need processing_mode distributed_epoch"):
        tfdata.from_dataset_id("parallel_epochs", cluster.target, dataset_id, state=state)
    corrupt = dict(state, state=state["state"][:-8] + "AAAAAAA=")
    with pytest.raises(tfdata.DataLossError, match="state 0: corrupted read state|state 0: not a tfdata"):
        iter(tfdata.from_dataset_id("distributed_epoch", cluster.target, dataset_id, state=corrupt))
    other = tfdata.register_dataset(cluster.target, Pipeline.range(10))
    with pytest.raises(tfdata.FailedPreconditionError, match="the read state is of another pipeline"):
        iter(tfdata.from_dataset_id("distributed_epoch", cluster.target, other, state=state))
    plain = iter(tfdata.from_dataset_id("distributed_epoch", cluster.target, dataset_id))
    with pytest.raises(tfdata.FailedPreconditionError, match="exactly_once=True"):
        plain.state_dict()
    plain.close()


def test_stateful_dataloader_round_trip(cluster2):
    torch = pytest.importorskip("torch")
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from tfdata.torch import IterableDataset
    dataset_id, _ = _dataset(cluster2)

    def loader():
        ds = IterableDataset(tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id,
                                                    exactly_once=True))
        return stateful.StatefulDataLoader(ds, batch_size=None, num_workers=0)

    first = loader()
    handed = []
    for i, batch in enumerate(first):
        handed.append(batch)
        if i == 24:
            checkpoint = first.state_dict()
            break
    # What torch.save writes and torch.load reads back.
    import io
    buf = io.BytesIO()
    torch.save({"loader": checkpoint}, buf)
    buf.seek(0)
    restored = torch.load(buf)["loader"]
    second = loader()
    second.load_state_dict(restored)
    rest = list(second)
    values = sorted(int(v) for t in handed + rest for v in t.reshape(-1))
    assert values == list(range(3000))


def test_deterministic_order_is_the_same_whatever_the_workers(cluster, cluster2):
    p = Pipeline.range(2000).shuffle(16, seed=3).batch(5)
    runs = []
    for c in (cluster, cluster2):
        ds = p.apply(tfdata.distribute("distributed_epoch", c.target, deterministic=True))
        runs.append([e.tolist() for e in ds])
    assert runs[0] == runs[1]
    assert _values(runs[0]) == list(range(2000))
    # A resumed deterministic read continues the very sequence.
    dataset_id = tfdata.register_dataset(cluster2.target, p)
    it = iter(tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id, deterministic=True))
    head = [next(it).tolist() for _ in range(57)]
    state = it.state_dict()
    it.close()
    tail = [e.tolist() for e in tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id,
                                                        deterministic=True, state=state)]
    assert head + tail == runs[0]
    with pytest.raises(ValueError, match="no job_name"):
        tfdata.from_dataset_id("distributed_epoch", cluster2.target, dataset_id, deterministic=True, job_name="x")


def test_example_a_training_run_killed_after_its_checkpoint_resumes_exactly(tmpdir_path):
    pytest.importorskip("torch")
    pytest.importorskip("torchdata.stateful_dataloader")
    import os
    import subprocess
    import sys
    from conftest import SOURCE_DIR
    script = os.path.join(SOURCE_DIR, "examples", "python", "resume_torch.py")
    checkpoint = os.path.join(tmpdir_path, "ckpt.pt")
    first = subprocess.run([sys.executable, script, checkpoint], capture_output=True, text=True, timeout=180)
    assert first.returncode == -9, first.stderr  # SIGKILL, 5 steps after its last checkpoint
    assert "dying at step 45" in first.stdout
    second = subprocess.run([sys.executable, script, checkpoint], capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr
    assert "resumed at step 40" in second.stdout
    assert "every element once across the runs: True" in second.stdout
