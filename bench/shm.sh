#!/usr/bin/env bash
# The shared-memory data plane against gRPC, side by side in one run: one worker process and one
# reader process on this host, 1 MiB elements and int64 scalars; the C++ reader's steady state
# (`tfdata bench --dispatcher --transfer`, after a 1 s warm-up), whole `tfdata read`s (job start-up
# included), and the Python client (bench/python_read.py). iperf3 runs first and last: the
# loopback TCP ceiling of any gRPC plane, in the same run. Each figure three times.
# Usage: bench/shm.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
TFDATA_WITH_BENCH=1 scripts/install-deps.sh
source bench/python_build.sh
bin=./build/tfdata
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
source bench/one_worker.sh
source bench/iperf.sh
iperf
for name in service_1mib service_scalars; do
  for i in $(seq "$runs"); do
    for t in grpc shm; do
      echo "$name $t steady state (C++ reader): $($bin bench "bench/pipelines/$name.pbtxt" --dispatcher "$addr" \
        --duration 3 --warmup 1 --transfer $t 2>/dev/null | grep 'through the service' | tr -s ' ')"
    done
  done
done
n_of() { [[ $1 == service_1mib ]] && echo 6000 || echo 3000000; }
for name in service_1mib service_scalars; do
  for i in $(seq "$runs"); do
    for t in grpc shm; do
      echo "$name $t whole read: $( { $bin read --dispatcher "$addr" "bench/pipelines/$name.pbtxt" --take "$(n_of $name)" \
        --format null --transfer $t 2>&1 >/dev/null; } | tail -1)"
    done
  done
done
for name in service_1mib service_scalars; do
  for i in $(seq "$runs"); do
    for t in grpc shm; do
      echo "$name $t Python client: $(.venv/bin/python bench/python_read.py "bench/pipelines/$name.pbtxt" \
        --dispatcher "$addr" --duration 3 --transfer $t | .venv/bin/python -c \
        'import json,sys; d=json.loads(sys.stdin.read()); print("%.0f k/s %.2f GB/s" % (d["elements_per_s"]/1e3, d["bytes_per_s"]/1e9))')"
    done
  done
done
iperf
