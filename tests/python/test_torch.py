"""PyTorch: tensors without copies, DataLoader, torch.distributed ranks; and the examples."""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tfdata  # noqa: E402
from tfdata import fn, Pipeline  # noqa: E402
from tfdata.torch import IterableDataset, consumer_args, to_torch  # noqa: E402
from conftest import SOURCE_DIR  # noqa: E402


def test_tensors_share_the_received_buffer(cluster):
    p = Pipeline.from_tensor_slices(np.arange(3 * 1024, dtype=np.float32).reshape(3, 1024))
    ds = IterableDataset(p.apply(tfdata.distribute("parallel_epochs", cluster.target)))
    it = iter(ds.dataset)
    array = next(it)
    tensor = to_torch(array)
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    assert tensor.data_ptr() == array.__array_interface__["data"][0]  # the same memory
    assert tensor.data_ptr() == array.base.data_address
    it.close()
    got = [t for t in ds]
    assert [t.shape for t in got] == [torch.Size([1024])] * 3 and float(got[2][0]) == 2048.0


def test_dataloader_batch_size_none_dicts_and_scalars(cluster, tmpdir_path):
    path = os.path.join(tmpdir_path, "ex.tfrecord")
    tfdata.io.write_tfrecord(path, [tfdata.io.example(label=i, x=[float(i)] * 4) for i in range(8)])
    p = (Pipeline.tfrecord(path).map(fn.parse_example({"label": "int64", "x": {"dtype": "float32", "shape": [4]}}))
         .batch(4))
    loader = torch.utils.data.DataLoader(IterableDataset(p.apply(tfdata.distribute("parallel_epochs",
                                                                                   cluster.target))),
                                         batch_size=None)
    batches = list(loader)
    assert len(batches) == 2
    assert batches[1]["label"].tolist() == [4, 5, 6, 7] and batches[1]["x"].shape == (4, 4)
    scalars = list(IterableDataset(Pipeline.range(3)))  # a Pipeline runs in process
    assert all(isinstance(t, torch.Tensor) and t.dim() == 0 for t in scalars)
    assert [int(t) for t in scalars] == [0, 1, 2]
    assert to_torch((b"x", 1.5)) == (b"x", torch.tensor(1.5))


def test_dataloader_with_worker_processes_is_refused(cluster):
    loader = torch.utils.data.DataLoader(IterableDataset(Pipeline.range(4)), batch_size=None, num_workers=2)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        list(loader)


def test_consumer_args_without_torch_distributed():
    assert consumer_args() == {"consumer_index": 0, "num_consumers": 1}
    with pytest.raises(TypeError):
        IterableDataset(42)


def run_example(name, *args, timeout=180):
    out = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "examples", "python", name), *args],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_example_training_loop_learns():
    out = run_example("train_torch.py", "--steps", "40", "--records", "128")
    last = out.strip().splitlines()[-1]
    first_loss, last_loss = [float(x) for x in last.replace(",", "").split() if x[0].isdigit() and "." in x]
    assert last_loss < first_loss / 2, out


def test_example_python_augmentation_on_two_workers_trains():
    out = run_example("augment_torch.py", "--steps", "40", "--records", "128")
    assert "batch: images (32, 3, 24, 24) torch.float32, labels (32,)" in out, out
    last = out.strip().splitlines()[-1]
    first_loss, last_loss = [float(x) for x in last.replace(",", "").split() if x[0].isdigit() and "." in x]
    assert last_loss < first_loss / 2, out


def test_example_coordinated_reads_two_ranks():
    out = run_example("coordinated_ranks.py", "--rounds", "6")
    rounds = [line for line in out.splitlines() if line.startswith("round ")]
    assert len(rounds) == 6
    for line in rounds:
        a, b = [int(w) for w in line.split() if w.isdigit()][1::2][-2:]
        assert a % 2 == 0 and b == a + 1, line  # both ranks' elements come from one worker's round

