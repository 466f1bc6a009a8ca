"""TensorFlow's tf.data service for bench/vs_tensorflow.sh: a dispatcher and N workers in this one
process (TF's servers are C++ threads; a sleep-bound or single-reader benchmark does not need a
process each). Writes the dispatcher's target to --target-file, then keeps the number of workers
at what --workers-file says (it only grows: TF has no way to stop one worker of a job cleanly),
writing the count it reached to --workers-file + ".ready". Runs until killed.

    python tf_service.py --target-file F --workers-file W
"""
import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402

service = tf.data.experimental.service


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target-file", required=True)
    parser.add_argument("--workers-file", required=True)
    args = parser.parse_args()
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    workers = []
    with open(args.target_file + ".tmp", "w") as f:
        f.write(dispatcher.target)
    os.rename(args.target_file + ".tmp", args.target_file)
    while True:
        try:
            with open(args.workers_file) as f:
                want = int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            want = 0
        if want > len(workers):
            while len(workers) < want:
                workers.append(service.WorkerServer(
                    service.WorkerConfig(dispatcher_address=address, heartbeat_interval_ms=100)))
            time.sleep(0.5)  # their first heartbeats
            with open(args.workers_file + ".ready.tmp", "w") as f:
                f.write(str(len(workers)))
            os.rename(args.workers_file + ".ready.tmp", args.workers_file + ".ready")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
