"""distributed_epoch over TFRecord files: two workers share one epoch, each record once.

The dispatcher hands out the files (splits) of list_files to the workers as they ask; every
record of the epoch reaches the reader once, whichever worker read it.

    python examples/python/distributed_epoch_tfrecord.py [--files 8] [--records 100]
"""
import argparse
import collections
import os
import tempfile

import tfdata
from tfdata import fn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--records", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        for f in range(args.files):
            tfdata.io.write_tfrecord(os.path.join(data, f"part-{f:03d}.tfrecord"),
                                     [tfdata.io.example(id=f * args.records + r) for r in range(args.records)])
        dispatcher = tfdata.DispatchServer(host="127.0.0.1")
        workers = [tfdata.WorkerServer(dispatcher, host="127.0.0.1", heartbeat_interval_ms=100) for _ in range(2)]
        pipeline = (tfdata.Pipeline.list_files(os.path.join(data, "*.tfrecord"))
                    .tfrecord()
                    .map(fn.parse_example({"id": "int64"})))
        dataset = pipeline.apply(tfdata.distribute("distributed_epoch", dispatcher.target))
        counts = collections.Counter(element["id"] for element in dataset)
        total = args.files * args.records
        once = sum(1 for i in range(total) if counts[i] == 1)
        print(f"read {sum(counts.values())} records of {total}; {once} exactly once")
        for w in workers:
            w.stop()
        dispatcher.stop()


if __name__ == "__main__":
    main()
