#!/usr/bin/env bash
# Resumable reads and reproducible order (issue 22), side by side in one run, through worker
# processes and a `tfdata read` reader:
#   1. what keeping and taking a read state costs (build/tfdata_read_state_bench: per element, per state);
#   2. exactly-once reads with and without --save-state (every 1,000 elements, fsync'd), and with
#      --deterministic, on batches of 1,024 int64 and on scalars: elements/s;
#   3. --deterministic where workers race (a sleep per element, WORKERS workers): elements/s and
#      the reorder buffer's peak;
#   4. time to the first element: a fresh read against a resume from a state taken mid-epoch.
# Usage: bench/resume.sh [WORKERS] [BATCHES]
set -euo pipefail
cd "$(dirname "$0")/.."
workers="${1:-2}"
batches="${2:-100000}"
scripts/build.sh >/dev/null
bin=./build/tfdata
tmp=$(mktemp -d)
pids=()
# Workers first (they tell the dispatcher they leave), then the dispatcher.
trap 'kill "${pids[@]:1}" 2>/dev/null || true; sleep 0.3; kill "${pids[0]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $workers worker(s)"
echo "== 1. the read state itself"
./build/tfdata_read_state_bench
$bin dispatcher --port 0 --port-file "$tmp/d" --host 127.0.0.1 2>"$tmp/dispatcher.log" >/dev/null &
pids+=($!)
while [ ! -s "$tmp/d" ]; do sleep 0.05; done
addr="127.0.0.1:$(cat "$tmp/d")"
for i in $(seq "$workers"); do
  $bin worker --dispatcher "$addr" --port-file "$tmp/w$i" --heartbeat-interval 100ms --log-level error >/dev/null &
  pids+=($!)
  while [ ! -s "$tmp/w$i" ]; do sleep 0.05; done
done
sleep 0.3
echo 'op { range { stop: 1000000000000 } } op { batch { batch_size: 1024 } }' >"$tmp/batch.pbtxt"
echo 'op { range { stop: 1000000000000 } }' >"$tmp/scalars.pbtxt"
echo "== 2. throughput: exactly once, + --save-state every 1000, + --deterministic"
for p in batch:$batches scalars:$((batches * 10)); do
  name=${p%%:*}; n=${p##*:}
  for _ in 1 2 3; do
    for opts in "--exactly-once" "--save-state $tmp/s --save-state-every 1000" "--deterministic"; do
      # shellcheck disable=SC2086
      line=$($bin read --dispatcher "$addr" "$tmp/$name.pbtxt" --mode distributed_epoch $opts --take "$n" \
        --format null 2>&1 | tail -1)
      echo "$name, ${opts/$tmp\//}: $line"
    done
  done
done
echo "== 3. workers racing: a 100 us sleep per element, batches of 16 (64 splits of 3,125 elements)"
echo 'op { range { stop: 200000 } } op { map { fn { sleep { micros: 100 } } } } op { batch { batch_size: 16 } }' \
  >"$tmp/slow.pbtxt"
for _ in 1 2; do
  for opts in "--exactly-once" "--deterministic"; do
    # shellcheck disable=SC2086
    line=$($bin read --dispatcher "$addr" "$tmp/slow.pbtxt" --mode distributed_epoch $opts --format null 2>&1 | tail -1)
    echo "slow, $opts: $line"
  done
done
echo "== 4. time to the first element: fresh, and resumed from a state taken half way"
echo 'op { range { stop: 2000000 } } op { batch { batch_size: 64 } }' >"$tmp/half.pbtxt"
$bin read --dispatcher "$addr" "$tmp/half.pbtxt" --mode distributed_epoch --save-state "$tmp/half.state" \
  --take 15000 --format null -q
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for _ in 1 2 3; do
  t=$(date +%s%N)
  $bin read --dispatcher "$addr" "$tmp/half.pbtxt" --mode distributed_epoch --exactly-once --take 1 --format null -q
  fresh=$(ms "$t")
  t=$(date +%s%N)
  $bin read --dispatcher "$addr" "$tmp/half.pbtxt" --mode distributed_epoch --resume "$tmp/half.state" --take 1 \
    --format null -q
  echo "first element (process start included): fresh ${fresh} ms, resumed $(ms "$t") ms; state $(stat -c %s "$tmp/half.state") bytes"
done
