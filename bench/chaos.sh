#!/usr/bin/env bash
# Chaos run: a reader reads a distributed_epoch job while workers and the fault-tolerant
# dispatcher are killed (SIGKILL) and restarted at random. At the end it reports the elements
# delivered, duplicates (must be 0), missing elements and the splits the reader counted lost, and
# any process that died on its own (a crash). Usage: bench/chaos.sh [--exactly-once] [SECONDS] [WORKERS]
# [SEED]. With --exactly-once the read asks for exactly-once delivery, over a pipeline with a seeded
# shuffle and a batch, and the run also fails on any missing element.
set -uo pipefail
cd "$(dirname "$0")/.."
exactly_once=0
if [ "${1:-}" = "--exactly-once" ]; then exactly_once=1; shift; fi
seconds="${1:-120}"
nworkers="${2:-3}"
RANDOM="${3:-$$}"  # the seed of the kill schedule
scripts/build.sh >/dev/null || exit 1
tmp=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
# A copy: a rebuild during the run must not make a restart fail.
cp ./build/tfdata "$tmp/tfdata"
bin="$tmp/tfdata"
n=$((seconds * 8000))  # elements: about the run's length at 200 us each over the workers

start_dispatcher() {
  rm -f "$tmp/d.port"
  $bin dispatcher --host 127.0.0.1 --port "${port:-0}" --port-file "$tmp/d.port" --work-dir "$tmp/work" \
    --fault-tolerant --worker-timeout 2s --log-level info 2>>"$tmp/dispatcher.log" >/dev/null &
  dpid=$!
  for _ in $(seq 200); do [ -s "$tmp/d.port" ] && break; kill -0 $dpid 2>/dev/null || break; sleep 0.05; done
  if [ ! -s "$tmp/d.port" ]; then echo "the dispatcher did not start; its log:"; tail -3 "$tmp/dispatcher.log"; exit 1; fi
  port=$(cat "$tmp/d.port")
}
start_worker() {  # $1: slot
  rm -f "$tmp/w$1.port"
  $bin worker --dispatcher "127.0.0.1:$port" --host 127.0.0.1 --worker-address "127.0.0.1:%port%" \
    --port-file "$tmp/w$1.port" --heartbeat-interval 200ms --log-level warn 2>>"$tmp/worker$1.log" >/dev/null &
  wpid[$1]=$!
}

start_dispatcher
for i in $(seq "$nworkers"); do start_worker "$i"; done
sleep 1
if [ $exactly_once -eq 1 ]; then
  echo "op { range { stop: $n } } op { map { fn { sleep { micros: 200 } } } }" \
    "op { shuffle { buffer_size: 64 seed: 7 } } op { batch { batch_size: 8 } }" >"$tmp/p.pbtxt"
  read_flags="--exactly-once"
else
  echo "op { range { stop: $n } } op { map { fn { sleep { micros: 200 } } } }" >"$tmp/p.pbtxt"
  read_flags=""
fi
# shellcheck disable=SC2086
$bin read --dispatcher "127.0.0.1:$port" "$tmp/p.pbtxt" --mode distributed_epoch $read_flags \
  >"$tmp/out" 2>"$tmp/reader.log" &
rpid=$!

kills_w=0; kills_d=0; crashes=0
end=$((SECONDS + seconds))
while [ $SECONDS -lt $end ] && kill -0 $rpid 2>/dev/null; do
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.1f", 1 + r % 30 / 10 }')"
  # Anything that exited without being killed by us crashed.
  for i in $(seq "$nworkers"); do
    if ! kill -0 "${wpid[$i]}" 2>/dev/null; then crashes=$((crashes + 1)); echo "worker $i died on its own"; start_worker "$i"; fi
  done
  if ! kill -0 $dpid 2>/dev/null; then crashes=$((crashes + 1)); echo "dispatcher died on its own"; start_dispatcher; fi
  if [ $((RANDOM % 4)) -eq 0 ]; then
    kill -9 $dpid; wait $dpid 2>/dev/null; kills_d=$((kills_d + 1))
    sleep 0.3; start_dispatcher
  else
    i=$((RANDOM % nworkers + 1))
    kill -9 "${wpid[$i]}"; wait "${wpid[$i]}" 2>/dev/null; kills_w=$((kills_w + 1))
    sleep 0.3; start_worker "$i"
  fi
done
# Let the read finish (a worker that joins late takes the remaining splits).
hung=0
for _ in $(seq 1800); do kill -0 $rpid 2>/dev/null || break; sleep 0.1; done
if kill -0 $rpid 2>/dev/null; then hung=1; echo "the read did not finish within 180 s of the last kill"; kill -9 $rpid; fi
wait $rpid; rc=$?
# One value per line (batches are printed as "[a b c]").
tr -d '[]' <"$tmp/out" | tr ' ' '\n' | grep -v '^$' >"$tmp/values"
delivered=$(wc -l <"$tmp/values")
duplicates=$(sort -n "$tmp/values" | uniq -d | wc -l)
echo "chaos: ${seconds}s, $nworkers workers$([ $exactly_once -eq 1 ] && echo ", exactly once"); killed workers $kills_w times, the dispatcher $kills_d times"
echo "reader exit code $rc; summary: $(grep -E '^[0-9]+ elements' "$tmp/reader.log" | tail -1)"
echo "elements: $n in the epoch, $delivered delivered, $duplicates duplicated, $((n - delivered + duplicates)) missing"
echo "processes that died on their own (crashes): $crashes"
grep -h -i "sanitizer\|assert\|terminate" "$tmp"/*.log | head -5
missing=$((n - delivered + duplicates))
[ "$duplicates" -eq 0 ] && [ "$crashes" -eq 0 ] && [ "$hung" -eq 0 ] && { [ $exactly_once -eq 0 ] || { [ "$missing" -eq 0 ] && [ "$rc" -eq 0 ]; }; }
