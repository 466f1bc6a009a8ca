#!/usr/bin/env bash
# distributed_epoch (at most once, and exactly once) vs parallel_epochs on a cheap pipeline
# (range -> batch), one reader, through worker processes: the cost of handing out splits, and of
# processing each split on its own with positions on the wire. Prints the summary line of each run and the
# dispatcher's split rate. Usage: bench/distributed.sh [WORKERS] [BATCHES].
set -euo pipefail
cd "$(dirname "$0")/.."
workers="${1:-2}"
batches="${2:-400000}"
scripts/build.sh >/dev/null
bin=./build/tfdata
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $workers worker(s)"
$bin dispatcher --port 0 --port-file "$tmp/d" --host 127.0.0.1 --log-level info 2>"$tmp/dispatcher.log" >/dev/null &
while [ ! -s "$tmp/d" ]; do sleep 0.05; done
addr="127.0.0.1:$(cat "$tmp/d")"
for i in $(seq "$workers"); do
  $bin worker --dispatcher "$addr" --port-file "$tmp/w$i" --heartbeat-interval 100ms --log-level warn >/dev/null &
  while [ ! -s "$tmp/w$i" ]; do sleep 0.05; done
done
sleep 0.3
# Endless sources (1e12 elements, so 65536-element splits): batches of 1024 int64, and scalars.
echo 'op { range { stop: 1000000000000 } } op { batch { batch_size: 1024 } }' >"$tmp/batch.pbtxt"
echo 'op { range { stop: 1000000000000 } }' >"$tmp/scalars.pbtxt"
for p in batch:$batches scalars:$((batches * 10)); do
  name=${p%%:*}; n=${p##*:}
  for _ in 1 2 3; do
    for mode in parallel_epochs distributed_epoch "distributed_epoch --exactly-once"; do
      # shellcheck disable=SC2086
      line=$($bin read --dispatcher "$addr" "$tmp/$name.pbtxt" --mode $mode --take "$n" --format null 2>&1 | tail -1)
      echo "$name, $mode: $line"
    done
  done
done
echo "split rate: a batch run hands out $((batches * 1024 / 65536)) splits, a scalar run $((batches * 10 / 65536)) (divide by the seconds above)"
