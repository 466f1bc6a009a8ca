"""A small PyTorch training loop fed by tfdata: synthetic TFRecord images, two workers.

The images are written as JPEGs in tf.train.Example records (the label decides the colour, so a
tiny model can learn it). A dispatcher and two workers run in this process; the workers decode,
resize, normalize and batch, and the training loop only trains.

    python examples/python/train_torch.py [--steps 60] [--records 256]
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn

import tfdata
from tfdata import fn
from tfdata.torch import IterableDataset

NUM_CLASSES = 4


def write_images(directory, records, files=4, size=32, seed=0):
    rng = np.random.default_rng(seed)
    for f in range(files):
        examples = []
        for r in range(records // files):
            label = int(rng.integers(NUM_CLASSES))
            image = rng.integers(0, 40, (size, size, 3)).astype(np.uint8)
            image[:, :, label % 3] += 150 if label < 3 else 0  # class 3: dark
            examples.append(tfdata.io.example(image=tfdata.io.encode_jpeg(image), label=label))
        tfdata.io.write_tfrecord(os.path.join(directory, f"train-{f}.tfrecord"), examples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--records", type=int, default=256)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data:
        write_images(data, args.records)
        dispatcher = tfdata.DispatchServer(host="127.0.0.1")
        workers = [tfdata.WorkerServer(dispatcher, host="127.0.0.1", heartbeat_interval_ms=100) for _ in range(2)]

        pipeline = (tfdata.Pipeline.list_files(os.path.join(data, "*.tfrecord"), shuffle=True, seed=1)
                    .interleave(tfdata.Pipeline().tfrecord(), cycle_length=2)
                    .map(fn.parse_example({"image": "string", "label": "int64"}),
                         fn.decode_jpeg(channels=3), fn.resize(24, 24),
                         fn.normalize(mean=[127.5], std=[127.5]), num_parallel_calls=-1)
                    .shuffle(256, seed=2)
                    .repeat()
                    .batch(32, drop_remainder=True))
        dataset = pipeline.apply(tfdata.distribute("parallel_epochs", dispatcher.target))
        print("element_spec:", dataset.element_spec)

        model = nn.Sequential(nn.Flatten(), nn.Linear(24 * 24 * 3, NUM_CLASSES))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        loss_fn = nn.CrossEntropyLoss()
        # batch_size=None: the pipeline batches. Elements are dicts of tensors that alias the
        # received buffers (torch.from_numpy, no copy).
        loader = torch.utils.data.DataLoader(IterableDataset(dataset), batch_size=None)
        losses = []
        for step, batch in enumerate(loader):
            images = batch["image"].permute(0, 3, 1, 2)  # NHWC -> NCHW
            loss = loss_fn(model(images), batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step % 20 == 0:
                print(f"step {step:3d}  loss {loss.item():.3f}")
            if step + 1 == args.steps:
                break
        first, last = np.mean(losses[:5]), np.mean(losses[-5:])
        print(f"mean loss of the first 5 steps {first:.3f}, of the last 5 {last:.3f}")
        for w in workers:
            w.stop()
        dispatcher.stop()


if __name__ == "__main__":
    main()
