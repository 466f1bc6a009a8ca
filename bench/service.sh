#!/usr/bin/env bash
# Data-plane benchmark: one worker process -> one reader process over loopback gRPC, and the same
# pipelines in process (`tfdata run`) and through `tfdata local` (in-process data plane).
# Prints the summary line of each run. Usage: bench/service.sh [SCALARS] [MIB_ELEMENTS].
# iperf3 runs first and last: the loopback ceiling in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
scalars="${1:-5000000}"
mib="${2:-3000}"
TFDATA_WITH_BENCH=1 scripts/install-deps.sh
scripts/build.sh >/dev/null
bin=./build/tfdata
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
source bench/one_worker.sh
source bench/iperf.sh
# Each configuration three times: loopback figures on a shared 2-core VM vary by +-10 %.
run() { for _ in 1 2 3; do echo "$1: $( { "${@:2}" --format null 2>&1 >/dev/null; } | tail -1)"; done; }
iperf
for p in service_scalars:$scalars service_1mib:$mib; do
  name=${p%%:*}; n=${p##*:}
  run "$name in process (tfdata run)" $bin run "bench/pipelines/$name.pbtxt" --take "$n"
  run "$name via worker process, grpc" $bin read --dispatcher "$addr" "bench/pipelines/$name.pbtxt" --take "$n"
  run "$name tfdata local, local data plane" $bin local "bench/pipelines/$name.pbtxt" --take "$n"
  run "$name tfdata local, grpc data plane" $bin local "bench/pipelines/$name.pbtxt" --take "$n" --transfer grpc
done
# Steady state through the worker process: `tfdata bench --dispatcher` reads after a 1 s warm-up,
# so job start-up (the worker learns of the task at its next heartbeat) is not counted.
for name in service_scalars service_1mib; do
  for _ in 1 2 3; do
    echo "$name via worker process, grpc, steady state: $($bin bench "bench/pipelines/$name.pbtxt" --dispatcher "$addr" \
      --duration 4 --warmup 1 2>/dev/null | grep 'through the service' | tr -s ' ')"
  done
done
iperf
