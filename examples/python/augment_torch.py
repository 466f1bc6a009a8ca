"""A PyTorch loop whose augmentation, written in Python, runs on two tfdata workers.

JPEGs in tf.train.Example records (the label decides the colour, so a tiny model can learn it).
A dispatcher and two workers start in this process; each worker loads examples/python/augment.py
and runs it in helper processes (its own interpreters, so the calls use every core, not one GIL).
The workers parse, decode (C++), augment (Python) and batch; the loop only trains.

    python examples/python/augment_torch.py [--steps 40] [--records 256]
"""
import argparse
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

import tfdata
from tfdata import fn
from tfdata.torch import IterableDataset

# The same synthetic data as train_torch.py: JPEGs whose colour is the label.
from train_torch import NUM_CLASSES, write_images  # noqa: E402 (this directory is on sys.path)

MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "augment.py")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--records", type=int, default=256)
    parser.add_argument("--helpers", type=int, default=1, help="helper processes per worker")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data:
        write_images(data, args.records)
        dispatcher = tfdata.DispatchServer(host="127.0.0.1")
        workers = [tfdata.WorkerServer(dispatcher, host="127.0.0.1", heartbeat_interval_ms=100,
                                       python_modules=[MODULE], python_helpers=args.helpers)
                   for _ in range(2)]

        pipeline = (tfdata.Pipeline.list_files(os.path.join(data, "*.tfrecord"), shuffle=True, seed=1)
                    .interleave(tfdata.Pipeline().tfrecord(), cycle_length=2)
                    .map(fn.parse_example({"image": "string", "label": "int64"}), fn.decode_jpeg(channels=3))
                    .map(tfdata.py("augment"), num_parallel_calls=args.helpers)
                    .shuffle(256, seed=2)
                    .repeat()
                    .batch(32, drop_remainder=True))
        dataset = pipeline.apply(tfdata.distribute("parallel_epochs", dispatcher.target))

        model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 24 * 24, NUM_CLASSES))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
        loss_fn = nn.CrossEntropyLoss()
        # The function returns (image, label): batches arrive as (N,3,24,24) float32 and (N,) int64.
        loader = torch.utils.data.DataLoader(IterableDataset(dataset), batch_size=None)
        losses, start = [], time.perf_counter()
        for step, (images, labels) in enumerate(loader):
            if step == 0:
                print(f"batch: images {tuple(images.shape)} {images.dtype}, labels {tuple(labels.shape)}")
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step % 10 == 0:
                print(f"step {step:3d}  loss {loss.item():.3f}")
            if step + 1 == args.steps:
                break
        seconds = time.perf_counter() - start
        print(f"{args.steps * 32 / seconds:.0f} augmented images/s from 2 workers")
        first, last = np.mean(losses[:5]), np.mean(losses[-5:])
        print(f"mean loss of the first 5 steps {first:.3f}, of the last 5 {last:.3f}")
        for w in workers:
            w.stop()
        dispatcher.stop()


if __name__ == "__main__":
    main()
