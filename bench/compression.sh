#!/usr/bin/env bash
# Compression: throughput of none / snappy / auto for compressible and incompressible elements,
# read from a worker over loopback and from a worker reached at this host's interface address
# (which the worker counts as a remote reader, so `auto` weighs compression against --link-gbps),
# then, as root with tc, the remote path again through a shaped LINK_GBPS link.
# Prints one line per run and the workers' `auto` decisions.
# Usage: bench/compression.sh [BATCHES] [LINK_GBPS]
set -euo pipefail
cd "$(dirname "$0")/.."
batches="${1:-1500}"
link="${2:-1}"
scripts/build.sh >/dev/null
bin=./build/tfdata
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
ip=$(hostname -I | awk '{print $1}')
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "batches of 131072 int64 (1 MiB each), $batches per run; remote worker at $ip, --link-gbps $link"
$bin dispatcher --port 0 --port-file "$tmp/d" --host 127.0.0.1 --log-level warn >/dev/null 2>&1 &
while [ ! -s "$tmp/d" ]; do sleep 0.05; done
addr="127.0.0.1:$(cat "$tmp/d")"
$bin worker --dispatcher "$addr" --port-file "$tmp/w1" --worker-address "127.0.0.1:%port%" --tag loop \
  --link-gbps "$link" --heartbeat-interval 100ms --log-level info >/dev/null 2>"$tmp/loop.log" &
$bin worker --dispatcher "$addr" --port-file "$tmp/w2" --worker-address "$ip:%port%" --tag remote \
  --link-gbps "$link" --heartbeat-interval 100ms --log-level info >/dev/null 2>"$tmp/remote.log" &
while [ ! -s "$tmp/w1" ] || [ ! -s "$tmp/w2" ]; do sleep 0.05; done
sleep 0.5  # both workers heartbeat before the first job
# One 1 MiB element, cached and repeated (the take(1).cache().repeat() trick), so the transfer and
# not the producer is what is measured. Compressible: values 0..999 in 8-byte slots (snappy ratio
# ~0.1). Incompressible: i * an odd 64-bit constant, wrapping (ratio 1.0).
for data in compressible:"op: MOD value: 1000" incompressible:"op: MUL value: 6364136223846793005"; do
  echo "op { range { stop: 131072 } } op { map { fn { arith { ${data#*:} } } } } op { batch { batch_size: 131072 } }" \
    "op { take { count: 1 } } op { cache { } } op { repeat { } }" >"$tmp/${data%%:*}.pbtxt"
done
datasets=()
for data in compressible incompressible; do
  for c in none snappy auto; do
    datasets+=("$data:$c:$($bin register "$tmp/$data.pbtxt" --dispatcher "$addr" --compression $c)")
  done
done
# run TAGS N: three reads of N elements of every dataset from the workers of each tag.
run() {
  for d in "${datasets[@]}"; do
    IFS=: read -r data c ds <<<"$d"
    for tag in $1; do
      for _ in 1 2 3; do
        line=$($bin read --dispatcher "$addr" --dataset-id "$ds" --worker-tag $tag --take "$2" --format null 2>&1 | tail -1)
        echo "$data, $c, $tag: $line"
      done
    done
  done
}
echo "== unshaped: loopback, and this host's interface address (in-kernel; CPU-bound)"
run "loop remote" "$batches"
# A real link's rate, with tc (root only): traffic to $ip goes through an htb class at LINK Gbit/s.
if [ "$(id -u)" = 0 ] && command -v tc >/dev/null &&
   tc qdisc add dev lo root handle 1: htb default 20 2>/dev/null; then
  trap 'tc qdisc del dev lo root 2>/dev/null; kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
  tc class add dev lo parent 1: classid 1:10 htb rate "${link}gbit" ceil "${link}gbit" burst 1mb cburst 1mb 2>/dev/null
  tc class add dev lo parent 1: classid 1:20 htb rate 100gbit ceil 100gbit burst 16mb cburst 16mb 2>/dev/null
  tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dst "$ip/32" flowid 1:10
  echo "== shaped: traffic to $ip limited to $link Gbit/s (tc htb on lo)"
  run remote "$((batches / 3))"
  tc qdisc del dev lo root
else
  echo "== shaped run skipped (needs root and tc with htb)"
fi
echo "auto decisions (worker log):"
grep -h "compression auto" "$tmp/loop.log" "$tmp/remote.log" | sed 's/^.*worker: /  /' || echo "  (none logged)"
