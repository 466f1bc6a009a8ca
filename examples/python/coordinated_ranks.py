"""Coordinated reads across two torch.distributed ranks.

Each rank is one consumer of a shared job (consumer_index = rank, num_consumers = world_size):
in every round, all ranks get their element from the same worker, so steps stay in lock-step on
data of one worker (e.g. batches bucketed to similar lengths). Two ranks as processes on this host,
with the gloo backend on loopback; the dispatcher and two workers run in the parent.

    python examples/python/coordinated_ranks.py [--rounds 8]
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tfdata
from tfdata.torch import IterableDataset, consumer_args


def rank_main(rank, world_size, target, dataset_id, rounds, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    ds = tfdata.from_dataset_id("parallel_epochs", target, dataset_id, job_name="coordinated", **consumer_args())
    got = []
    for step, element in enumerate(IterableDataset(ds)):
        got.append(element)
        if step + 1 == rounds:
            break
    # Gather every rank's elements to rank 0: in each round the ranks hold consecutive elements of
    # one worker's stream (2k, 2k+1). Both workers run range(...), so rounds from the two workers
    # repeat each other's values.
    mine = torch.stack(got)
    all_ranks = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(all_ranks, mine)
    if rank == 0:
        for r in range(rounds):
            row = [int(t[r]) for t in all_ranks]
            print(f"round {r}: " + "  ".join(f"rank {i} got {v}" for i, v in enumerate(row)))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    dispatcher = tfdata.DispatchServer(host="127.0.0.1")
    workers = [tfdata.WorkerServer(dispatcher, host="127.0.0.1", heartbeat_interval_ms=100) for _ in range(2)]
    # An infinite pipeline (coordinated reads need one).
    dataset_id = tfdata.register_dataset(dispatcher, tfdata.Pipeline.range(1_000_000).repeat())
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(2, dispatcher.target, dataset_id, args.rounds, port), nprocs=2, join=True)
    for w in workers:
        w.stop()
    dispatcher.stop()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
