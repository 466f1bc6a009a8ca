"""Resuming a PyTorch training run's input exactly after a crash (issue 22).

The first run trains, saves a checkpoint every 10 steps (the model, the optimizer, and the
input's read state from torchdata's StatefulDataLoader), and then dies with SIGKILL five steps
after its last checkpoint. The second run loads the checkpoint and goes on. The input resumes
where the checkpoint was taken, not where the first run died, and every element of the epoch is
trained on exactly once across the two runs. Each run starts its own dispatcher and two workers
in this process, so the second run's cluster is a new one.

    python examples/python/resume_torch.py CHECKPOINT_FILE      # run it twice
"""
import os
import signal
import sys

import torch
from torchdata.stateful_dataloader import StatefulDataLoader

import tfdata
from tfdata import Pipeline
from tfdata.torch import IterableDataset

ELEMENTS, BATCH, CHECKPOINT_EVERY, DIE_AFTER = 2048, 16, 10, 45


def main(path):
    dispatcher = tfdata.DispatchServer(host="127.0.0.1")
    workers = [tfdata.WorkerServer(dispatcher, host="127.0.0.1", heartbeat_interval_ms=100) for _ in range(2)]
    # A seeded shuffle and batches after the source: a split's output is a function of the split.
    pipeline = Pipeline.range(ELEMENTS).shuffle(256, seed=3).batch(BATCH)
    dataset = pipeline.apply(tfdata.distribute("distributed_epoch", dispatcher, exactly_once=True))
    loader = StatefulDataLoader(IterableDataset(dataset), batch_size=None, num_workers=0)

    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step, seen = 0, []
    if os.path.exists(path):
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        loader.load_state_dict(checkpoint["input"])
        step, seen = checkpoint["step"], checkpoint["seen"]
        print(f"resumed at step {step} ({len(seen)} elements trained on before)")

    for batch in loader:
        x = batch.float().unsqueeze(1) / ELEMENTS
        loss = torch.nn.functional.mse_loss(model(x), 2 * x + 1)  # learn y = 2x + 1
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen += batch.tolist()
        step += 1
        if step % CHECKPOINT_EVERY == 0:
            checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "input": loader.state_dict(), "step": step, "seen": seen}
            torch.save(checkpoint, path + ".tmp")
            os.replace(path + ".tmp", path)  # a crash leaves the old checkpoint or the new one
        if step == DIE_AFTER and not os.path.exists(path + ".died"):
            open(path + ".died", "w").close()
            print(f"dying at step {step}, {step % CHECKPOINT_EVERY} steps after the last checkpoint", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    print(f"done at step {step}, loss {loss.item():.4f}; every element once across the runs: "
          f"{sorted(seen) == list(range(ELEMENTS))}")
    for w in workers:
        w.stop()
    dispatcher.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
